#include "train/settings.h"

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <filesystem>
#include <map>
#include <tuple>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/escape.h"
#include "common/whole_number.h"
#include "data/registry.h"
#include "nn/attention_layer.h"
#include "nn/lr_schedule.h"
#include "nn/optim.h"
#include "nn/scaling.h"

namespace xgrad::train {

namespace {

// The part of a TrainConfig a member of class C belongs to: the config itself, or its model's settings.
template <class C>
C& part(TrainConfig& config) {
  if constexpr (std::is_same_v<C, TrainConfig>)
    return config;
  else
    return config.model;
}
template <class C>
const C& part(const TrainConfig& config) {
  if constexpr (std::is_same_v<C, TrainConfig>)
    return config;
  else
    return config.model;
}

// Binds a declaration to a member of TrainConfig or of its model of a plain type (whole numbers, numbers, booleans,
// strings).
template <class C, class T>
CoreSetting bind(T C::*member, Setting setting) {
  CoreSetting c;
  c.setting = std::move(setting);
  c.get = [member](const TrainConfig& config) { return nlohmann::json(part<C>(config).*member); };
  c.set = [member](TrainConfig& config, const nlohmann::json& value) { part<C>(config).*member = value.get<T>(); };
  return c;
}

// Binds a text setting whose choices are the names in `table` to a member of an enumeration type.
template <class C, class E, std::size_t N>
CoreSetting bind(E C::*member, const EnumName<E> (&table)[N], Setting setting) {
  CoreSetting c;
  c.setting = std::move(setting);
  c.get = [member, &table](const TrainConfig& config) {
    return nlohmann::json(enum_name(table, part<C>(config).*member));
  };
  c.set = [member, &table](TrainConfig& config, const nlohmann::json& value) {
    part<C>(config).*member = parse_enum(table, value.get<std::string>());
  };
  return c;
}

// An enumeration's setting: a text setting of the names in `table`, `default_value` its default.
template <class E, std::size_t N>
Setting enum_setting(std::string key, const EnumName<E> (&table)[N], E default_value, std::string help) {
  return text_setting(std::move(key), enum_name(table, default_value), enum_names(table), std::move(help));
}

// The model settings' defaults: ModelConfig's own, declared once in nn/model_config.h (a function's static, so that it
// is built before a table built during another file's static initialisation reads it).
const nn::ModelConfig& model_defaults() {
  static const nn::ModelConfig defaults;
  return defaults;
}

constexpr unsigned kTrain = Setting::kTrain, kSweep = Setting::kSweep, kRun = kTrain | kSweep;
constexpr std::uint64_t kMaxSteps = 1000000000;

// A core setting whose config.json value is computed (d_k and d_ff: 0 is written as the size used).
CoreSetting with_value(CoreSetting c, std::function<nlohmann::json(const TrainConfig&)> get) {
  c.get = std::move(get);
  return c;
}

// The components (their names are checked against the registries, components(), not a list here) and the model.
void add_model_settings(std::vector<CoreSetting>& t) {
  const nn::ModelConfig& defaults = model_defaults();
  t.push_back(bind(&TrainConfig::task, text_setting("task", "kv_recall", {}, "task")));
  t.push_back(bind(&nn::ModelConfig::scale,
                   text_setting("scale", defaults.scale, {}, "attention score scaling").only_for(kTrain)));
  t.push_back(bind(&nn::ModelConfig::attention,
                   text_setting("attention", defaults.attention, {}, "attention layer of each block")));
  t.push_back(bind(&nn::ModelConfig::d_model, whole_setting("d_model", defaults.d_model, 1, 16384, "model width")));
  t.push_back(with_value(
      bind(&nn::ModelConfig::d_k,
           whole_setting("d_k", defaults.d_k, 0, 8192, "head size d_k (0 = d_model / n_heads)").only_for(kTrain)),
      [](const TrainConfig& c) { return nlohmann::json(c.head_size()); }));
  t.push_back(bind(&nn::ModelConfig::n_heads,
                   whole_setting("n_heads", defaults.n_heads, 1, 1024, "attention heads (d_k = d_model / n_heads)")));
  t.push_back(
      bind(&nn::ModelConfig::n_layers, whole_setting("n_layers", defaults.n_layers, 1, 64, "transformer blocks")));
  t.push_back(with_value(
      bind(&nn::ModelConfig::d_ff, whole_setting("d_ff", defaults.d_ff, 0, 65536, "MLP hidden size (0 = 4 * d_model)")),
      [](const TrainConfig& c) { return nlohmann::json(c.model.d_ff ? c.model.d_ff : 4 * c.model.d_model); }));
  t.push_back(
      bind(&nn::ModelConfig::mlp, boolean_setting("mlp", defaults.mlp, "include the MLP in each block (true/false)")));
  t.push_back(bind(&nn::ModelConfig::layer_norm,
                   boolean_setting("layer_norm", defaults.layer_norm,
                                   "LayerNorm before each sublayer and the readout (true/false)")));
  CoreSetting layer_norm_eps =
      bind(&nn::ModelConfig::layer_norm_eps,
           number_setting("layer_norm_eps", defaults.layer_norm_eps, 0, 1, "added to the variance in every LayerNorm")
               .excluding_min());
  layer_norm_eps.unread = [](const TrainConfig& c) {
    return c.model.layer_norm ? "" : std::string("--layer-norm-eps is read only with --layer-norm true");
  };
  t.push_back(std::move(layer_norm_eps));
  t.push_back(bind(&nn::ModelConfig::residual,
                   boolean_setting("residual", defaults.residual, "residual connections (true/false)")));
  t.push_back(
      bind(&nn::ModelConfig::causal, boolean_setting("causal", defaults.causal, "causal attention mask (true/false)")));
  t.push_back(bind(&nn::ModelConfig::emb_init_std, number_setting("emb_init_std", defaults.emb_init_std, 0, 1e30,
                                                                  "std of the token and position embeddings at init")
                                                       .excluding_min()));
  t.push_back(
      bind(&nn::ModelConfig::proj_init_gain, number_setting("proj_init_gain", defaults.proj_init_gain, 0, 1e30,
                                                            "multiplies the LeCun init std of W_q, W_k, W_v, W_o")
                                                 .excluding_min()));
}

// The readout's weight and the biases, as nanoGPT's GPTConfig (weight tying; bias) and Hugging Face's config.
void add_readout_settings(std::vector<CoreSetting>& t) {
  const nn::ModelConfig& defaults = model_defaults();
  t.push_back(bind(&nn::ModelConfig::tie_word_embeddings,
                   boolean_setting("tie_word_embeddings", defaults.tie_word_embeddings,
                                   "the readout uses the token embedding table, logits = h @ tok_emb.weight^T "
                                   "(true/false; not with --parametrization mup; with the default --emb-init-std 1 "
                                   "the first logits are large: nanoGPT's is 0.02)")
                       .only_for(kRun)));
  t.push_back(bind(&nn::ModelConfig::bias, boolean_setting("bias", defaults.bias,
                                                           "bias in the MLP's Linears, the readout and the LayerNorms "
                                                           "(true/false)")
                                               .only_for(kRun)));
}

// Probe measures the standard parametrization's initialisation (scales none and sqrt_dk): not probe flags.
void add_parametrization_settings(std::vector<CoreSetting>& t) {
  const nn::ModelConfig& defaults = model_defaults();
  t.push_back(
      bind(&nn::ModelConfig::parametrization, nn::kParametrizationNames,
           enum_setting("parametrization", nn::kParametrizationNames, defaults.parametrization,
                        "sp: standard; mup: muP of Tensor Programs V, Table 3 (readout multiplier, per-layer lr "
                        "and readout init scaled by d_model / --base-width; needs --scale dk)")
               .only_for(kRun)));
  CoreSetting base_width = bind(&nn::ModelConfig::base_width, whole_setting("base_width", defaults.base_width, 1, 16384,
                                                                            "mup: the d_model at which mup equals sp")
                                                                  .only_for(kRun));
  base_width.unread = [](const TrainConfig& c) -> std::string {
    if (c.model.parametrization == nn::Parametrization::mup) return "";
    return "--base-width is read only by --parametrization mup (the parametrization is " +
           enum_name(nn::kParametrizationNames, c.model.parametrization) + ")";
  };
  t.push_back(std::move(base_width));
}

void add_optimisation_settings(std::vector<CoreSetting>& t) {
  const nn::ModelConfig& defaults = model_defaults();
  t.push_back(bind(&TrainConfig::batch_size, whole_setting("batch_size", 64, 1, 1 << 20, "sequences per step")));
  t.push_back(bind(&TrainConfig::steps,
                   whole_setting("steps", 800, 1, kMaxSteps, "training steps").may_change_on_resume().only_for(kRun)));
  // The optimizer computes in float: a learning rate below the smallest normal float (FLT_MIN, printed to 9
  // digits) becomes 0 (or a subnormal that flush_denormals zeroes), one above the largest becomes inf.
  t.push_back(
      bind(&TrainConfig::lr, number_setting("lr", 3e-3, 1.17549435e-38, FLT_MAX, "learning rate").only_for(kRun)));
  t.push_back(bind(&TrainConfig::optimizer, text_setting("optimizer", "adamw", {}, "optimizer").only_for(kRun)));
  t.push_back(
      bind(&TrainConfig::lr_schedule,
           text_setting("lr_schedule", "constant", {}, "learning-rate schedule over the steps").only_for(kRun)));
  t.push_back(
      bind(&TrainConfig::z_loss,
           number_setting("z_loss", 0.0, 0, 1e30, "coefficient of the z-loss, mean (log Z)^2 of the readout (0 = off)")
               .only_for(kRun)));
  t.push_back(bind(&nn::ModelConfig::dropout,
                   number_setting("dropout", defaults.dropout, 0, 1,
                                  "probability of zeroing an element at each dropout site while training: the "
                                  "embeddings' sum, the attention weights and each sublayer's output (0 = off)")
                       .excluding_max()
                       .only_for(kRun)));
  t.push_back(bind(&TrainConfig::clip_grad_norm,
                   number_setting("clip_grad_norm", 0.0, 0, 1e30, "clip the global gradient norm (0 = off)")
                       .excluding_max()
                       .only_for(kRun)));
}

// Seeds, logging and evaluation cadence.
void add_record_settings(std::vector<CoreSetting>& t) {
  t.push_back(
      bind(&TrainConfig::seed, whole_setting("seed", 0, 0, UINT64_MAX, "seed of the initial weights").replicate()));
  t.push_back(
      bind(&TrainConfig::data_seed,
           whole_setting("data_seed", 0, 0, UINT64_MAX, "seed of the data stream (default: --seed)").replicate()));
  t.push_back(bind(&TrainConfig::log_every,
                   whole_setting("log_every", 1, 1, kMaxSteps, "attention statistics and update RMS every N steps")
                       .record_only()
                       .only_for(kRun)));
  t.push_back(
      bind(&TrainConfig::print_every, whole_setting("print_every", 100, 1, kMaxSteps, "console progress every N steps")
                                          .record_only()
                                          .may_change_on_resume()
                                          .only_for(kRun)));
  t.push_back(bind(&TrainConfig::tensorboard,
                   boolean_setting("tensorboard", false,
                                   "also write every metrics.csv column to a TensorBoard event file beside it "
                                   "(events.out.tfevents.*)")
                       .record_only()
                       .may_change_on_resume()
                       .only_for(kRun)));
  t.push_back(bind(&TrainConfig::eval_every,
                   whole_setting("eval_every", 0, 0, kMaxSteps, "held-out loss every N steps (0 = off)")
                       .record_only()
                       .only_for(kRun)));
  t.push_back(
      bind(&TrainConfig::eval_batches,
           whole_setting("eval_batches", 4, 1, 10000, "batches per held-out evaluation").record_only().only_for(kRun)));
  for (auto [member, key, setting] : {std::tuple{&TrainConfig::eval_seq_len, "eval_seq_len", "--seq-len"},
                                      std::tuple{&TrainConfig::eval_n_pairs, "eval_n_pairs", "--n-pairs"}})
    t.push_back(bind(member, text_setting(key, "", {},
                                          std::string("at the end, evaluate at each of these comma-separated values of "
                                                      "the task's ") +
                                              setting + " into summary.json (length_eval)")
                                 .record_only()
                                 .only_for(kRun)));
}

// Execution and output.
void add_execution_settings(std::vector<CoreSetting>& t) {
  t.push_back(
      bind(&TrainConfig::flush_denormals,
           boolean_setting("flush_denormals", true, "flush subnormal floats to zero (faster saturated softmax)")));
  t.push_back(
      bind(&TrainConfig::threads, whole_setting("threads", 1, 1, 64, "threads per run, for BLAS and xgrad's own loops")
                                      .record_only()
                                      .may_change_on_resume()));
  t.push_back(bind(
      &TrainConfig::out,
      text_setting("out", "", {}, "run directory to write").record_only().may_change_on_resume().only_for(kTrain)));
  t.push_back(bind(&TrainConfig::checkpoint_every,
                   whole_setting("checkpoint_every", 100, 0, kMaxSteps,
                                 "write DIR/checkpoint.safetensors every N steps (0 = only at the end)")
                       .record_only()
                       .may_change_on_resume()
                       .only_for(kTrain)));
  t.push_back(bind(&TrainConfig::on_nan, kOnNanNames,
                   enum_setting("on_nan", kOnNanNames, OnNan::stop,
                                "non-finite loss or gradient: stop the run (exit 3) or skip the step")
                       .may_change_on_resume()
                       .only_for(kTrain)));
  t.push_back(bind(&TrainConfig::init_from,
                   path_setting("init_from", "start from the weights in this .safetensors file (shapes must match)")
                       .only_for(kTrain)));
}

std::vector<CoreSetting> make_core_settings() {
  std::vector<CoreSetting> t;
  add_model_settings(t);
  add_readout_settings(t);
  add_parametrization_settings(t);
  add_optimisation_settings(t);
  add_record_settings(t);
  add_execution_settings(t);
  return t;
}

const CoreSetting* find_core(const std::string& key) {
  for (const CoreSetting& c : core_settings())
    if (c.setting.key == key) return &c;
  return nullptr;
}

template <class Entry>
Component registry_component(const std::string& key) {
  Component c;
  c.key = key;
  c.names = [] { return Registry<Entry>::instance().names(); };
  c.settings_of = [](const std::string& name) -> const std::vector<Setting>* {
    const Entry* e = Registry<Entry>::instance().find(name);
    return e ? &e->settings : nullptr;
  };
  return c;
}

// The names of the entries of `component` that declare `key`.
std::vector<std::string> owners_of(const Component& component, const std::string& key) {
  std::vector<std::string> out;
  for (const std::string& name : component.names())
    if (const auto* settings = component.settings_of(name))
      for (const Setting& s : *settings)
        if (s.key == key) out.push_back(name);
  return out;
}

bool declares(const std::vector<Setting>* settings, const std::string& key) {
  if (!settings) return false;
  return std::any_of(settings->begin(), settings->end(), [&](const Setting& s) { return s.key == key; });
}

}  // namespace

const std::vector<CoreSetting>& core_settings() {
  static const std::vector<CoreSetting> table = make_core_settings();
  return table;
}

const std::vector<Component>& components() {
  static const std::vector<Component> list{
      registry_component<data::TaskEntry>("task"), registry_component<nn::ScalingEntry>("scale"),
      registry_component<nn::AttentionLayerEntry>("attention"), registry_component<nn::OptimizerEntry>("optimizer"),
      registry_component<nn::LRScheduleEntry>("lr_schedule")};
  return list;
}

const Component* find_component(const std::string& key) {
  for (const Component& c : components())
    if (c.key == key) return &c;
  return nullptr;
}

std::vector<ComponentSetting> component_settings() {
  std::vector<ComponentSetting> out;
  for (const Component& component : components())
    for (const std::string& name : component.names())
      for (const Setting& s : *component.settings_of(name)) {
        auto it =
            std::find_if(out.begin(), out.end(), [&](const ComponentSetting& c) { return c.setting.key == s.key; });
        if (it == out.end()) {
          out.push_back({s, component.key, {name}});
          continue;
        }
        it->owners.push_back(name);
        // One declaration whose default depends on the entry (n_pairs): --help names the other defaults.
        if (s.default_value != it->setting.default_value)
          it->setting.help += " (" + name + ": default " + s.default_value.dump() + ")";
      }
  return out;
}

namespace {
// Whether two declarations of one key accept and refuse the same values (their defaults and help may differ).
bool same_declaration(const Setting& a, const Setting& b) {
  return a.type == b.type && a.choices == b.choices && a.takes_number == b.takes_number && a.min == b.min &&
         a.max == b.max && a.min_open == b.min_open && a.max_open == b.max_open && a.whole_min == b.whole_min &&
         a.whole_max == b.whole_max && a.role == b.role;
}
}  // namespace

std::vector<std::string> setting_declaration_errors() {
  std::vector<std::string> errors;
  std::map<std::string, std::pair<std::string, const Setting*>> first;  // key: the first entry declaring it
  for (const Component& component : components())
    for (const std::string& name : component.names())
      for (const Setting& s : *component.settings_of(name)) {
        const std::string entry = "--" + component.key + " " + name;
        if (find_core(s.key) || is_record_key(s.key))
          errors.push_back(entry + " declares the setting '" + s.key +
                           "', which is one of xgrad's own: give it a key of its own");
        else if (auto it = first.find(s.key); it == first.end())
          first.emplace(s.key, std::make_pair(entry, &s));
        else if (!same_declaration(*it->second.second, s))
          errors.push_back(entry + " declares the setting '" + s.key + "' with another type, range or choices than " +
                           it->second.first + ": entries share a key only through one declaration");
      }
  return errors;
}

const Setting* find_setting(const std::string& key) {
  if (const CoreSetting* c = find_core(key)) return &c->setting;
  for (const Component& component : components())
    for (const std::string& name : component.names())
      for (const Setting& s : *component.settings_of(name))
        if (s.key == key) return &s;
  return nullptr;
}

std::string flag_of(const std::string& key) {
  if (const Setting* s = find_setting(key)) return s->flag();
  Setting s;
  s.key = key;
  return s.flag();
}

nlohmann::json get_setting(const TrainConfig& config, const std::string& key) {
  if (const CoreSetting* c = find_core(key)) return c->get(config);
  for (const Component& component : components()) {
    const std::string name = find_core(component.key)->get(config).get<std::string>();
    const auto* settings = component.settings_of(name);
    if (!settings) continue;
    for (const Setting& s : *settings)
      if (s.key == key) return config.settings.contains(key) ? config.settings.json().at(key) : s.default_value;
  }
  return nullptr;
}

void set_setting(TrainConfig& config, const std::string& key, const nlohmann::json& given) {
  const Setting* declared = find_setting(key);
  if (!declared) throw ConfigError(flag_of(key) + ": not a setting of xgrad (config key '" + key + "')");
  const nlohmann::json value = whole_setting_value(*declared, given);
  std::string error = check_setting_value(*declared, value);
  if (error.empty())
    if (const Component* component = find_component(key))
      if (!component->settings_of(value.get<std::string>()))
        error = fmt::format("{} is not a registered {} (allowed: {})", shortened_name(value.get<std::string>()), key,
                            fmt::join(component->names(), ", "));
  if (!error.empty()) throw ConfigError(declared->flag() + ": " + error);
  if (const CoreSetting* core = find_core(key)) {
    if (const Component* component = find_component(key)) {
      const std::string old_name = core->get(config).get<std::string>(), new_name = value.get<std::string>();
      const auto* old_settings = component->settings_of(old_name);
      const auto* new_settings = component->settings_of(new_name);
      if (old_name != new_name && old_settings) {
        nlohmann::json kept = config.settings.json();
        for (const Setting& s : *old_settings)
          if (!declares(new_settings, s.key)) kept.erase(s.key);
        config.settings = SettingValues(kept);
      }
    }
    core->set(config, value);
    return;
  }
  config.settings.set(key, value);
}

SettingValues component_values(const TrainConfig& config, const std::string& key) {
  const Component* component = find_component(key);
  if (!component) throw ConfigError("no component '" + key + "'");
  const std::string name = find_core(key)->get(config).get<std::string>();
  const auto* settings = component->settings_of(name);
  if (!settings)
    throw ConfigError(
        fmt::format("{}: unknown '{}' (allowed: {})", flag_of(key), name, fmt::join(component->names(), ", ")));
  return resolve_settings(*settings, config.settings.json());
}

std::string unread_setting_error(const TrainConfig& config, const std::string& key) {
  if (const CoreSetting* core = find_core(key)) return core->unread ? core->unread(config) : "";
  for (const Component& component : components()) {
    const std::string name = find_core(component.key)->get(config).get<std::string>();
    if (declares(component.settings_of(name), key)) return "";
  }
  for (const Component& component : components()) {
    const std::vector<std::string> owners = owners_of(component, key);
    if (owners.empty()) continue;
    const std::string name = find_core(component.key)->get(config).get<std::string>();
    return fmt::format("{} is read only by {} {} (the {} is {})", flag_of(key), flag_of(component.key),
                       fmt::join(owners, ", "), component.key, name);
  }
  return flag_of(key) + ": not a setting of xgrad (config key '" + key + "')";
}

TrainConfig with_absolute_paths(TrainConfig config) {
  auto absolute = [](const std::string& path) {
    return path.empty() ? path : std::filesystem::absolute(path).lexically_normal().string();
  };
  for (const CoreSetting& c : core_settings())
    if (c.setting.type == Setting::Type::path) c.set(config, absolute(c.get(config).get<std::string>()));
  for (const Component& component : components()) {
    const auto* settings = component.settings_of(find_core(component.key)->get(config).get<std::string>());
    if (!settings) continue;
    for (const Setting& s : *settings)
      if (s.type == Setting::Type::path && config.settings.contains(s.key) &&
          config.settings.json().at(s.key).is_string())
        config.settings.set(s.key, absolute(config.settings.json().at(s.key).get<std::string>()));
  }
  return config;
}

bool is_record_key(const std::string& key) {
  return key == "config_version" || key == "derived" || key == "environment" || key == "inputs";
}

nlohmann::json canonical_config_json(const nlohmann::json& stored, const std::string& source) {
  if (!stored.is_object()) throw ConfigError(source + " is not a JSON object");
  if (const auto version = stored.find("config_version"); version != stored.end()) {
    // A file from a newer release may mean other things by the same keys: refuse it rather than read it as ours.
    if (!version->is_number_integer() || version->get<long long>() < 1 || version->get<long long>() > kConfigVersion)
      throw ConfigError(source + ": config_version " + version->dump() + " is not a format this build reads (1 to " +
                        std::to_string(kConfigVersion) + "); a newer xgrad may have written it");
    return stored;
  }
  // The legacy format: derived values beside the settings (vocab_size and seq_len among them, whose names the
  // settings now use), settings under other names, and every task's and optimizer's settings in every file.
  nlohmann::json out = nlohmann::json::object(), derived = nlohmann::json::object();
  for (const char* key : {"vocab_size", "seq_len", "chance_loss", "num_parameters"})
    if (stored.contains(key)) derived[key] = stored.at(key);
  static const std::vector<std::pair<std::string, std::string>> renamed{
      {"task_seq_len", "seq_len"}, {"text_path", "text"}, {"data_dir", "data"}, {"data_vocab_size", "vocab_size"}};
  for (const auto& [key, value] : stored.items()) {
    if (derived.contains(key)) continue;
    std::string name = key;
    for (const auto& [old_key, new_key] : renamed)
      if (key == old_key) name = new_key;
    out[name] = value;
  }
  // Settings of entries the run did not select were written with their values but never read: drop them. Only in a
  // file of the legacy format (it recorded derived values); a hand-written subset of settings without config_version
  // keeps every key, so that one no selected entry reads is refused by validate() rather than dropped unseen.
  if (derived.empty()) {
    out["config_version"] = kConfigVersion;
    return out;
  }
  for (const Component& component : components()) {
    const auto it = out.find(component.key);
    const std::string selected = it != out.end() && it->is_string()
                                     ? it->get<std::string>()
                                     : find_core(component.key)->get(TrainConfig()).get<std::string>();
    for (const std::string& name : component.names())
      for (const Setting& s : *component.settings_of(name))
        if (out.contains(s.key) && !declares(component.settings_of(selected), s.key)) {
          bool read_by_other = false;  // a key another component of the run reads (none today) stays
          for (const Component& other : components())
            if (&other != &component && out.contains(other.key) && out.at(other.key).is_string() &&
                declares(other.settings_of(out.at(other.key).get<std::string>()), s.key))
              read_by_other = true;
          if (!read_by_other) out.erase(s.key);
        }
  }
  out["config_version"] = kConfigVersion;
  if (!derived.empty()) out["derived"] = derived;
  return out;
}

}  // namespace xgrad::train
