// The `xgrad` command line: `xgrad train` runs one configuration, `xgrad experiment` the scaled-vs-unscaled
// comparison. Exit codes: 0 success, 1 runtime failure, 2 bad usage (one line naming the flag and the allowed
// values), 3 a training run diverged (NaN/Inf loss or gradient; its files are kept). When `train` was stopped by
// SIGINT, SIGTERM or SIGHUP after writing a checkpoint (continue with --resume), or a sweep was stopped by it (its
// runs checkpointed; the same command resumes them), the process ends by that signal, re-raised with its default
// action, so a shell sees 128 + signal (129 for SIGHUP, 130 for SIGINT, 143 for SIGTERM) and a shell loop stops. A
// sweep exits 1 when a run failed, was interrupted, or is still running in another process.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <system_error>

#include "cli/main.h"

#include <fmt/format.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "autograd/blas.h"
#include "autograd/kernels/isa.h"
#include "autograd/out_of_memory.h"
#include "cli/flags.h"
#include "cli/presets/preset.h"
#include "cli/sweep.h"
#include "cli/sweep_cluster.h"
#include "cli/version.h"
#include "common/escape.h"
#include "common/registry.h"
#include "platform/address_space.h"
#include "platform/distributed.h"
#include "platform/environment.h"
#include "platform/signals.h"
#include "report/compare.h"
#include "report/explain.h"
#include "report/explain_measure.h"
#include "report/stats.h"
#include "report/tables.h"
#include "report/tensorboard_export.h"
#include "train/json_file.h"
#include "train/run_directory.h"
#include "train/sample.h"
#include "train/settings.h"
#include "train/settings_reference.h"
#include "train/shell_quote.h"
#include "train/trainer.h"

namespace xgrad::cli {
using train::ConfigError;
using train::TrainConfig;
namespace {

extern "C" void xgrad_on_train_stop_signal(int signal) {
  train::request_stop(signal);
  platform::arm_stop_watchdog(signal);  // a run that cannot reach the end of its step still ends
}

// A log line's text with its control characters shown (a run's name comes from a directory name, a task's file
// from the user): the terminal and train.log (a sweep child's output) never obey them.
class EscapedText : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    const std::string text = escape_control(std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<EscapedText>(); }
};

// CLI11's "The following arguments were not expected: none --scal" (its words in reverse order) as the flag that
// is not one: "--scal: not a flag of train (see 'xgrad train --help')".
std::string unexpected_arguments(const std::string& what, const std::string& command) {
  std::vector<std::string> words;
  std::istringstream in(what.substr(what.find(':') == std::string::npos ? 0 : what.find(':') + 1));
  for (std::string w; in >> w;) words.insert(words.begin(), w);  // back in the order given
  const std::string see = " (see 'xgrad " + (command.empty() ? std::string() : command + " ") + "--help')";
  const std::string of = command.empty() ? "" : " of " + command;
  for (const std::string& w : words)
    if (w.size() > 1 && w[0] == '-') return w.substr(0, w.find('=')) + ": not a flag" + of + see;
  if (words.empty()) return what + see;
  return "unexpected argument '" + words.front() + "'" + of +
         (words.front().find(',') != std::string::npos ? "; lists of values are taken by xgrad sweep" : "") + see;
}

void set_log_format() {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<EscapedText>('*').set_pattern("[%H:%M:%S] %^%l%$ %*");
  spdlog::set_formatter(std::move(formatter));
}

// SIGINT, SIGTERM and SIGHUP let the step in progress finish and a checkpoint be written; SA_RESETHAND makes a
// second signal end the process at once, for a user who does not want to wait. A signal ignored when xgrad started
// (nohup, a script's `&`) stays ignored. A sweep starts its children with these signals blocked (see sweep.cpp), so
// one sent before the handlers were in place is handled now.
// Prints `message` and returns `exit_code`. In a data-parallel run the other ranks may be waiting for this one in a
// collective: the whole job ends, with this rank's message.
// Messages name paths and values from the user's files: their control characters are shown, never obeyed.
int fail(int exit_code, const std::string& message) {
  const std::string line = escape_control(message, true);
  if (platform::world_size() > 1)
    platform::abort_job(exit_code, fmt::format("{} (rank {} of {})", line, platform::rank(), platform::world_size()));
  std::cerr << line << "\n";
  return exit_code;
}

void install_stop_handlers() {
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : platform::kStopSignals) {
    platform::catch_unless_ignored(sig, xgrad_on_train_stop_signal, SA_RESTART | SA_RESETHAND);
    sigaddset(&stop, sig);
  }
  sigprocmask(SIG_UNBLOCK, &stop, nullptr);
}

// The stored run's settings, so that the flags given with --resume are applied over them. Errors are left to
// train(), which reads the file again and reports them.
void load_resume_defaults(const std::string& dir, TrainConfig& config) {
  try {
    // A FIFO or a device in its place is refused by read_json_file without opening it (train() says so).
    config = TrainConfig::from_json(train::read_json_file(std::filesystem::path(dir) / train::kConfigFile),
                                    dir + "/config.json");
  } catch (const std::exception&) {
  }
  config.out = dir;
}

