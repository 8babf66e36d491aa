// Setting: the one declaration of a setting (flag, config.json key, type, default, range, help). The CLI's flags,
// config.json writing and reading, resume checks, sweep axes and the children a sweep starts all come from these
// declarations. Core settings are declared in train/settings.cpp; a registry entry (a task, a scaling, an attention
// layer, an optimizer) declares its own settings beside its code.
#pragma once

#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/escape.h"

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
  std::uint64_t whole_min = 0, whole_max = std::numeric_limits<std::uint64_t>::max();  ///< whole: exact bounds
  std::vector<std::string> choices;  ///< text: the allowed values (empty: any)
  bool takes_number = false;         ///< text: a decimal number in [min, max] is allowed too, beside the choices
  std::string help;                  ///< one line for --help; units where there are any

  /// What a setting means for a comparison of runs: `arm` settings change what is trained (runs that differ in one
  /// are different arms), `replicate` settings tell the replicates of an arm apart (seeds), `record` settings change
  /// only how the run is recorded or executed (output directory, logging cadence, threads), never its numbers.
  enum class Role { arm, replicate, record };
  Role role = Role::arm;
  /// A resumed run may change it (it does not alter what the run computes).
  bool resumable = false;
  /// The commands that take it as a flag (bits below); the others refuse it or set it themselves.
  static constexpr unsigned kTrain = 1, kSweep = 2, kProbe = 4, kEveryCommand = 7;
  unsigned commands = kEveryCommand;

  // Builder steps: each returns a copy with one property set, so that a declaration reads as what it means:
  //   whole_setting("steps", 800, 1, kMaxSteps, "training steps").may_change_on_resume().only_for(kTrain | kSweep)
  /// The range excludes `min`: (min, max].
  Setting excluding_min() const {
    return with([](Setting& s) { s.min_open = true; });
  }
  /// The range excludes `max`: [min, max).
  Setting excluding_max() const {
    return with([](Setting& s) { s.max_open = true; });
  }
  /// A setting that tells the replicates of an arm apart (Role::replicate).
  Setting replicate() const {
    return with([](Setting& s) { s.role = Role::replicate; });
  }
  /// A setting that changes only how the run is recorded or executed (Role::record).
  Setting record_only() const {
    return with([](Setting& s) { s.role = Role::record; });
  }
  /// A resumed run may change it.
  Setting may_change_on_resume() const {
    return with([](Setting& s) { s.resumable = true; });
  }
  /// Only these commands (kTrain, kSweep, kProbe bits) take it as a flag.
  Setting only_for(unsigned command_bits) const {
    return with([command_bits](Setting& s) { s.commands = command_bits; });
  }

  /// "--d-model" for "d_model".
  std::string flag() const {
    std::string f = "--" + key;
    for (char& c : f)
      if (c == '_') c = '-';
    return f;
  }

 private:
  template <class Change>
  Setting with(Change change) const {
    Setting s = *this;
    change(s);
    return s;
  }
};

namespace detail {
// What every declaration sets; the helpers below add their type's range or choices.
inline Setting declared(std::string key, Setting::Type type, nlohmann::json default_value, std::string help) {
  Setting s;
  s.key = std::move(key);
  s.type = type;
  s.default_value = std::move(default_value);
  s.help = std::move(help);
  return s;
}
}  // namespace detail

/// A setting of the given type; the helpers keep declarations one line each.
inline Setting whole_setting(std::string key, std::uint64_t default_value, std::uint64_t min, std::uint64_t max,
                             std::string help) {
  Setting s = detail::declared(std::move(key), Setting::Type::whole, default_value, std::move(help));
  s.min = static_cast<double>(min);
  s.max = static_cast<double>(max);
  s.whole_min = min;
  s.whole_max = max;
  return s;
}
/// A number in [min, max]; excluding_min() / excluding_max() open an end.
inline Setting number_setting(std::string key, double default_value, double min, double max, std::string help) {
  Setting s = detail::declared(std::move(key), Setting::Type::number, default_value, std::move(help));
  s.min = min;
  s.max = max;
  return s;
}
inline Setting boolean_setting(std::string key, bool default_value, std::string help) {
  return detail::declared(std::move(key), Setting::Type::boolean, default_value, std::move(help));
}
inline Setting text_setting(std::string key, std::string default_value, std::vector<std::string> choices,
                            std::string help) {
  Setting s = detail::declared(std::move(key), Setting::Type::text, std::move(default_value), std::move(help));
  s.choices = std::move(choices);
  return s;
}
/// A name among `choices` or a decimal number in [min, max] (excluding_min() / excluding_max() open an end), kept as
/// text ("inv_sqrt_dk", "0.12"): a value that is either a named rule or a constant.
inline Setting name_or_number_setting(std::string key, std::string default_value, std::vector<std::string> choices,
                                      double min, double max, std::string help) {
  Setting s = text_setting(std::move(key), std::move(default_value), std::move(choices), std::move(help));
  s.min = min;
  s.max = max;
  s.takes_number = true;
  return s;
}
inline Setting path_setting(std::string key, std::string help) {
  return detail::declared(std::move(key), Setting::Type::path, "", std::move(help));
}

