#include "train/config.h"

#include <algorithm>
#include <cfloat>
#include <cstdlib>
#include <filesystem>
#include <tuple>
#include <type_traits>

#include <fmt/format.h>

#include "common/whole_number.h"
#include "data/npy.h"
#include "data/token_arrays.h"
#include "nn/lr_schedule.h"
#include "nn/optim.h"
#include "platform/address_space.h"
#include "platform/environment.h"
#include "train/length_eval.h"
#include "train/settings.h"

namespace xgrad::train {

namespace {
void require(bool ok, const std::string& message) {
  if (!ok) throw ConfigError(message);
}

// What a declaration accepts, for messages about a stored value.
std::string expected_value(const Setting& s) {
  switch (s.type) {
    case Setting::Type::boolean:
      return "true or false";
    case Setting::Type::whole:
      return "a whole number in " + range_text(s);
    case Setting::Type::number:
      return "a finite number in " + range_text(s);
    case Setting::Type::text:
    case Setting::Type::path: {
      std::string allowed;
      for (const auto& c : s.choices) allowed += (allowed.empty() ? "" : ", ") + c;
      if (s.takes_number) return (allowed.empty() ? "" : allowed + " or ") + "a number in " + range_text(s);
      return allowed.empty() ? "a string" : "one of " + allowed;
    }
  }
  return "";
}
// The offset of the first byte of `s` that is not part of a well-formed UTF-8 sequence, or npos.
std::size_t invalid_utf8_at(const std::string& s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80                        ? 1
                          : (c >> 5) == 0x6 && c >= 0xc2  ? 2
                          : (c >> 4) == 0xe               ? 3
                          : (c >> 3) == 0x1e && c <= 0xf4 ? 4
                                                          : 0;
    if (n == 0 || i + n > s.size()) return i;
    for (std::size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return i;
    i += n;
  }
  return std::string::npos;
}

// `s` with bytes that are not printable ASCII written as \xNN, for a message about a name that is not text.
std::string escaped(const std::string& s) {
  std::string out;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    out += c >= 0x20 && c < 0x7f ? std::string(1, ch) : fmt::format("\\x{:02x}", c);
  }
  return out;
}
}  // namespace

TrainConfig::TrainConfig() {
  for (const CoreSetting& c : core_settings()) c.set(*this, c.setting.default_value);
}