// Whether the --config file sets `key` (read again: the file was parsed once already, and is small).
bool config_has_key(const std::string& path, const std::string& key) {
  if (path.empty()) return false;
  try {
    std::ifstream in(path);
    return train::canonical_config_json(train::parse_json(in, path), path).contains(key);
  } catch (const std::exception&) {
    return false;
  }
}

std::string default_experiment_dir() {
  const std::time_t now = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "runs/experiment-%Y%m%d-%H%M%S", std::localtime(&now));
  return buf;
}

// The preset `xgrad experiment` runs: --preset NAME (or --preset=NAME) and --quick, read before parsing. An unknown
// name leaves the default preset's grid in place; the --preset check then refuses it naming the presets.
struct PresetChoice {
  std::string name = kDefaultPreset;
  bool quick = false;       // --quick as parsed
  bool grid_quick = false;  // what the grid was made with: --quick alone, read before parsing
  const Preset* entry = nullptr;
};
PresetChoice find_preset(int argc, char** argv) {
  PresetChoice choice;
  if (argc >= 2 && std::string(argv[1]) == "experiment")
    for (int i = 2; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--preset" && i + 1 < argc) choice.name = argv[i + 1];
      if (arg.rfind("--preset=", 0) == 0) choice.name = arg.substr(9);
      if (arg == "--quick") choice.quick = choice.grid_quick = true;
    }
  choice.entry = Registry<Preset>::instance().find(choice.name);
  if (!choice.entry) choice.entry = &Registry<Preset>::instance().at(kDefaultPreset);
  return choice;
}

// `message` (a ConfigError's, "--eval-n-pairs 32: ...") with a note when its flag is one the user did not give whose
// value the preset set: the user never typed it, so the message must say where it came from.
std::string with_preset_origin(const std::string& message, const PresetChoice& preset, const SweepConfig& grid,
                               const GivenSettings& given, const CLI::App& app) {
  if (message.rfind("--", 0) != 0) return message;
  const std::string flag = message.substr(0, message.find_first_of(" :=,"));
  if (const CLI::Option* option = app.get_option_no_throw(flag); option && option->count() > 0) return message;
  std::string key = flag.substr(2);
  std::replace(key.begin(), key.end(), '-', '_');
  if (!train::find_setting(key) || given.contains(key)) return message;
  const nlohmann::json value = train::get_setting(grid.base, key);
  if (value.is_null() || value == train::get_setting(experiment_defaults().base, key)) return message;
  return message + " (" + flag + " " + (value.is_string() ? value.get<std::string>() : value.dump()) + " is preset " +
         preset.name + "'s" + (preset.quick ? " --quick" : "") + " value; give " + flag + " to change it)";
}

// --preset and --quick, and the presets listed in --help with their run counts.
void add_preset_flags(CLI::App& app, PresetChoice& choice) {
  const auto& presets = Registry<Preset>::instance();
  app.add_option("--preset", choice.name,
                 "the experiment to run (allowed: " + presets.joined_names() + "; see the list below)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [&presets](std::string& name) -> std::string {
            return presets.find(name)
                       ? ""
                       : "'" + shortened_name(name) + "' is not a preset (allowed: " + presets.joined_names() + ")";
          },
          "PRESET"));
  app.add_flag("--quick", choice.quick, "the preset's small grid (what CI runs; a minute or two on 2 cores)");
  std::string footer = "Presets (cli/presets/, one file each; runs = grid points, full / --quick):";
  for (const Preset* p : presets.entries()) {
    std::string counts;
    try {
      counts = fmt::format("{} / {} runs", grid_points(p->grid(false)), grid_points(p->grid(true)));
    } catch (const std::exception& e) {
      counts = std::string("grid refused: ") + e.what();
    }
    footer += fmt::format("\n  {:<9} {} ({})", p->name, p->description, counts);
  }
  app.footer(footer + "\n");
}

// `xgrad sweep run-one DIR --index I` and `xgrad sweep status DIR`: commands on a sweep directory's manifest, which
// take none of the sweep's grid flags. Returns the exit code.
int sweep_directory_command(int argc, char** argv) {
  const std::string command = argv[2];
  CLI::App app{command == "run-one"
                   ? std::string("train one grid point of a sweep directory's manifest (sweep.json): resumes it from "
                                 "its checkpoint, does nothing if it is complete; what a Slurm array task or GNU "
                                 "parallel runs")
                   : fmt::format("the state of every grid point of a sweep directory, read from the run directories: "
                                 "one of {}",
                                 fmt::join(enum_names(train::kPointStatusNames), ", ")),
               "xgrad sweep " + command};
  std::string dir;
  long index = -1;
  app.add_option("DIR", dir, "the sweep directory (its sweep.json)")->required();
  if (command == "run-one")
    app.add_option("--index", index, "the grid point, 0 to N-1 (sweep.json's \"index\")")
        ->required()
        ->check(whole_number(0, 1000000000));
  try {
    app.parse(argc - 2, argv + 2);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(2, std::string("xgrad: ") + e.what() + " (see 'xgrad sweep " + command + " --help')");
  }
  try {
    if (command == "status") {
      EscapingStreambuf buf(std::cout);  // run names in sweep.json are data
      std::ostream out(&buf);
      print_sweep_status(dir, out);
      return 0;
    }
    return sweep_run_one(dir, index, std::filesystem::canonical("/proc/self/exe").string(), std::cout);
  } catch (const ConfigError& e) {
    return fail(2, std::string("xgrad: ") + e.what());
  } catch (const std::exception& e) {
    return fail(1, std::string("xgrad: error: ") + e.what());
  }
}