/// "[1, 4096]", "(0, 1]", "[0, inf)": the allowed range of a whole or number setting.
inline std::string range_text(const Setting& s) {
  auto number = [](double v) {
    if (std::isinf(v)) return std::string(v < 0 ? "-inf" : "inf");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return std::string(buf);
  };
  if (s.type == Setting::Type::whole)
    return "[" + std::to_string(s.whole_min) + ", " + std::to_string(s.whole_max) + "]";
  return std::string(s.min_open || std::isinf(s.min) ? "(" : "[") + number(s.min) + ", " + number(s.max) +
         (s.max_open || std::isinf(s.max) ? ")" : "]");
}

namespace detail {
/// True if `text` is a decimal number as a number setting takes it: [+-]? (digits [. digits] | . digits), then
/// optionally [eE] [+-]? digits. (Matched by hand: <regex> would be parsed by every file that includes this one.)
inline bool is_decimal_number(const std::string& text) {
  std::size_t i = 0;
  const auto sign = [&] {
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  };
  const auto digits = [&] {
    const std::size_t from = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    return i > from;
  };
  sign();
  const bool whole_part = digits();
  bool fraction = false;
  if (i < text.size() && text[i] == '.') {
    ++i;
    fraction = digits();
  }
  if (!whole_part && !fraction) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    sign();
    if (!digits()) return false;
  }
  return i == text.size();
}

/// A number as its shortest decimal that reads back to the same double ("1.0", "1e0" and "01" are "1"), so that a
/// text setting that also takes a number holds one text per value; other text as it is.
inline std::string shortest_number_text(const std::string& text) {
  if (!is_decimal_number(text)) return text;
  errno = 0;
  const double v = std::strtod(text.c_str(), nullptr);
  if (!std::isfinite(v) || errno == ERANGE) return text;
  char buffer[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof buffer, "%.*g", digits, v);
    if (std::strtod(buffer, nullptr) == v) return buffer;
  }
  return text;
}
}  // namespace detail

namespace detail {
/// "" for 0 or a magnitude in [FLT_MIN, FLT_MAX]; else why not: xgrad computes in float, where a smaller nonzero
/// number is 0 or a subnormal that flush_denormals zeroes, so it would silently mean 0 (or "use the default" for a
/// setting where 0 says that), and a larger one is inf.
inline std::string check_normal_float(const Setting& s, double v, const std::string& shown, bool underflowed = false) {
  if (!underflowed && std::fabs(v) > FLT_MAX)
    return "must be at most 3.40282347e+38 in magnitude (the largest float), got " + shown;
  if (!underflowed && (v == 0 || static_cast<float>(std::fabs(v)) >= FLT_MIN)) return "";
  const bool zero_allowed = (s.min_open ? 0 > s.min : 0 >= s.min) && (s.max_open ? 0 < s.max : 0 <= s.max);
  return std::string(zero_allowed ? "must be 0 or at least" : "must be at least") +
         " 1.17549435e-38 in magnitude (the smallest normal float), got " + shown;
}
}  // namespace detail