namespace {

// Each core setting against its declaration; d_k and d_ff as given (0: derived from d_model), not as config.json
// writes them.
void check_core_values(const TrainConfig& c) {
  for (const CoreSetting& core : core_settings()) {
    const nlohmann::json value = core.setting.key == "d_k"    ? nlohmann::json(c.model.d_k)
                                 : core.setting.key == "d_ff" ? nlohmann::json(c.model.d_ff)
                                                              : core.get(c);
    const std::string error = check_setting_value(core.setting, value);
    require(error.empty(), core.setting.flag() + " " + error);
  }
}

// More threads than CPUs make every step wait for threads that cannot run (measured: 9x slower at 64 threads on
// 2 CPUs), and on a shared or cluster machine take CPUs that belong to others.
void check_threads(const TrainConfig& c) {
  const int cpus = platform::available_cpus();
  const char* allow = std::getenv("XGRAD_ALLOW_THREADS_ABOVE_CPUS");
  require(
      !c.threads_on_this_machine || c.threads <= static_cast<std::size_t>(cpus) || (allow && std::string(allow) == "1"),
      fmt::format("--threads: {} is more than the {} CPU{} this process may use (allowed: 1 to {}; set "
                  "XGRAD_ALLOW_THREADS_ABOVE_CPUS=1 to run anyway)",
                  c.threads, cpus, cpus == 1 ? "" : "s", cpus));
}

// Each component must be registered, and each of the given component settings read by one of them: a flag of one
// task given to another is a mistake, not a setting to ignore silently. A core setting only some runs read
// (--base-width: mup) holds its default in the others. The schedule checks its settings against lr and steps.
void check_component_settings(const TrainConfig& c) {
  for (const Component& component : components()) component_values(c, component.key);
  for (const auto& [key, value] : c.settings.json().items()) {
    const std::string unread = unread_setting_error(c, key);
    require(unread.empty(), unread);
    const std::string error = check_setting_value(*find_setting(key), value);
    require(error.empty(), flag_of(key) + " " + error);
  }
  for (const CoreSetting& core : core_settings())
    if (core.unread && core.get(c) != core.setting.default_value) {
      const std::string unread = core.unread(c);
      require(unread.empty(), unread);
    }
  if (const auto* schedule = nn::LRScheduleRegistry::instance().find(c.lr_schedule); schedule && schedule->check) {
    const std::string error = schedule->check(c.lr, c.steps, component_values(c, "lr_schedule"));
    require(error.empty(), error);
  }
}

ConfigError task_error(const TrainConfig& c, const data::TaskError& e) {
  if (c.task == "data") return ConfigError(std::string("--data: ") + e.what());
  return ConfigError(std::string("invalid task settings: ") + e.what());
}

// A task's files are sized from their headers before they are read: a run that cannot hold them is refused without
// first filling the machine's memory with them (`refuse`: TrainConfig::refuse_above_limit).
template <class Refuse>
void check_task_plan(const TrainConfig& c, Refuse refuse) {
  const data::TaskEntry* entry = data::TaskRegistry::instance().find(c.task);
  if (!entry || !entry->plan) return;
  data::TaskPlan plan;
  try {
    plan = entry->plan(component_values(c, "task"));
  } catch (const data::TaskError& e) {
    throw task_error(c, e);
  }
  // The vocabulary of file data is known only once it is read: 2, the least, until then.
  refuse(c.estimate_memory(std::max<std::size_t>(plan.vocab_size, 2), std::max<std::size_t>(plan.seq_len, 1),
                           plan.data_bytes),
         plan.data_text);
}

std::unique_ptr<data::Task> build_task(const TrainConfig& c) {
  try {
    return c.make_task();
  } catch (const data::TaskError& e) {
    throw task_error(c, e);
  }
}

// The model's shape against the task (a held-out split for --eval-every), the heads and the attention layer's own
// limits (--attn-out-proj false: n_heads * d_k = d_model).
void check_model_shape(const TrainConfig& c, const data::Task& t) {
  if (const auto* arrays = dynamic_cast<const data::TokenArrays*>(&t))
    require(c.eval_every == 0 || arrays->has_eval_split(),
            "--eval-every: the data in " + component_values(c, "task").get<std::string>("data") +
                " has no held-out split (eval_inputs.npy and eval_targets.npy); "
                "add one or pass --eval-every 0");
  require(c.model.d_k > 0 || c.model.d_model % c.model.n_heads == 0,
          "--d-model (" + std::to_string(c.model.d_model) + ") must be divisible by --n-heads (" +
              std::to_string(c.model.n_heads) + "), or give the head size with --d-k");
  nn::AttentionLayerContext context;
  context.d_model = c.model.d_model;
  context.n_heads = c.model.n_heads;
  context.d_k = c.model.d_k;
  context.settings = component_values(c, "attention");
  try {
    nn::check_attention_layer(c.model.attention, context);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());
  }
}