// Every subcommand's flags and what they fill in; xgrad::cli::main parses into these, then runs the one given.
struct Commands {
  CLI::App app{"xgrad: train toy attention models with and without 1/sqrt(d_k) score scaling and compare them"};
  TrainConfig train_cfg;
  std::string resume_dir, config_file;  // read before parsing: they set train's defaults
  std::string resume_flag, config_flag;
  GivenSettings train_given, probe_given;
  CLI::App* train_cmd = nullptr;
  // `sweep` takes the grid from its flags; `experiment` is the default sweep (see experiment_defaults) + compare.
  SweepFlags sweep_flags, exp_flags;
  PresetChoice preset;
  SweepConfig sweep_cfg, exp_cfg;
  std::string launcher = "local";
  SlurmOptions slurm;
  CLI::App* sweep_cmd = nullptr;
  CLI::App* exp_cmd = nullptr;
  TrainConfig probe_cfg;
  std::vector<std::size_t> probe_d_ks{4, 16, 64, 256, 1024};
  CLI::App* probe_cmd = nullptr;
  TrainConfig explain_cfg;
  GivenSettings explain_given;
  report::ExplainOptions explain_opts;
  std::string explain_out = "explain";
  CLI::App* explain_cmd = nullptr;
  report::CompareOptions compare_opts;
  CLI::App* compare_cmd = nullptr;
  std::string sample_dir;
  train::SampleOptions sample_opts;
  CLI::App* sample_cmd = nullptr;
  std::vector<std::string> export_inputs;
  std::string export_out;
  CLI::App* export_cmd = nullptr;
  CLI::App* export_tensorboard_cmd = nullptr;
  CLI::App* settings_cmd = nullptr;
};

// What every command needs before its flags are read: no clashing registrations, the BLAS core, the allocator, a
// valid SIMD environment, the log format. Returns the exit code when the program must end here, else -1.
int prepare_process(int argc, char** argv) {
  // Checked first, so that --help and --version also say which extension clashes with which entry.
  std::vector<std::string> errors = registration_errors();
  for (std::string& message : train::setting_declaration_errors()) errors.push_back(std::move(message));
  if (!errors.empty()) {
    for (const auto& message : errors) std::cerr << "xgrad: error: " << message << "\n";
    return 2;
  }
  platform::restore_blas_environment();  // before an exec or a child sees it
  platform::select_blas_core(argc, argv);
  platform::tune_allocator();
  try {
    simd::require_valid_simd_env();
  } catch (const std::invalid_argument& e) {
    std::cerr << "xgrad: error: " << e.what() << "\n";
    return 2;
  }
  set_log_format();
  return -1;
}

void add_train_command(Commands& c, int argc, char** argv) {
  c.resume_dir = find_train_flag_value(argc, argv, "--resume");
  c.config_file = find_train_flag_value(argc, argv, "--config");
  if (!c.resume_dir.empty()) load_resume_defaults(c.resume_dir, c.train_cfg);
  c.train_cmd = c.app.add_subcommand(
      "train",
      "train one configuration; writes config.json, metrics.csv, checkpoint.safetensors and summary.json "
      "(exit 3 if it diverged)");
  add_setting_flags(*c.train_cmd, Setting::kTrain, c.train_given, c.train_cfg);
  add_run_flags(*c.train_cmd, c.train_cfg, c.resume_flag, c.config_flag);
}

// The preset is read before parsing: its grid is the default the given flags override, and --help shows it.
// Returns false (having said why) when its grid cannot be made.
bool make_preset_grid(Commands& c, int argc, char** argv) {
  c.preset = find_preset(argc, argv);
  try {
    c.exp_cfg = c.preset.entry->grid(c.preset.grid_quick);
  } catch (const std::exception& e) {
    std::cerr << "xgrad: --preset " << c.preset.name << ": its grid could not be made: " << e.what() << "\n";
    return false;
  }
  return true;
}

void add_sweep_commands(Commands& c) {
  c.sweep_cmd = c.app.add_subcommand(
      "sweep", "train a grid of scale x d_k x seed x optimizer@lr as parallel runs into one sweep directory");
  add_sweep_flags(*c.sweep_cmd, c.sweep_cfg, c.sweep_flags);
  add_launcher_flags(*c.sweep_cmd, c.launcher, c.slurm);
  refuse_flags(*c.sweep_cmd, sweep_refused_flags("sweep"));
  c.sweep_cmd->get_option("--out")->required();
  c.sweep_cmd->footer(
      "On a sweep directory: `xgrad sweep run-one DIR --index I` trains grid point I of DIR/sweep.json "
      "(what a Slurm array task or GNU parallel runs); `xgrad sweep status DIR` prints every point's "
      "state.");
  c.exp_cmd = c.app.add_subcommand(
      "experiment",
      "a preset's sweep (default: dk, scaled vs unscaled at d_k 16 to 1024), then compare with the "
      "preset's report sections");
  add_preset_flags(*c.exp_cmd, c.preset);
  add_sweep_flags(*c.exp_cmd, c.exp_cfg, c.exp_flags);
  refuse_flags(*c.exp_cmd, sweep_refused_flags("experiment"));
}

