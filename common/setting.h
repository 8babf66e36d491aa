// Setting: the one declaration of a setting (flag, config.json key, type, default, range, help). The CLI's flags,
// config.json writing and reading, resume checks, sweep axes and the children a sweep starts all come from these
// declarations. Core settings are declared in train/settings.cpp; a registry entry (a task, a scaling, an attention
// layer, an optimizer) declares its own settings beside its code.
#pragma once

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace xgrad {

/// Thrown for a setting value outside its declaration; the message names the flag and the allowed values.
class SettingError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct Setting {
  enum class Type {
    boolean,  ///< true | false
    whole,    ///< an unsigned whole number in [min, max]
    number,   ///< a finite decimal number in [min, max] (min_open / max_open make the ends open)
    text,     ///< a string (choices, if any, are the allowed values)
    path,     ///< a file or directory path (config.json stores it absolute)
  };
  std::string key;  ///< config.json key, snake_case (d_model); the flag is --d-model
  Type type = Type::number;
  nlohmann::json default_value;  ///< of the declared type
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false, max_open = false;
  std::vector<std::string> choices;  ///< text: the allowed values (empty: any)
  std::string help;                  ///< one line for --help; units where there are any

  /// "--d-model" for "d_model".
  std::string flag() const {
    std::string f = "--" + key;
    for (char& c : f)
      if (c == '_') c = '-';
    return f;
  }
};

/// A setting of the given type; the helpers keep declarations one line each.
inline Setting whole_setting(std::string key, std::uint64_t default_value, std::uint64_t min, std::uint64_t max,
                             std::string help) {
  Setting s;
  s.key = std::move(key);
  s.type = Setting::Type::whole;
  s.default_value = default_value;
  s.min = static_cast<double>(min);
  s.max = static_cast<double>(max);
  s.help = std::move(help);
  return s;
}
inline Setting number_setting(std::string key, double default_value, double min, double max, std::string help,
                              bool min_open = false, bool max_open = false) {
  Setting s;
  s.key = std::move(key);
  s.type = Setting::Type::number;
  s.default_value = default_value;
  s.min = min;
  s.max = max;
  s.min_open = min_open;
  s.max_open = max_open;
  s.help = std::move(help);
  return s;
}
inline Setting boolean_setting(std::string key, bool default_value, std::string help) {
  Setting s;
  s.key = std::move(key);
  s.type = Setting::Type::boolean;
  s.default_value = default_value;
  s.help = std::move(help);
  return s;
}
inline Setting text_setting(std::string key, std::string default_value, std::vector<std::string> choices,
                            std::string help) {
  Setting s;
  s.key = std::move(key);
  s.type = Setting::Type::text;
  s.default_value = std::move(default_value);
  s.choices = std::move(choices);
  s.help = std::move(help);
  return s;
}
inline Setting path_setting(std::string key, std::string help) {
  Setting s;
  s.key = std::move(key);
  s.type = Setting::Type::path;
  s.default_value = "";
  s.help = std::move(help);
  return s;
}

/// The values of a component's settings, key → JSON value, every declared key present (defaults filled in). What a
/// registry entry's build function receives.
class SettingValues {
 public:
  SettingValues() : values_(nlohmann::json::object()) {}
  explicit SettingValues(nlohmann::json values) : values_(std::move(values)) {}
  /// The value of `key` as T. Throws SettingError naming the key if it is absent or of another type.
  template <class T>
  T get(const std::string& key) const {
    const auto it = values_.find(key);
    if (it == values_.end()) throw SettingError("setting '" + key + "' is not set");
    try {
      return it->get<T>();
    } catch (const nlohmann::json::exception&) {
      throw SettingError("setting '" + key + "' holds " + it->dump() + ", not the declared type");
    }
  }
  bool contains(const std::string& key) const { return values_.contains(key); }
  void set(const std::string& key, nlohmann::json value) { values_[key] = std::move(value); }
  const nlohmann::json& json() const { return values_; }

 private:
  nlohmann::json values_;
};

/// Defaults of `declared`, overridden by the entries of `given` that are declared (others are ignored here: the
/// caller refuses settings that no component of the run owns).
inline SettingValues resolve_settings(const std::vector<Setting>& declared, const nlohmann::json& given) {
  SettingValues v;
  for (const Setting& s : declared) v.set(s.key, given.contains(s.key) ? given.at(s.key) : s.default_value);
  return v;
}

}  // namespace xgrad
