#include "cli/flags.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <thread>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/escape.h"
#include "common/whole_number.h"
#include "data/registry.h"
#include "nn/optim.h"
#include "nn/scaling.h"
#include "platform/environment.h"
#include "train/json_file.h"
#include "train/settings.h"

namespace xgrad::cli {
using train::ConfigError;
using train::find_component;
using train::TrainConfig;

CLI::Validator whole_number(std::uint64_t lo, std::uint64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator([lo, hi](std::string& s) { return whole_number_text_error(s, lo, hi); }, "INT in " + range);
}

CLI::Validator decimal_number() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        static const std::regex number(R"([+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)");
        if (!std::regex_match(s, number)) return "must be a decimal number, got '" + s + "'";
        if (!std::isfinite(std::strtod(s.c_str(), nullptr))) return "must be finite, got " + s;
        return "";
      },
      "NUMBER");
}

CLI::Validator boolean_word() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s == "true" || s == "false" || s == "1" || s == "0") return "";
        return "must be true or false, got '" + s + "'";
      },
      "true|false");
}

CLI::Validator decimal_in(double lo, bool lo_closed, double hi, bool hi_closed) {
  const std::string range = std::string(lo_closed ? "[" : "(") + CLI::detail::to_string(lo) + ", " +
                            (std::isinf(hi) ? std::string("inf") : CLI::detail::to_string(hi)) +
                            (hi_closed ? "]" : ")");
  return CLI::Validator(
      [lo, lo_closed, hi, hi_closed, range](std::string& s) -> std::string {
        std::string copy = s;
        const std::string not_number = decimal_number()(copy);
        if (!not_number.empty()) return not_number + " in " + range;
        const double v = std::strtod(s.c_str(), nullptr);
        const bool above = lo_closed ? v >= lo : v > lo;
        const bool below = hi_closed ? v <= hi : v < hi;
        if (!above || !below) return "must be in " + range + ", got " + s;
        return "";
      },
      "NUMBER in " + range);
}

void refuse_flags(CLI::App& app, const std::vector<RefusedFlag>& flags) {
  for (const RefusedFlag& f : flags) {
    if (CLI::Option* registered = app.get_option_no_throw(f.flag)) app.remove_option(registered);
    const std::string flag = f.flag, reason = f.reason;
    // Listed in --help under their own heading with the reason (a hidden option, group "", has no name in CLI11's
    // errors). The callback refuses; with expected(0, 1) a bare `--lr` is refused the same way as `--lr 0.1`.
    app.add_option(
           flag, [flag, reason](const CLI::results_t&) -> bool { throw CLI::ValidationError(flag, reason); },
           "not taken: " + reason)
        ->expected(0, 1)
        ->group("Not taken by this command")
        ->type_name("");
  }
}

std::vector<RefusedFlag> sweep_refused_flags(const std::string& command) {
  std::vector<RefusedFlag> out{
      {"--lr", command + " takes learning rates through --arms (e.g. --arms sgd@0.01,adamw@0.001)"},
      {"--optimizer", command + " takes optimizers through --arms (e.g. --arms sgd@0.01,adamw@0.001)"},
      {"--seed", command + " sets each run's seed from --seeds (e.g. --seeds 0,1,2; --data-seed is the data stream "
                           "of seed 0)"},
  };
  if (const data::TaskEntry* data_task = data::TaskRegistry::instance().find("data"))
    for (const Setting& s : data_task->settings) {
      const std::string flag = s.flag();
      out.push_back(
          {flag, command + " does not pass " + flag + " to its runs (--task data is not available to " + command + ")" +
                     (s.key == "data" ? "; train on a data directory with xgrad train --task data --data DIR" : "")});
    }
  return out;
}