void add_probe_command(Commands& c) {
  c.probe_cmd = c.app.add_subcommand(
      "probe", "no training: attention statistics at initialisation, unscaled and scaled, next to the theory");
  add_setting_flags(*c.probe_cmd, Setting::kProbe, c.probe_given, c.probe_cfg);
  refuse_flags(*c.probe_cmd, probe_refused_flags("probe"));
  add_list_flag(*c.probe_cmd, "--d-k", c.probe_d_ks, "head sizes, e.g. --d-k 4,16,64", whole_number(1, 8192));
}

void add_explain_command(Commands& c) {
  c.explain_cmd = c.app.add_subcommand(
      "explain",
      "no training: the argument for 1/sqrt(d_k), step by step, measured on the model; explain.md, "
      "explain.html and figures, with a verdict per step");
  add_setting_flags(*c.explain_cmd, Setting::kProbe, c.explain_given, c.explain_cfg);
  refuse_flags(*c.explain_cmd, probe_refused_flags("explain"));
  add_list_flag(*c.explain_cmd, "--d-k", c.explain_opts.d_ks, "head sizes, e.g. --d-k 4,16,64", whole_number(1, 8192));
  add_list_flag(
      *c.explain_cmd, "--scale", c.explain_opts.scales,
      "scalings, e.g. --scale none,sqrt_dk (allowed: " + Registry<nn::ScalingEntry>::instance().joined_names() + ")",
      CLI::IsMember(Registry<nn::ScalingEntry>::instance().names()));
  c.explain_cmd
      ->add_option("--runs", c.explain_opts.runs,
                   "run or sweep directories whose training is the evidence of "
                   "the last step")
      ->delimiter(',')
      ->check(CLI::ExistingDirectory);
  c.explain_cmd->add_option("--out", c.explain_out, "directory for explain.md, explain.html and figures/")
      ->capture_default_str();
}

void add_compare_command(Commands& c) {
  report::CompareOptions& opts = c.compare_opts;
  c.compare_cmd = c.app.add_subcommand(
      "compare", "compare run or sweep directories: table, plots (PNG, SVG), report.md and report.html");
  // Extras allowed so that an unknown flag is reported by name after parsing ("--lr: not a flag of compare"), not
  // as the directory its value would otherwise become; the directories are checked after that.
  c.compare_cmd->allow_extras();
  c.compare_cmd->add_option("dirs", opts.inputs, "run or sweep directories (of a sweep, the runs its sweep.json lists)")
      ->required();
  c.compare_cmd->add_option("--out", opts.out, "report directory (default: the first directory given)");
  c.compare_cmd
      ->add_option("--loss-threshold", opts.loss_threshold,
                   "steps-to-threshold loss in nats, > 0 (default: half the chance loss)")
      ->check(decimal_in(0, false, HUGE_VAL, false));
  c.compare_cmd->add_option("--accuracy-threshold", opts.accuracy_threshold, "steps-to-threshold accuracy, in (0, 1]")
      ->capture_default_str()
      ->check(decimal_in(0, false, 1, true));
  c.compare_cmd
      ->add_option("--compare", opts.axis,
                   "the setting whose values the verdicts compare: arms differing only in it are judged")
      ->capture_default_str()
      ->check(arm_setting_name());
  c.compare_cmd->add_option("--baseline", opts.baseline,
                            "the value of --compare the others are judged against (default: none, the unscaled "
                            "reference, for --compare scale; without arms holding it, every two values are judged)");
  c.compare_cmd->add_option("--plots", opts.plots, "draw plots with gnuplot (true/false)")
      ->default_str(opts.plots ? "true" : "false")  // CLI11 would show a bool's default as 1
      ->check(boolean_word());
  c.compare_cmd->add_flag("--include-unlisted", opts.include_unlisted,
                          "also read the run directories below a sweep that its sweep.json does not list (copied "
                          "in, or left from another sweep)");
}

void add_sample_command(Commands& c) {
  train::SampleOptions& opts = c.sample_opts;
  c.sample_cmd = c.app.add_subcommand(
      "sample",
      "generate text from a char_lm run's checkpoint: the prompt (\"\\n\" when empty, as nanoGPT) and --tokens "
      "generated bytes to stdout; well-formed UTF-8 as it is, each byte of an invalid sequence shown as \\xNN");
  c.sample_cmd->add_option("run_dir", c.sample_dir, "the run directory (xgrad train --out) with its checkpoint")
      ->required();
  c.sample_cmd->add_option("--prompt", opts.prompt, "bytes to continue; only the last max_seq_len reach the model");
  c.sample_cmd->add_option("--tokens", opts.tokens, "bytes to generate")
      ->capture_default_str()
      ->check(whole_number(1, train::kMaxSampleTokens));
  c.sample_cmd->add_option("--temperature", opts.temperature, "logits are divided by it; 0 = greedy (argmax)")
      ->capture_default_str()
      ->check(decimal_in(0, true, HUGE_VAL, false));
  c.sample_cmd->add_option("--top-k", opts.top_k, "sample among the k most likely bytes only (default: all)")
      ->check(whole_number(1, 256));  // the byte vocabulary of char_lm, the one task sample takes
  c.sample_cmd->add_option("--seed", opts.seed, "the draws' seed: the same seed gives the same text")
      ->capture_default_str()
      ->check(whole_number(0, std::numeric_limits<std::uint64_t>::max()));
}