// Tensor Programs V: 1/d_k attention (Definition 4.1), Table 3's optimizers.
void check_mup(const TrainConfig& c) {
  if (c.model.parametrization != nn::Parametrization::mup) return;
  require(c.model.scale == "dk",
          "--parametrization mup scales attention scores by 1/d_k (Tensor Programs V, Definition "
          "4.1): give --scale dk (got " +
              c.model.scale + ")");
  const nn::OptimizerEntry* optimizer = nn::OptimizerRegistry::instance().find(c.optimizer);
  require(!optimizer || optimizer->mup_lr != nn::MupLearningRates::none,
          "--parametrization mup: --optimizer " + c.optimizer +
              " has no muP learning rates (its entry declares no mup_lr; those of adamw and sgd are Table 3's)");
  require(!c.model.tie_word_embeddings,
          "--tie-word-embeddings true is not defined under --parametrization mup: muP gives the readout an init and a "
          "multiplier of its own, which a table shared with the input embedding cannot have");
  const std::size_t dk = c.head_size(), ff = c.model.d_ff ? c.model.d_ff : 4 * c.model.d_model;
  require(dk * c.model.base_width % c.model.d_model == 0 && ff * c.model.base_width % c.model.d_model == 0,
          "--base-width: d_k (" + std::to_string(dk) + ") and d_ff (" + std::to_string(ff) +
              ") scale with --d-model under muP, so each times --base-width (" + std::to_string(c.model.base_width) +
              ") / --d-model (" + std::to_string(c.model.d_model) + ") must be whole");
}

// The run's files: --out given, every text setting recordable (config.json and summary.json are JSON, whose strings
// are UTF-8: a name of other bytes could not be recorded), file names within the limit, --init-from a file.
void check_files(const TrainConfig& c) {
  require(!c.out.empty(), "--out: a run directory is required");
  const nlohmann::json recorded = c.to_json();  // named: items() of a temporary dangles
  for (const auto& [key, value] : recorded.items())
    if (value.is_string() && invalid_utf8_at(value.get<std::string>()) != std::string::npos)
      throw ConfigError(flag_of(key) + ": '" + escaped(value.get<std::string>()) +
                        "' is not valid UTF-8 (config.json records it as text); give a name in UTF-8");
  for (const auto& part : std::filesystem::path(c.out))
    require(part.string().size() <= TrainConfig::kMaxFileNameBytes,
            fmt::format("--out: the name '{}...' in {} is {} bytes, more than the {} a file name may have",
                        part.string().substr(0, 40), c.out, part.string().size(), TrainConfig::kMaxFileNameBytes));
  if (!c.init_from.empty() && !c.resume) {  // a resumed run takes its weights from its checkpoint
    std::error_code ec;
    require(std::filesystem::is_regular_file(c.init_from, ec),
            "--init-from: '" + c.init_from + "' is not a file (give a .safetensors checkpoint)");
  }
}

}  // namespace

std::unique_ptr<data::Task> TrainConfig::validate() const {
  check_core_values(*this);
  check_threads(*this);
  check_component_settings(*this);
  const auto refuse = [this](const MemoryEstimate& m, const std::string& data_text) {
    refuse_above_limit(m, data_text);
  };
  check_task_plan(*this, refuse);
  std::unique_ptr<data::Task> t = build_task(*this);
  check_model_shape(*this, *t);
  check_mup(*this);
  require(clip_grad_norm == 0 || static_cast<float>(clip_grad_norm) >= FLT_MIN,
          fmt::format("--clip-grad-norm must be 0 (off) or in [{:.9g}, 1e30) (a normal float), got {:g}", FLT_MIN,
                      clip_grad_norm));
  check_files(*this);
  refuse_above_limit(estimate_memory(*t), "");
  // Evaluations at other lengths: each task built (its settings checked) and its longest sequence held to the limit.
  for (const LengthEvalPoint& point : length_eval_points(*this)) {
    const std::unique_ptr<data::Task> at_length = task_at_length(*this, point, *t);
    refuse_above_limit(estimate_memory(at_length->vocab_size(), at_length->seq_len(), t->data_bytes(),
                                       at_length->targets_per_sequence(),
                                       flag_of("eval_" + point.setting) + " " + std::to_string(point.value)),
                       "");
  }
  return t;
}