CLI::Option* add_list_flag_raw(CLI::App& app, const std::string& flag,
                               std::function<void(const std::vector<std::string>&)> store, const std::string& help,
                               const CLI::Validator& each) {
  return app
      .add_option(
          flag,
          [flag, store, each](const CLI::results_t& results) -> bool {
            std::vector<std::string> items;
            for (const std::string& given : results) {
              std::size_t start = 0;
              while (true) {
                const std::size_t comma = given.find(',', start);
                std::string item = given.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
                if (item.empty())
                  throw CLI::ValidationError(
                      flag, "empty entry in '" + given + "' (give comma-separated values, none of them empty)");
                const std::string error = each(item);
                if (!error.empty()) throw CLI::ValidationError(flag, error);
                items.push_back(item);
                if (comma == std::string::npos) break;
                start = comma + 1;
              }
            }
            store(items);
            return true;
          },
          help)
      ->type_name(each.get_description().empty() ? "LIST" : each.get_description() + ",...")
      ->expected(1, CLI::detail::expected_max_vector_size)
      ->allow_extra_args();
}

namespace {

// The message of the ConfigError `parse` throws without its leading `prefix` (CLI11 names the flag itself), or ""
// when it throws none: what a validator returns.
std::string config_error_text(const std::function<void()>& parse, const std::string& prefix) {
  try {
    parse();
  } catch (const ConfigError& e) {
    std::string message = e.what();
    if (message.rfind(prefix, 0) == 0) message = message.substr(prefix.size());
    return message;
  }
  return "";
}

}  // namespace

CLI::Validator arm_entry() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        const std::size_t at = s.find('@');
        if (at != std::string::npos) {
          std::string lr = s.substr(at + 1);
          const std::string error = decimal_number()(lr);
          if (!error.empty())
            return "learning rate in '" + s + "' " + error +
                   " (form: optimizer@lr, e.g. sgd@0.1 or adamw@0.003; optimizers: " +
                   nn::OptimizerRegistry::instance().joined_names() + ")";
        }
        return config_error_text([&] { parse_arm(s); }, "--arms: ");
      },
      "OPTIMIZER@LR");
}

CLI::Validator arm_setting_name() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::vector<std::string> names;
        for (const train::CoreSetting& c : train::core_settings())
          if (c.setting.role == Setting::Role::arm) {
            if (c.setting.key == s) return "";
            names.push_back(c.setting.key);
          }
        return "must be a setting that defines an arm (" + fmt::format("{}", fmt::join(names, ", ")) + "), got '" +
               escape_name(s) + "'";
      },
      "SETTING");
}

std::vector<RefusedFlag> probe_refused_flags(const std::string& command) {
  std::vector<std::string> flags;
  for (const train::CoreSetting& c : train::core_settings())
    if ((c.setting.commands & Setting::kSweep) && !(c.setting.commands & Setting::kProbe))
      flags.push_back(c.setting.flag());
  const std::string batch = command == "probe" ? "one forward batch" : "one forward and backward batch";
  std::vector<RefusedFlag> out;
  for (const train::ComponentSetting& c : train::component_settings()) {
    const auto owns = [&](const char* scale) { return std::count(c.owners.begin(), c.owners.end(), scale) > 0; };
    if (c.component == "optimizer" || c.component == "lr_schedule") flags.push_back(c.setting.flag());
    if (command == "probe" && c.component == "scale" && !owns("none") && !owns("sqrt_dk"))
      out.push_back({c.setting.flag(), "probe measures the unscaled and 1/sqrt(d_k) scores only, so it does not read " +
                                           c.setting.flag() + " (xgrad explain --scale " + c.owners.front() +
                                           " measures " + c.owners.front() + ")"});
  }
  for (const std::string& flag : flags)
    if (flag == "--parametrization" || flag == "--base-width")
      out.push_back({flag, command +
                               " measures the standard parametrization at initialisation (muP changes only the "
                               "readout and the lrs there), so it does not read " +
                               flag + "; leave it out"});
    else
      out.push_back({flag, command + " trains nothing (" + batch + " at initialisation), so it does not read " + flag +
                               "; leave it out"});
  return out;
}

bool GivenSettings::contains(const std::string& key) const {
  for (const auto& [k, v] : values)
    if (k == key) return true;
  return false;
}

namespace {

std::string join(const std::vector<std::string>& names, const std::string& separator) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : separator) + n;
  return out;
}