// `xgrad export tensorboard RUN_OR_SWEEP... --out DIR`; `export` names the format so that others can join it.
void add_export_command(Commands& c) {
  c.export_cmd = c.app.add_subcommand("export", "write runs in another tool's format: export tensorboard");
  c.export_cmd->require_subcommand(0, 1);  // none or an unknown one: export_command names the formats
  c.export_cmd->allow_extras();
  c.export_tensorboard_cmd = c.export_cmd->add_subcommand(
      "tensorboard", "write each run's metrics.csv as a TensorBoard event file, one subdirectory of --out per run");
  // Not export's allowance of extras, which it inherits: an unknown flag is refused by name.
  c.export_tensorboard_cmd->allow_extras(false);
  c.export_tensorboard_cmd->add_option("dirs", c.export_inputs, "run or sweep directories")->required();
  c.export_tensorboard_cmd->add_option("--out", c.export_out, "directory to write (tensorboard --logdir DIR)")
      ->required();
}

void add_settings_command(Commands& c) {
  c.settings_cmd = c.app.add_subcommand(
      "settings",
      "print every setting (flag, config.json key, allowed values, default, which entries read it) as "
      "Markdown: docs/settings.md");
}

// The command named by argv[1] when it is one of app's, else "".
std::string known_command(CLI::App& app, int argc, char** argv) {
  const std::string first = argc > 1 ? argv[1] : "";
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    if (sub->get_name() == first) return first;
  return "";
}

// Parses the command line into `c`. Returns the exit code when the program must end here (help, a missing,
// unknown or misused command), else -1.
int parse_command_line(Commands& c, int argc, char** argv) {
  // CLI11 would say "A subcommand is required" for both a missing and a misspelt command.
  std::string commands;
  for (const CLI::App* sub : c.app.get_subcommands([](CLI::App*) { return true; }))
    commands += (commands.empty() ? "" : ", ") + sub->get_name();
  const std::string first = argc > 1 ? argv[1] : "";
  const std::string known = known_command(c.app, argc, argv);
  if (argc < 2) {
    std::cerr << "xgrad: a command is required (allowed: " << commands << "; see 'xgrad --help', 'xgrad --version')\n";
    return 2;
  }
  if (!first.empty() && first[0] != '-' && known.empty()) {
    std::cerr << "xgrad: unknown command '" << first << "' (allowed: " << commands << "; see 'xgrad --help')\n";
    return 2;
  }
  try {
    c.app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return c.app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return c.app.exit(e);
  } catch (const CLI::ExtrasError& e) {
    return fail(2, "xgrad: " + unexpected_arguments(e.what(), known));
  } catch (const CLI::ParseError& e) {
    return fail(
        2, std::string("xgrad: ") + e.what() + " (see 'xgrad " + (known.empty() ? known : known + " ") + "--help')");
  }
  return -1;
}

int train_command(Commands& c) {
  TrainConfig& cfg = c.train_cfg;
  if (!c.config_file.empty()) {
    if (!c.resume_dir.empty())
      throw ConfigError("--config: a resumed run keeps its own settings (--resume and --config exclude each other)");
    const bool overwrite = cfg.overwrite;
    cfg = read_config_file(c.config_file, "--config");
    cfg.overwrite = overwrite;
    // A run's config.json names the bytes that run read: a new run of it reads the same ones, except those of
    // a file flag given here (a choice of another file, or of the file as it is now).
    for (const data::InputFile& f : recorded_input_files(c.config_file))
      if (!c.train_given.contains(f.setting)) cfg.recorded_inputs.push_back(f);
    cfg.recorded_inputs_source = c.config_file;
  }
  apply_given_settings(cfg, c.train_given);
  cfg.resume = !c.resume_flag.empty();
  if (!cfg.resume)  // a resumed run's settings are its config.json's, read later
    for (const auto& [key, value] : c.train_given.values)
      if (const std::string unread = train::unread_setting_error(cfg, key); !unread.empty()) throw ConfigError(unread);
  if (cfg.resume) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (c.train_cmd->count("--out") && !fs::equivalent(cfg.out, c.resume_flag, ec))
      throw ConfigError("--out: " + cfg.out + " is not the --resume directory " + c.resume_flag +
                        " (a run is continued in place; --out may be left out)");
    cfg.out = c.resume_flag;
  } else if (!c.train_given.contains("data_seed") && !config_has_key(c.config_file, "data_seed")) {
    cfg.data_seed = cfg.seed;  // the data stream follows the seed unless given
  }
  // Under mpirun (or srun --mpi=pmix) each process is one rank of a data-parallel run; rank 0 speaks for all.
  platform::init_distributed(nullptr, nullptr);
  if (platform::rank() != 0) spdlog::set_level(spdlog::level::err);
  install_stop_handlers();
  const train::RunSummary s = xgrad::train::train(cfg);
  if (s.stop_signal) return platform::end_by_signal(s.stop_signal);
  spdlog::info("done: final loss {}, final accuracy {:.3f} (means over the last 20 steps){}; wrote {}/metrics.csv",
               train::format_number(s.final_loss, 4), s.final_accuracy, s.diverged ? " (diverged)" : "", cfg.out);
  return s.diverged ? 3 : 0;
}