void TrainConfig::refuse_above_limit(const MemoryEstimate& memory, const std::string& data_text) const {
  if (memory.gib() <= kMaxMemoryGiB) {
    refuse_above_address_space(memory);
    return;
  }
  const MemoryTerm& largest = memory.largest();
  if (largest.what == kDataTerm && !data_text.empty())
    throw ConfigError(
        fmt::format("{}: the task's data takes {} in memory ({}), and the run needs about {:.1f} GiB "
                    "in all (limit {:.0f}); give less data",
                    largest.factors, data::gib_text(largest.bytes), data_text, memory.gib(), kMaxMemoryGiB));
  // T and V stand for the task's sequence length and vocabulary where no flag of the task is them; the task says
  // what sets them.
  const data::TaskEntry* entry = data::TaskRegistry::instance().find(task);
  std::string legend;
  for (const auto& [symbol, meaning, from] :
       {std::tuple<std::string, std::string, std::string>{
            "T", memory.seq_len_from.empty() ? "the task's sequence length" : "the evaluated sequence length",
            !memory.seq_len_from.empty() ? memory.seq_len_from
            : entry                      ? entry->seq_len_from
                                         : ""},
        {"V", "the task's vocabulary size", entry ? entry->vocab_size_from : ""}})
    if ((" " + largest.factors + " ").find(" " + symbol + " ") != std::string::npos ||
        (" " + largest.factors).find(" " + symbol + "^") != std::string::npos)
      legend += (legend.empty() ? "; " : ", ") + symbol + " = " + meaning + (from.empty() ? "" : ", set by " + from);
  throw ConfigError(
      fmt::format("the run needs about {:.0f} GiB (limit {:.0f}), {:.0f} GiB of it for {} ({}{}): reduce {}",
                  memory.gib(), kMaxMemoryGiB, largest.bytes / (1024.0 * 1024 * 1024), largest.what, largest.factors,
                  legend, largest.factors.find(" x ") != std::string::npos ? "one of these" : "it"));
}

void TrainConfig::refuse_above_address_space(const MemoryEstimate& memory) const {
  if (!threads_on_this_machine) return;  // a scheduler runs it under its own limit, where set_threads checks it
  // The weights and optimizer state: the task's data is read later, and a read that fails names its file.
  const MemoryTerm* largest = nullptr;
  double held = 0;
  for (const MemoryTerm& t : memory.terms)
    if (!t.activation && t.what != kDataTerm) {
      held += t.bytes;
      if (!largest || t.bytes > largest->bytes) largest = &t;
    }
  // Buffers BLAS has mapped already (an earlier model of this process) are in the address space in use.
  const std::uint64_t all = platform::threads_address_space(static_cast<int>(threads)),
                      mapped = platform::blas_buffers_mapped(), blas = all > mapped ? all - mapped : 0;
  platform::require_address_space(
      static_cast<std::uint64_t>(held) + blas,
      fmt::format("the run ({:.0f} MiB for its weights and optimizer state, {:.0f} MiB of it for {}; {:.0f} MiB of "
                  "BLAS buffers and thread stacks for {} thread(s); its data and activations besides)",
                  held / (1024.0 * 1024), largest->bytes / (1024.0 * 1024), largest->what,
                  static_cast<double>(blas) / (1024.0 * 1024), threads),
      "raise the limit or reduce " + largest->factors + (threads > 1 ? " or --threads" : ""));
}

double MemoryEstimate::bytes() const {
  double sum = 0;
  for (const MemoryTerm& t : terms) sum += t.bytes;
  return sum;
}

const MemoryTerm& MemoryEstimate::largest() const {
  return *std::max_element(terms.begin(), terms.end(),
                           [](const MemoryTerm& a, const MemoryTerm& b) { return a.bytes < b.bytes; });
}

MemoryEstimate TrainConfig::estimate_memory(const data::Task& task_built) const {
  return estimate_memory(task_built.vocab_size(), task_built.seq_len(), task_built.data_bytes(),
                         task_built.targets_per_sequence());
}