// One flag for one declared setting. Booleans also take the bare flag (--shuffle means --shuffle true).
void add_setting_flag(CLI::App& app, Setting setting, const std::string& help, GivenSettings& given,
                      const nlohmann::json& shown, std::function<std::string(const std::string&)> extra_check) {
  const std::string flag = setting.flag(), key = setting.key;
  const bool boolean = setting.type == Setting::Type::boolean;
  CLI::Option* option = app.add_option(
      flag,
      [flag, key, setting, boolean, extra_check, &given](const CLI::results_t& results) -> bool {
        if (results.size() > 1) throw CLI::ValidationError(flag, "given more than once");
        std::string text = results.empty() ? std::string() : results.front();
        if (boolean && text.empty()) text = "true";  // the bare flag
        if (extra_check) {
          const std::string error = extra_check(text);
          if (!error.empty()) throw CLI::ValidationError(flag, error);
        }
        nlohmann::json value;
        std::string error;
        const std::string whole = whole_setting_text(setting, text, error);
        if (error.empty()) error = parse_setting_value(setting, whole, value);
        if (!error.empty()) throw CLI::ValidationError(flag, error);
        if (setting.type == Setting::Type::path && !text.empty())
          value = std::filesystem::absolute(text).lexically_normal().string();
        given.values.emplace_back(key, value);
        return true;
      },
      help);
  std::string type;
  switch (setting.type) {
    case Setting::Type::boolean:
      type = "true|false";
      break;
    case Setting::Type::whole:
      type = "INT in " + range_text(setting);
      break;
    case Setting::Type::number:
      type = "NUMBER in " + range_text(setting);
      break;
    case Setting::Type::text:
      type = setting.takes_number      ? "{" + join(setting.choices, ",") + "}|NUMBER in " + range_text(setting)
             : setting.choices.empty() ? "TEXT"
                                       : "{" + join(setting.choices, ",") + "}";
      break;
    case Setting::Type::path:
      type = "PATH";
      break;
  }
  option->type_name(type);
  const bool has_default = !shown.is_null() && !(shown.is_string() && shown.get<std::string>().empty());
  if (boolean) {
    option->expected(0, 1);
    // CLI11 hands a bare option of no value its default_str: the default is shown as the help text (the same text
    // default_str gives) instead, so that a bare --tensorboard reaches the callback as no value, meaning true.
    option->option_text(type + (has_default ? "=" + setting_value_text(shown) : ""));
  } else {
    option->expected(1, CLI::detail::expected_max_vector_size);  // a repeated flag is refused by the callback
    if (has_default) option->default_str(setting_value_text(shown));
  }
}

}  // namespace

void add_setting_flags(CLI::App& app, unsigned command, GivenSettings& given, const TrainConfig& shown,
                       const std::string& no_data_task) {
  for (const train::CoreSetting& c : train::core_settings()) {
    if (!(c.setting.commands & command)) continue;
    Setting s = c.setting;
    std::function<std::string(const std::string&)> extra;
    std::string help = s.help;
    if (const train::Component* component = find_component(s.key)) {
      s.choices = component->names();
      if (!no_data_task.empty() && s.key == "task") {
        s.choices.erase(std::remove(s.choices.begin(), s.choices.end(), "data"), s.choices.end());
        extra = [no_data_task](const std::string& text) -> std::string {
          if (text == "data")
            return "data is not taken by " + no_data_task +
                   " (its runs get no --data directory); train on a "
                   "data directory with xgrad train --task data --data DIR";
          return "";
        };
      }
      help += " (allowed: " + join(s.choices, ", ") + ")";
    }
    // The value shown is the one the command starts from: 0 for d_k and d_ff means "derived", not the derived size.
    nlohmann::json value = c.get(shown);
    if (s.key == "d_k") value = shown.model.d_k;
    if (s.key == "d_ff") value = shown.model.d_ff;
    if (s.key == "data_seed" && (command & Setting::kTrain)) value = nullptr;  // default: --seed
    // "" is their default (no evaluation at another length): given empty, the flag is a mistake, as in list flags.
    if (s.key == "eval_seq_len" || s.key == "eval_n_pairs")
      extra = [](const std::string& text) -> std::string {
        return text.empty() ? "empty entry in '' (leave the flag out to evaluate at no other length)" : "";
      };
    add_setting_flag(app, s, help, given, value, extra);
  }
  for (const train::ComponentSetting& c : train::component_settings()) {
    // Which entries read it, unless the declaration's help already says so.
    const std::string owners = join(c.owners, "/") + ": ";
    const std::string help = c.setting.help.rfind(owners, 0) == 0 ? c.setting.help : owners + c.setting.help;
    const nlohmann::json value =
        shown.settings.contains(c.setting.key) ? shown.settings.json().at(c.setting.key) : c.setting.default_value;
    add_setting_flag(app, c.setting, help, given, value, nullptr);
  }
}