int compare_command(Commands& c) {
  CLI::App& cmd = *c.compare_cmd;
  if (cmd.count("--out"))
    train::check_output_directory(c.compare_opts.out,
                                  "a report directory, or leave --out out to write into the first directory given");
  std::string flags;
  for (const CLI::Option* o : cmd.get_options())
    if (!o->get_lnames().empty() && o->get_lnames().front() != "help")
      flags += (flags.empty() ? "--" : ", --") + o->get_lnames().front();
  for (const std::string& extra : cmd.remaining())
    if (extra.size() > 1 && extra[0] == '-')
      throw ConfigError(extra.substr(0, extra.find('=')) + ": not a flag of compare (flags: " + flags + ")");
  if (!cmd.remaining().empty()) throw ConfigError("compare: unexpected argument '" + cmd.remaining().front() + "'");
  for (const std::string& dir : c.compare_opts.inputs) {
    std::string copy = dir;
    const std::string error = CLI::ExistingDirectory(copy);
    if (!error.empty()) throw ConfigError("compare: " + escape_name(error) + " (give run or sweep directories)");
  }
  report::run_compare(c.compare_opts, std::cout);
  return 0;
}

int export_command(Commands& c) {
  if (!*c.export_tensorboard_cmd)
    throw ConfigError("export: " +
                      (c.export_cmd->remaining().empty()
                           ? std::string("a format is required")
                           : "unknown format '" + c.export_cmd->remaining().front() + "'") +
                      " (allowed: tensorboard; see 'xgrad export --help')");
  train::check_output_directory(c.export_out, "the directory to write the event files to");
  EscapingStreambuf buf(std::cout);  // run directories' names are data: their escapes are shown, not obeyed
  std::ostream out(&buf);
  for (const report::ExportedRun& run : report::export_tensorboard(c.export_inputs, c.export_out))
    out << escape_name(run.event_file) << "  (" << escape_name(run.run_dir) << ")\n";
  out << "View with: tensorboard --logdir " << train::shell_quote_path(c.export_out) << "\n";
  return 0;
}

// The settings of probe and explain, which measure a model at initialisation: the flags given, the data seed
// following the seed, no evaluation (a data directory needs no held-out split) and no run files; the process's
// threads and denormal mode as a run would set them.
void prepare_at_initialisation(TrainConfig& cfg, const GivenSettings& given) {
  apply_given_settings(cfg, given);
  if (!given.contains("data_seed")) cfg.data_seed = cfg.seed;
  cfg.eval_every = 0;
  cfg.out = "-";
  platform::set_threads(cfg.threads);
  platform::set_flush_denormals(cfg.flush_denormals);
}

int explain_command(Commands& c) {
  train::check_output_directory(c.explain_out, "the directory for explain.md, explain.html and figures/");
  TrainConfig& cfg = c.explain_cfg;
  prepare_at_initialisation(cfg, c.explain_given);
  const auto t0 = std::chrono::steady_clock::now();
  const report::Explanation e = report::explain(cfg, c.explain_opts);
  const report::ExplainOutcome o = report::write_explanation(e, c.explain_out);
  for (const auto& s : e.sections) std::cout << fmt::format("{}. {}: {}\n", s.number, s.title, s.verdict.verdict);
  for (const auto& n : e.notes) std::cout << "note: " << n << "\n";
  if (!o.plot_note.empty()) std::cout << "note: " << o.plot_note << "\n";
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << fmt::format("Explanation: {} and {} ({} kB; {:.1f} s)\n", o.markdown_path, o.html_path,
                           o.html_bytes / 1000, secs);
  return 0;
}

int sample_command(Commands& c) {
  platform::set_threads(1);  // one thread: the same bytes from the same seed on any core count
  const std::unique_ptr<nn::AttentionModel> model = train::load_sampling_model(c.sample_dir);
  train::check_sample_options(c.sample_opts, *model);
  std::cout << train::sample_text(*model, c.sample_opts) << std::flush;
  return 0;
}

int probe_command(Commands& c) {
  TrainConfig& cfg = c.probe_cfg;
  prepare_at_initialisation(cfg, c.probe_given);
  const auto rows = report::probe(cfg, c.probe_d_ks, {"none", "sqrt_dk"});
  std::cout << report::format_probe_table(rows);
  return 0;
}