/// Checks that `value` has the declared type and lies in the declared range or choices, a number 0 or between the
/// smallest normal float and the largest float in magnitude. Returns "" if it does, else what is wrong ("must be in
/// [1, 4096], got 0"), without the flag: callers put the flag or key in front.
inline std::string check_setting_value(const Setting& s, const nlohmann::json& value) {
  switch (s.type) {
    case Setting::Type::boolean:
      return value.is_boolean() ? "" : "must be true or false, got " + value.dump();
    case Setting::Type::whole: {
      // A JSON literal 10 built in C++ is a signed integer, the same number parsed from a file unsigned.
      const bool whole = value.is_number_unsigned() || (value.is_number_integer() && value.get<std::int64_t>() >= 0);
      if (!whole) return "must be a whole number in " + range_text(s) + ", got " + value.dump();
      const std::uint64_t v = value.get<std::uint64_t>();
      if (v < s.whole_min || v > s.whole_max) return "must be in " + range_text(s) + ", got " + std::to_string(v);
      return "";
    }
    case Setting::Type::number: {
      if (!value.is_number()) return "must be a number, got " + value.dump();
      const double v = value.get<double>();
      if (!std::isfinite(v)) return "must be finite, got " + value.dump();
      const bool above = s.min_open ? v > s.min : v >= s.min, below = s.max_open ? v < s.max : v <= s.max;
      if (!above || !below) return "must be in " + range_text(s) + ", got " + value.dump();
      return detail::check_normal_float(s, v, value.dump());
    }
    case Setting::Type::text:
    case Setting::Type::path: {
      if (!value.is_string()) return "must be a string, got " + value.dump();
      if (s.choices.empty() && !s.takes_number) return "";
      const std::string& text = value.get<std::string>();
      std::string allowed;
      for (const std::string& c : s.choices) {
        if (c == text) return "";
        allowed += (allowed.empty() ? "" : ",") + c;
      }
      if (!s.takes_number) return shortened_name(text) + " not in {" + allowed + "}";
      if (detail::is_decimal_number(text)) {
        const double v = std::strtod(text.c_str(), nullptr);
        if (std::isfinite(v) && (s.min_open ? v > s.min : v >= s.min) && (s.max_open ? v < s.max : v <= s.max))
          return detail::check_normal_float(s, v, "'" + text + "'");
      }
      return "must be " + (allowed.empty() ? "" : allowed + " or ") + "a number in " + range_text(s) + ", got '" +
             shortened_name(text) + "'";
    }
  }
  return "";
}

/// Parses `text` (a flag's value, a --grid entry) as a value of `s` into `value` and checks it
/// (check_setting_value). Whole numbers are plain decimal digits (no sign: "-1" is refused, not wrapped to 2^64 - 1);
/// numbers are decimal (no hex, inf or nan); booleans are true/false/1/0. Returns "" or what is wrong.
inline std::string parse_setting_value(const Setting& s, const std::string& text, nlohmann::json& value) {
  switch (s.type) {
    case Setting::Type::boolean:
      if (text == "true" || text == "1")
        value = true;
      else if (text == "false" || text == "0")
        value = false;
      else
        return "must be true or false, got '" + text + "'";
      break;
    case Setting::Type::whole: {
      if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
        return "must be a whole number in " + range_text(s) + ", got '" + text + "'";
      errno = 0;
      const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
      if (errno == ERANGE) return "must be in " + range_text(s) + ", got " + text;
      value = static_cast<std::uint64_t>(v);
      break;
    }
    case Setting::Type::number: {
      if (!detail::is_decimal_number(text)) return "must be a decimal number, got '" + text + "'";
      errno = 0;
      const double v = std::strtod(text.c_str(), nullptr);
      if (!std::isfinite(v)) return "must be finite, got " + text;
      // Below the smallest double ("1e-400") reads as 0: refused as what was written, not taken as 0.
      if (errno == ERANGE && v == 0) return detail::check_normal_float(s, v, text, true);
      value = v;
      break;
    }
    case Setting::Type::text:
    case Setting::Type::path:
      value = s.takes_number ? detail::shortest_number_text(text) : text;
      break;
  }
  const std::string error = check_setting_value(s, value);
  // A number out of range is reported as the user wrote it, not as JSON prints it back.
  if (!error.empty() && (s.type == Setting::Type::number || s.type == Setting::Type::whole)) {
    const std::size_t got = error.rfind(", got ");
    if (got != std::string::npos) return error.substr(0, got) + ", got " + text;
  }
  return error;
}

/// The text form of a value, as a flag takes it (parse_setting_value reads it back to the same value): strings as
/// they are, numbers in the shortest form that round-trips, booleans as true/false.
inline std::string setting_value_text(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_float()) {
    char buf[32];
    for (int precision = 1; precision <= 17; ++precision) {
      std::snprintf(buf, sizeof buf, "%.*g", precision, value.get<double>());
      if (std::strtod(buf, nullptr) == value.get<double>()) break;
    }
    // 50, not 5e+01: whole numbers of ordinary size without an exponent.
    const double v = value.get<double>();
    if (std::string(buf).find('e') != std::string::npos && v == std::floor(v) && std::fabs(v) < 1e15)
      std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  return value.dump();
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