void apply_given_settings(TrainConfig& config, const GivenSettings& given) {
  for (const auto& [key, value] : given.values)
    if (find_component(key)) train::set_setting(config, key, value);
  for (const auto& [key, value] : given.values)
    if (!find_component(key)) train::set_setting(config, key, value);
}

void add_run_flags(CLI::App& app, TrainConfig& c, std::string& resume_dir, std::string& config_file) {
  app.add_flag("--overwrite", c.overwrite, "replace a run already in --out");
  app.add_option("--resume", resume_dir,
                 "continue the run in DIR from its checkpoint (its settings are kept; --steps may be raised)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--config", config_file,
                 "start from the settings in FILE (a config.json of a run, or any subset of its keys); flags given "
                 "override them")
      ->check(CLI::ExistingFile);
}

std::string find_train_flag_value(int argc, char** argv, const std::string& flag) {
  if (argc < 2 || std::string(argv[1]) != "train") return "";
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == flag && i + 1 < argc) return argv[i + 1];
    if (arg.rfind(flag + "=", 0) == 0) return arg.substr(flag.size() + 1);
  }
  return "";
}

TrainConfig read_config_file(const std::string& path, const std::string& flag) {
  std::ifstream in(path);
  if (!in) throw ConfigError(flag + ": cannot read " + path);
  nlohmann::json j;
  try {
    j = train::parse_json(in, path);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(flag + ": " + path + " is not valid JSON: " + e.what());
  }
  TrainConfig config = TrainConfig::from_json(j, path);
  const std::filesystem::path dir = std::filesystem::absolute(path).parent_path();
  if (j.is_object())
    for (const auto& [key, value] : j.items()) {
      const Setting* declared = train::find_setting(key);
      if (!declared || declared->type != Setting::Type::path || !value.is_string()) continue;
      const std::string text = value.get<std::string>();
      if (!text.empty() && std::filesystem::path(text).is_relative())
        train::set_setting(config, key, (dir / text).lexically_normal().string());
    }
  return config;
}

std::vector<data::InputFile> recorded_input_files(const std::string& path) {
  std::vector<data::InputFile> files;
  try {
    std::ifstream in(path);
    const nlohmann::json j = train::parse_json(in, path);
    if (!j.is_object() || !j.contains("inputs")) return files;
    if (!j.at("inputs").is_array()) throw std::invalid_argument("not a list");
    for (const nlohmann::json& f : j.at("inputs")) files.push_back(data::InputFile::from_json(f));
  } catch (const nlohmann::json::exception&) {
    return files;  // read_config_file reports a file that is not JSON
  } catch (const std::invalid_argument& e) {
    throw ConfigError("--config: " + path + ": 'inputs' is not what xgrad writes (" + e.what() + ")");
  }
  return files;
}

SweepConfig experiment_defaults() {
  SweepConfig c;
  c.base.steps = 600;
  c.base.batch_size = 64;
  c.base.log_every = 10;
  c.base.print_every = 100;
  c.d_ks = {16, 64, 256};
  c.scales = {"sqrt_dk", "none"};
  c.seeds = {0, 1, 2};
  c.arms = {{"sgd", 0.01}, {"sgd", 0.03}, {"adamw", 1e-3}};
  const unsigned cores = std::thread::hardware_concurrency();
  c.jobs = cores ? static_cast<int>(cores) : 1;
  return c;
}