// A sweep on Slurm: writes the array script and submits it (or says how to), then returns.
int slurm_sweep_command(const SweepConfig& cfg, const SlurmOptions& slurm, std::size_t planned) {
  const SlurmSubmission submission = prepare_slurm_sweep(cfg, slurm);
  const std::string dir = train::shell_quote_path(cfg.out);
  std::cout << "sweep: " << submission.points << " grid points in " << cfg.out << "/sweep.json; Slurm array "
            << "script " << submission.script << "\n"
            << grid_summary(cfg, planned) << "\n";
  if (submission.command.empty()) {
    std::cout << "every grid point is complete or running; nothing to submit (xgrad sweep status " << dir << ")\n";
    return 0;
  }
  std::string line;
  for (const std::string& word : submission.command) line += (line.empty() ? "" : " ") + train::shell_quote(word);
  if (!slurm.submit) {
    std::cout << submission.indices.size() << " point(s) to run; submit them with:\n  " << line << "\n";
    return 0;
  }
  const std::string job = submit_to_slurm(submission.command);
  std::cout << "submitted job " << job << ": " << submission.indices.size() << " point(s), " << line << "\n"
            << "follow it with: xgrad sweep status " << dir << "\n";
  return 0;
}

// `xgrad explain` on an experiment's model, head sizes and scalings, with its runs as the training evidence, into
// <sweep>/explain/ (report.html links it). A failure costs the experiment only that page: it is reported and the
// report is written without it.
void explain_experiment(const SweepConfig& cfg) {
  report::ExplainOptions options;
  options.d_ks = cfg.d_ks;
  options.scales = cfg.scales;
  std::stable_partition(options.scales.begin(), options.scales.end(), report::is_reference_scale);  // unscaled first
  options.runs = {cfg.out};
  TrainConfig base = cfg.base;
  base.out = "-";
  base.eval_every = 0;
  // A preset of two tasks holds the other task's settings too (char_lm's text beside kv_recall): explain's model is
  // the base task's, which does not read them.
  nlohmann::json read = nlohmann::json::object();
  for (const auto& [key, value] : base.settings.json().items())
    if (train::unread_setting_error(base, key).empty()) read[key] = value;
  base.settings = SettingValues(read);
  try {
    const report::Explanation e = report::explain(base, options);
    const report::ExplainOutcome o =
        report::write_explanation(e, (std::filesystem::path(cfg.out) / "explain").string());
    std::cout << "\nThe argument, measured: " << o.html_path << "\n";
    for (const auto& s : e.sections) std::cout << fmt::format("  {}. {}: {}\n", s.number, s.title, s.verdict.verdict);
  } catch (const std::exception& e) {
    spdlog::warn("explain: {}; the report is written without explain.html", e.what());
  }
}

// A sweep run here, its runs `jobs` at a time; an experiment then writes its report.
int local_sweep_command(const SweepConfig& cfg, const PresetChoice* preset, std::size_t planned) {
  // A sweep outlives a reader of its output that went away (`| head -1`): its runs and sweep.json matter more
  // than its progress lines, which then go nowhere. Its runs get SIGPIPE back (see spawn in sweep.cpp).
  std::signal(SIGPIPE, SIG_IGN);
  const std::string start_line =
      fmt::format("{}: {} runs into {}, {} at a time, {} thread(s) each; OpenBLAS core {}",
                  preset ? "experiment --preset " + preset->name + (preset->quick ? " --quick" : "") : "sweep", planned,
                  cfg.out, cfg.jobs, cfg.base.threads, blas::core_name()) +
      "\n" + grid_summary(cfg, planned);
  const auto t0 = std::chrono::steady_clock::now();
  const SweepResult result = run_sweep(
      cfg, [](const std::string& line) { spdlog::info("{}", line); }, start_line);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string summary = sweep_summary(result, secs) + "; index: " + cfg.out + "/sweep.json";
  if (sweep_exit_code(result) == 0)
    spdlog::info("{}", summary);
  else
    spdlog::warn("{}", summary);
  if (result.stop_signal) return platform::end_by_signal(result.stop_signal);
  if (preset) {
    explain_experiment(cfg);
    report::CompareOptions options;
    options.inputs = {cfg.out};
    std::cout << "\n";
    report::run_compare(options, std::cout);
    std::cout << "\nReport: " << cfg.out << "/report.md (plots in " << cfg.out << "/plots/)\n"
              << "Runs: " << cfg.out << "/runs/<name>/ (config.json, metrics.csv, summary.json, train.log)\n"
              << "Wall time: " << static_cast<int>(secs) << " s\n";
  } else {
    std::cout << "Compare the runs with: xgrad compare " << train::shell_quote_path(cfg.out) << "\n";
  }
  return sweep_exit_code(result);
}