MemoryEstimate TrainConfig::estimate_memory(std::size_t vocab_size, std::size_t seq_len, std::size_t data_bytes,
                                            std::size_t targets, const std::string& seq_len_from) const {
  // The flag of a task's setting where the task declares it, else the quantity's name.
  const data::TaskEntry* entry = data::TaskRegistry::instance().find(task);
  auto task_flag = [&](const std::string& key, const std::string& otherwise) {
    if (entry)
      for (const Setting& s : entry->settings)
        if (s.key == key) return s.flag();
    return otherwise;
  };
  std::string data_flags;
  if (entry)
    for (const Setting& s : entry->settings)
      if (s.type == Setting::Type::path) data_flags += (data_flags.empty() ? "" : ", ") + s.flag();
  const std::string T_flag = seq_len_from.empty() ? task_flag("seq_len", "T") : "T",
                    V_flag = task_flag("vocab_size", "V");
  // The readout runs only where a target is (nn::loss_at_targets): kv_recall's logits are one row per sequence.
  const bool sparse = targets != 0 && targets < seq_len;
  const std::string rows_text = sparse ? fmt::format("the targets per sequence ({})", targets) : T_flag;

  const double d = static_cast<double>(model.d_model), V = static_cast<double>(vocab_size),
               L = static_cast<double>(model.n_layers), B = static_cast<double>(batch_size),
               H = static_cast<double>(model.n_heads), T = static_cast<double>(seq_len),
               rows = static_cast<double>(sparse ? targets : seq_len);
  const double ff = model.mlp ? static_cast<double>(model.d_ff ? model.d_ff : 4 * model.d_model) : 0.0;
  const double inner = static_cast<double>(model.n_heads * head_size());
  // Per parameter: value, gradient, two Adam moments and the pre-step copy, 4 bytes each. Per activation: the
  // forward value kept for backward and its gradient, 4 bytes each.
  const double per_parameter = 4.0 * 5, per_activation = 4.0 * 2;
  const double vocab_tables = model.tie_word_embeddings ? 1 : 2;  // tied: the readout is the token embedding table
  MemoryEstimate m;
  m.seq_len_from = seq_len_from;
  m.terms = {
      {"the embeddings and readout", V_flag + " x --d-model", per_parameter * (vocab_tables * V * d + T * d)},
      {"the attention weights", "--n-layers x --d-model x --n-heads x --d-k", per_parameter * L * 4 * d * inner},
      {"the MLP weights", "--n-layers x --d-model x --d-ff", per_parameter * L * 2 * d * ff},
      {"the residual stream", "--batch-size x " + T_flag + " x --n-layers x --d-model",
       per_activation * B * T * L * 10 * d, true},
      {"the attention activations", "--batch-size x " + T_flag + " x --n-layers x --n-heads x --d-k",
       per_activation * B * T * L * 8 * inner, true},
      {"the attention scores", "--batch-size x --n-heads x " + T_flag + "^2 x --n-layers",
       per_activation * B * T * L * 4 * H * T, true},
      {"the MLP activations", "--batch-size x " + T_flag + " x --n-layers x --d-ff",
       per_activation * B * T * L * 4 * ff, true},
      {"the logits", "--batch-size x " + rows_text + " x " + V_flag, per_activation * B * rows * 3 * V, true},
      {kDataTerm, data_flags.empty() ? "the task" : data_flags, static_cast<double>(data_bytes)},
  };
  return m;
}

std::unique_ptr<data::Task> TrainConfig::make_task() const {
  return data::make_task(task, component_values(*this, "task"));
}

nlohmann::json TrainConfig::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const CoreSetting& c : core_settings()) j[c.setting.key] = c.get(*this);
  for (const Component& component : components())
    if (component.settings_of(get_setting(*this, component.key).get<std::string>())) {
      const SettingValues values = component_values(*this, component.key);  // named: items() of a temporary dangles
      for (const auto& [key, value] : values.json().items()) j[key] = value;
    }
  j["config_version"] = kConfigVersion;
  return j;
}

