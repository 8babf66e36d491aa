// The settings of a training run, each declared once (common/setting.h): the core settings in one table bound to
// their TrainConfig members (settings.cpp), and the components' own settings (a task's, an optimizer's, ...) in their
// registry entries. The CLI's flags, config.json writing and reading (this format and the legacy one), the resume
// checks, sweep axes and the report's grouping of runs all go through the functions here.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/setting.h"
#include "train/config.h"

namespace xgrad::train {

/// A core setting: its declaration bound to its TrainConfig member.
struct CoreSetting {
  Setting setting;
  /// The member's value as config.json holds it (d_k and d_ff resolved: 0 is written as the size used).
  std::function<nlohmann::json(const TrainConfig&)> get;
  /// Stores a value that check_setting_value accepted.
  std::function<void(TrainConfig&, const nlohmann::json&)> set;
  /// Null for a setting every run reads; else "" where `config` reads it and the refusal where it does not
  /// ("--base-width is read only by --parametrization mup (the parametrization is sp)"). A value other than the
  /// default is then refused (TrainConfig::validate), as is the flag given to train and a --grid axis of it.
  std::function<std::string(const TrainConfig&)> unread;
};

/// Every core setting, in --help order.
const std::vector<CoreSetting>& core_settings();

/// A core setting that names a registry entry (task, optimizer, ...): the entry's own settings belong to it.
struct Component {
  std::string key;  ///< the core setting ("task"), also what messages call it ("--task copy")
  std::function<std::vector<std::string>()> names;                                  ///< registered names, in order
  std::function<const std::vector<Setting>*(const std::string& name)> settings_of;  ///< null: not registered
};

/// The components of a run, in the order their settings are listed.
const std::vector<Component>& components();
/// The component whose core setting is `key`, or null.
const Component* find_component(const std::string& key);

/// A component setting as the CLI offers it: one per key (entries share a key only through one declaration), with
/// the component and the entries that read it.
struct ComponentSetting {
  Setting setting;
  std::string component;            ///< "task"
  std::vector<std::string> owners;  ///< "copy", "reverse", ...
};
/// Every component setting of every registered entry, components in order, then entries in registry order.
std::vector<ComponentSetting> component_settings();

/// What is wrong with the settings the registered entries declare, one message each (empty: nothing): an entry's
/// setting whose key is one of xgrad's own settings (its flag would be offered twice), or a key two entries declare
/// with another type, range or choices (one key is one flag: entries share a key only through one declaration;
/// the default may differ). The executable reports them at start-up and exits 2.
std::vector<std::string> setting_declaration_errors();

/// The declaration of `key`, core or component, or null.
const Setting* find_setting(const std::string& key);

/// The command-line flag of a config.json key ("d_model" -> "--d-model").
std::string flag_of(const std::string& key);

/// The value of `key` in `config` (a core member, or a component setting with its default filled in); null if the
/// key is not a setting of the run's components.
nlohmann::json get_setting(const TrainConfig& config, const std::string& key);

/// Sets `key` to `value` after checking it against the declaration (ConfigError "<flag>: <what is wrong>"; an
/// undeclared key: "<flag>: not a setting (...)"). Selecting another component (task, optimizer, ...) drops the
/// values of settings only the previous entry read, so that a config file's task settings do not follow the run to
/// another task.
void set_setting(TrainConfig& config, const std::string& key, const nlohmann::json& value);

/// The settings of the component `key` ("task") of `config` as its entry's build function takes them (defaults
/// filled in). Throws ConfigError for an unregistered name.
SettingValues component_values(const TrainConfig& config, const std::string& key);

/// "" if `key` (a component setting present in config.settings) is read by the run's components, else the refusal:
/// "--n-keys is read only by --task kv_recall (the task is copy)". For a core setting: CoreSetting::unread's answer
/// ("" if it has none).
std::string unread_setting_error(const TrainConfig& config, const std::string& key);

/// `config` with each path setting (a core one such as init_from, and those of the selected components, such as the
/// task's text or data) that is relative made absolute against the working directory, so that config.json names
/// the same file whatever directory a run is later resumed from. Empty paths stay empty.
TrainConfig with_absolute_paths(TrainConfig config);

/// The config.json keys that are not settings but records of the run: "config_version", "derived", "environment"
/// and "inputs" (the files the run read: setting, absolute path, size, XXH3 content hash; see data/input_file.h).
bool is_record_key(const std::string& key);

/// config.json's version of the format written by this release; a file without "config_version" is of the legacy
/// format (releases up to d6e25a8: task_seq_len, text_path, data_dir, data_vocab_size, head_dim-free d_k, every
/// task's and optimizer's settings in every file, derived values beside the settings).
/// Version 2 files written since "inputs" was added carry it; those written before do not, and read the same (a
/// resumed run then warns that it cannot check its input files): an added record, so the version stays 2.
inline constexpr int kConfigVersion = 2;

/// A stored config.json in the canonical form: the settings at the top level, derived values (vocab_size, seq_len,
/// chance_loss, num_parameters as resolved for the run) under "derived", and "environment" when present. A legacy
/// file is converted (keys renamed, settings of tasks and optimizers the run did not use dropped, derived values
/// moved). Unknown keys (a run of a build with more registry entries) are kept. Throws ConfigError if `stored` is not
/// an object, or if its config_version is not an integer in 1..kConfigVersion.
nlohmann::json canonical_config_json(const nlohmann::json& stored, const std::string& source);

}  // namespace xgrad::train