// `xgrad sweep` and `xgrad experiment`.
int sweep_command(Commands& c) {
  const bool experiment = c.exp_cmd->parsed();
  CLI::App& cmd = experiment ? *c.exp_cmd : *c.sweep_cmd;
  SweepConfig& cfg = experiment ? c.exp_cfg : c.sweep_cfg;
  finish_sweep_flags(cmd, cfg, experiment ? c.exp_flags : c.sweep_flags);
  if (!cmd.count("--out")) cfg.out = default_experiment_dir();  // an --out given empty is refused as such
  if (experiment) {
    if (c.preset.quick != c.preset.grid_quick)  // --quick=true: the grid was made before CLI11 read the value
      throw ConfigError("--quick takes no value: give --quick alone for the small grid, or leave it out");
    cfg.preset = c.preset.name;
    cfg.preset_quick = c.preset.quick;
  }
  cfg.executable = std::filesystem::canonical("/proc/self/exe").string();
  if (!experiment) check_launcher_flags(cmd, c.launcher);
  if (c.launcher == "slurm") {  // Slurm places the tasks on its nodes: no local limit on --jobs x --threads
    cfg.jobs = 1;
    cfg.runs_here = false;
  }
  const auto planned = plan_sweep(cfg);
  if (c.launcher == "slurm") return slurm_sweep_command(cfg, c.slurm, planned.size());
  return local_sweep_command(cfg, experiment ? &c.preset : nullptr, planned.size());
}

// Runs the parsed command; its errors become an exit code and a message.
int run_command(Commands& c) {
  try {
    if (*c.train_cmd) return train_command(c);
    if (*c.settings_cmd) {
      train::write_settings_reference(std::cout);
      return 0;
    }
    if (*c.compare_cmd) return compare_command(c);
    if (*c.export_cmd) return export_command(c);
    if (*c.probe_cmd) return probe_command(c);
    if (*c.explain_cmd) return explain_command(c);
    if (*c.sample_cmd) return sample_command(c);
    if (*c.sweep_cmd || *c.exp_cmd) return sweep_command(c);
  } catch (const ConfigError& e) {
    if (c.exp_cmd->parsed())
      return fail(2, "xgrad: " + with_preset_origin(e.what(), c.preset, c.exp_cfg, c.exp_flags.given, *c.exp_cmd));
    return fail(2, std::string("xgrad: ") + e.what());
  } catch (const std::invalid_argument& e) {
    return fail(2, std::string("xgrad: ") + e.what());
  } catch (const std::bad_alloc&) {
    // Only the commands that build a model from flags have these flags to reduce.
    const bool model_flags = *c.train_cmd || *c.sweep_cmd || *c.exp_cmd;
    return fail(1, "xgrad: error: " + platform::out_of_memory_text() +
                       (model_flags                       ? "; reduce --d-model, --d-ff, --n-layers or --batch-size"
                        : platform::address_space_limit() ? "; raise the limit"
                                                          : ""));
  } catch (const std::system_error& e) {
    // EAGAIN from std::thread: under an address-space limit, the new thread's stack did not fit.
    const std::string limit = platform::address_space_limit_text();
    const bool thread = e.code() == std::errc::resource_unavailable_try_again && !limit.empty();
    return fail(1,
                std::string("xgrad: error: ") + e.what() + (thread ? " (starting a thread under " + limit + ")" : ""));
  } catch (const std::exception& e) {
    return fail(1, std::string("xgrad: error: ") + e.what());
  }
  return 2;
}

// Everything main does; main turns an allocation that fails while the commands and their flags are being set up
// (under a tight `ulimit -v`) into the same message as one that fails while a command runs.
int main_unguarded(int argc, char** argv) {
  if (const int code = prepare_process(argc, argv); code >= 0) return code;
  Commands c;
  c.app.require_subcommand(1);
  c.app.footer("xgrad --version: the version, the commit and the libraries this build uses");
  if (argc == 2 && std::string(argv[1]) == "--version") {
    print_version(std::cout);
    return 0;
  }
  if (argc >= 3 && std::string(argv[1]) == "sweep" &&
      (std::string(argv[2]) == "run-one" || std::string(argv[2]) == "status"))
    return sweep_directory_command(argc, argv);
  add_train_command(c, argc, argv);
  if (!make_preset_grid(c, argc, argv)) return 1;
  add_sweep_commands(c);
  add_probe_command(c);
  add_explain_command(c);
  add_compare_command(c);
  add_sample_command(c);
  add_export_command(c);
  add_settings_command(c);
  if (const int code = parse_command_line(c, argc, argv); code >= 0) return code;
  // Only a training run is data-parallel. Under mpirun every rank would run the whole command (a sweep's runs would
  // each start as ranks of a job they are not part of).
  const std::string command = known_command(c.app, argc, argv);
  if (!command.empty() && command != "train" && platform::started_by_launcher()) {
    std::cerr << "xgrad: " << command << " does not run under mpirun or srun --mpi=pmix: only 'xgrad train' is "
              << "data-parallel (run a sweep's points as a Slurm array: xgrad sweep --launcher slurm)\n";
    return 2;
  }
  return run_command(c);
}

}  // namespace

int main(int argc, char** argv) {
  // Room for the out-of-memory message, released before it is built: a limit reached while the command starts leaves
  // none.
  std::unique_ptr<char[]> reserve;
  try {
    reserve.reset(new char[std::size_t(1) << 16]);
    return main_unguarded(argc, argv);
  } catch (const std::bad_alloc&) {
    reserve.reset();
    try {
      return fail(1, "xgrad: error: " + platform::out_of_memory_text() +
                         (platform::address_space_limit() ? "; raise the limit" : ""));
    } catch (const std::bad_alloc&) {
      write_out_of_memory_line();
      return 1;
    }
  }
}

}  // namespace xgrad::cli