TrainConfig TrainConfig::from_json(const nlohmann::json& stored, const std::string& source) {
  const nlohmann::json j = canonical_config_json(stored, source);
  TrainConfig c;
  // Components first: selecting one decides which settings the others are.
  for (const Component& component : components())
    if (j.contains(component.key)) {
      try {
        set_setting(c, component.key, j.at(component.key));
      } catch (const ConfigError& e) {
        throw ConfigError(source + ": '" + component.key + "': " + e.what());
      }
    }
  for (const auto& [key, value] : j.items()) {
    if (is_record_key(key) || find_component(key)) continue;
    if (!find_setting(key)) throw ConfigError(source + ": '" + key + "' is not a setting of xgrad");
    // nlohmann converts any number to any arithmetic type (-3 to 18446744073709551613, 2.5 to 2): the declaration's
    // check refuses those, so a corrupt config.json is refused by key instead of read as another run.
    const Setting& declared = *find_setting(key);
    const nlohmann::json whole = whole_setting_value(declared, value);  // 16.0 for a whole setting is 16
    if (!check_setting_value(declared, whole).empty())
      throw ConfigError(source + ": '" + key + "' holds " + value.dump() + ", which is not " +
                        expected_value(declared) +
                        (whole_setting_fraction_error(declared, value).empty() ? "" : ": it has a fractional part"));
    set_setting(c, key, whole);
  }
  return c;
}

std::vector<std::string> differing_settings(const TrainConfig& a_config, const TrainConfig& b_config) {
  const nlohmann::json a = a_config.to_json(), b = b_config.to_json();
  std::vector<std::string> keys, differing;
  for (const auto& [key, value] : a.items())
    if (key != "d_ff" && key != "d_k") keys.push_back(key);
  for (const auto& [key, value] : b.items())  // a setting only `b`'s components read
    if (!a.contains(key)) keys.push_back(key);
  keys.insert(keys.end(), {"d_k", "d_ff"});
  for (const std::string& key : keys) {
    const Setting* declared = find_setting(key);
    if (declared && declared->resumable) continue;
    if (!a.contains(key) || !b.contains(key) || b.at(key) != a.at(key)) differing.push_back(key);
  }
  return differing;
}

void check_same_run(const TrainConfig& stored, const TrainConfig& requested) {
  const nlohmann::json a = stored.to_json(), b = requested.to_json();
  const auto shown = [](const nlohmann::json& j, const std::string& key) {  // a setting one run's components lack
    return j.contains(key) ? j.at(key).dump() : std::string("not set");
  };
  std::string differences;
  for (const std::string& key : differing_settings(stored, requested))
    differences += (differences.empty() ? flag_of(key) + ": the run in " + stored.out + " was trained with "
                                        : "; " + flag_of(key) + ": ") +
                   shown(a, key) + ", not " + shown(b, key);
  std::string steps;  // what --steps may not be, named in the same message as the settings (one retry fixes all)
  const auto* schedule = nn::LRScheduleRegistry::instance().find(stored.lr_schedule);
  if (requested.steps != stored.steps && schedule && schedule->depends_on_steps)
    steps = "--steps: the run in " + stored.out + " follows the " + stored.lr_schedule +
            " learning-rate schedule over its " + std::to_string(stored.steps) +
            " steps; other --steps would change the rates of the steps it has taken (got " +
            std::to_string(requested.steps) + "; start a new run instead)";
  else if (requested.steps < stored.steps)
    steps = "--steps: the run in " + stored.out + " was set to " + std::to_string(stored.steps) +
            " steps; a resumed run may raise --steps but not lower it (got " + std::to_string(requested.steps) + ")";
  if (differences.empty() && steps.empty()) return;
  std::string may_change;
  for (const CoreSetting& c : core_settings())
    if (c.setting.resumable && c.setting.key != "out")
      may_change += (may_change.empty() ? "" : ", ") + c.setting.flag() + (c.setting.key == "steps" ? " (raise)" : "");
  if (!differences.empty()) differences += "; a resumed run keeps its settings (it may change only " + may_change + ")";
  throw ConfigError(differences + (differences.empty() || steps.empty() ? "" : "; also ") + steps);
}

}  // namespace xgrad::train