void add_sweep_flags(CLI::App& app, SweepConfig& config, SweepFlags& flags) {
  add_setting_flags(app, Setting::kSweep, flags.given, config.base, app.get_name());
  flags.scales = config.scales;
  for (auto& a : config.arms) flags.arms.push_back(a.optimizer + "@" + CLI::detail::to_string(a.lr));
  flags.seeds = config.seeds;
  flags.d_ks = config.d_ks;
  add_list_flag(
      app, "--scale", flags.scales,
      "scalings, e.g. --scale sqrt_dk,none (allowed: " + Registry<nn::ScalingEntry>::instance().joined_names() + ")",
      CLI::IsMember(Registry<nn::ScalingEntry>::instance().names()));
  add_list_flag(app, "--d-k", flags.d_ks, "head sizes, e.g. --d-k 16,64,256 (d_model stays --d-model)",
                whole_number(1, 8192));
  add_list_flag(app, "--seeds", flags.seeds, "weight seeds; seed k also picks data stream data_seed + k",
                whole_number(0, UINT64_MAX));
  add_list_flag(app, "--arms", flags.arms, "optimizer@lr pairs, e.g. --arms sgd@0.1,adamw@0.003", arm_entry());
  app.add_option("--grid", flags.grid,
                 "one more axis: any setting and its values, e.g. --grid d_model=16,64 --grid n_pairs=4,8 (repeatable)")
      ->type_name("KEY=V1,V2,...")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return config_error_text([&] { parse_grid_axis(text); }, "--grid: ");
          },
          "KEY=V1,V2,..."));
  app.add_option("--jobs", config.jobs, "runs in parallel (default: one per core)")
      ->capture_default_str()
      ->check(whole_number(1, 256));
  app.add_option("--out", config.out,
                 "sweep directory (sweep: required; experiment: default runs/experiment-<date>-<time>)");
}

void add_launcher_flags(CLI::App& app, std::string& launcher, SlurmOptions& slurm) {
  app.add_option("--launcher", launcher,
                 "local: run the grid here, --jobs at a time; slurm: write DIR/sweep.sbatch, a job array of one task "
                 "per grid point, and print its sbatch command (or run it: --submit)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return text == "local" || text == "slurm" ? "" : "must be local or slurm, got '" + text + "'";
          },
          "local|slurm"));
  app.add_option("--max-parallel", slurm.max_parallel, "slurm: array tasks running at once (--array=...%K)")
      ->capture_default_str()
      ->check(whole_number(1, 100000));
  app.add_option("--partition", slurm.partition, "slurm: the partition (default: the cluster's default)")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            for (char c : text)
              if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.' && c != ',')
                return "must be a partition name (letters, digits, '_', '-', '.', ','), got '" + text + "'";
            return text.empty() ? "must not be empty" : "";
          },
          "NAME"));
  app.add_option("--time", slurm.time,
                 "slurm: time limit per grid point, as sbatch takes it (minutes, H:M:S, D-H:M:S; default: the "
                 "partition's)")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return is_slurm_time(text) ? ""
                                       : "must be a Slurm time limit (allowed: minutes, M:S, H:M:S, D-H, D-H:M, "
                                         "D-H:M:S, UNLIMITED), got '" +
                                             text + "'";
          },
          "TIME"));
  app.add_option("--cpus-per-task", slurm.cpus_per_task, "slurm: CPUs per grid point (default: --threads)")
      ->check(whole_number(1, 4096));
  app.add_flag("--submit", slurm.submit, "slurm: run sbatch (else print its command)");
}

void check_launcher_flags(const CLI::App& app, const std::string& launcher) {
  if (launcher == "local") {
    for (const char* flag : {"--max-parallel", "--partition", "--time", "--cpus-per-task", "--submit"})
      if (app.count(flag))
        throw ConfigError(std::string(flag) + ": a flag of --launcher slurm (this sweep runs here: --launcher local, " +
                          "which runs --jobs at a time)");
  } else if (app.count("--jobs")) {
    throw ConfigError(
        "--jobs: --launcher slurm runs --max-parallel array tasks at a time (allowed with --jobs: "
        "--launcher local)");
  }
}

GridAxis parse_grid_axis(const std::string& text) {
  const std::size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("--grid: '" + text + "' is not KEY=V1,V2,... (e.g. --grid d_model=16,64)");
  GridAxis axis;
  axis.key = text.substr(0, eq);
  static const std::vector<std::pair<std::string, std::string>> own_flags{
      {"scale", "--scale"},    {"d_k", "--d-k"}, {"seed", "--seeds"}, {"data_seed", "--seeds"},
      {"optimizer", "--arms"}, {"lr", "--arms"}, {"out", "--out"}};
  for (const auto& [key, flag] : own_flags)
    if (axis.key == key) throw ConfigError("--grid: " + key + " is an axis of its own: give it with " + flag);
  const Setting* s = train::find_setting(axis.key);
  if (!s)
    throw ConfigError("--grid: '" + axis.key + "' is not a setting (settings are config.json keys, e.g. d_model)");
  if (!(s->commands & Setting::kSweep)) throw ConfigError("--grid: " + axis.key + " is not taken by sweep");
  for (const RefusedFlag& refused : sweep_refused_flags("sweep"))
    if (refused.flag == s->flag()) throw ConfigError("--grid: " + refused.reason);
  const std::string values = text.substr(eq + 1);
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = values.find(',', start);
    const std::string item = values.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw ConfigError("--grid: empty value in '" + text + "'");
    nlohmann::json value;
    Setting declared = *s;
    if (const train::Component* component = find_component(axis.key)) declared.choices = component->names();
    std::string error;
    const std::string whole = whole_setting_text(declared, item, error);
    if (error.empty()) error = parse_setting_value(declared, whole, value);
    if (!error.empty()) throw ConfigError("--grid: " + axis.key + "=" + item + ": " + error);
    for (const auto& v : axis.values)
      if (v == value) throw ConfigError("--grid: " + axis.key + "=" + item + " is given twice");
    axis.values.push_back(value);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return axis;
}

void finish_sweep_flags(const CLI::App& app, SweepConfig& config, const SweepFlags& flags) {
  apply_given_settings(config.base, flags.given);
  if (!flags.given.contains("data_seed")) config.base.data_seed = 0;
  config.scales = flags.scales;
  config.arms.clear();
  for (auto& a : flags.arms) config.arms.push_back(parse_arm(a));
  config.seeds = flags.seeds;
  config.d_ks = flags.d_ks;
  // A preset's own axes (SweepConfig::grid) stay unless --grid is given, as its scales, seeds and arms do.
  if (app.count("--grid") > 0) config.grid.clear();
  // A flag given for one of them replaces it, as --scale replaces the preset's scales: its value holds for every run.
  config.grid.erase(std::remove_if(config.grid.begin(), config.grid.end(),
                                   [&](const GridAxis& axis) { return flags.given.contains(axis.key); }),
                    config.grid.end());
  for (const std::string& text : flags.grid) {
    GridAxis axis = parse_grid_axis(text);
    for (const GridAxis& other : config.grid)
      if (other.key == axis.key) throw ConfigError("--grid: " + axis.key + " is given twice");
    if (flags.given.contains(axis.key))
      throw ConfigError("--grid: " + axis.key + " is also given as " + train::flag_of(axis.key) + "; give it once");
    config.grid.push_back(std::move(axis));
  }
  for (const auto& [axis, flag] : {std::pair<const char*, const char*>{"scale", "--scale"},
                                   {"d_k", "--d-k"},
                                   {"arms", "--arms"},
                                   {"seed", "--seeds"},
                                   {"grid", "--grid"}})
    if (app.count(flag) == 0) config.axes_from_defaults.insert(axis);
  config.base.out = config.out.empty() ? "-" : config.out;  // replaced per run
  // Unless given, no more runs at once than the CPUs hold at --threads each (plan_sweep refuses more, as train
  // refuses --threads above the CPUs).
  if (app.count("--jobs") == 0)
    config.jobs =
        std::max(1, std::min(config.jobs, platform::available_cpus() / static_cast<int>(config.base.threads)));
}

}  // namespace xgrad::cli
