// Whole-number settings written with a decimal point: 16.0 in a config file (what JSON writers such as Python's
// json.dumps(float(16)) produce for a count) or typed as --steps 16.0. Both read as the whole number they equal; a
// fraction (16.5) is refused with a message that names it.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "common/setting.h"

namespace xgrad {

/// Whether `value` is a JSON number written with a decimal point or an exponent (16.0, 1e3) whose value is a whole
/// number a std::uint64_t holds.
inline bool is_whole_float(const nlohmann::json& value) {
  if (!value.is_number_float()) return false;
  const double v = value.get<double>();
  return std::isfinite(v) && v >= 0 && std::floor(v) == v && v < 18446744073709551616.0;
}

/// `value` as setting `s` stores it: for a whole setting a whole float (is_whole_float) becomes the unsigned integer
/// it equals, so config.json writes 16 for a given 16.0; for a text setting that also takes a number, a number (1.0)
/// or the text of one ("1.0") becomes its shortest text ("1"), as a flag's value does; any other value is returned as
/// it is.
inline nlohmann::json whole_setting_value(const Setting& s, const nlohmann::json& value) {
  if (s.type == Setting::Type::whole && is_whole_float(value)) return static_cast<std::uint64_t>(value.get<double>());
  if (s.type == Setting::Type::text && s.takes_number) {
    if (value.is_string()) return detail::shortest_number_text(value.get<std::string>());
    if (value.is_number() && std::isfinite(value.get<double>())) return detail::shortest_number_text(value.dump());
  }
  return value;
}

/// "" unless `value` is a positive finite number with a fractional part given for a whole setting `s`; then what is
/// wrong: "must be a whole number in [1, 1000000000]; 16.5 has a fractional part".
inline std::string whole_setting_fraction_error(const Setting& s, const nlohmann::json& value) {
  if (s.type != Setting::Type::whole || !value.is_number_float()) return "";
  const double v = value.get<double>();
  if (!std::isfinite(v) || v <= 0 || std::floor(v) == v) return "";
  return "must be a whole number in " + range_text(s) + "; " + value.dump() + " has a fractional part";
}

/// The text of a whole setting's flag value as parse_setting_value reads it: "16.0" and "16." become "16"; other
/// text is returned as it is. Sets `error` for digits with a fraction ("16.5 has a fractional part").
inline std::string whole_setting_text(const Setting& s, const std::string& text, std::string& error) {
  if (s.type != Setting::Type::whole) return text;
  const std::size_t point = text.find('.');
  if (point == std::string::npos || point == 0) return text;
  const std::string digits = text.substr(0, point), fraction = text.substr(point + 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos ||
      fraction.find_first_not_of("0123456789") != std::string::npos)
    return text;
  if (fraction.find_first_not_of('0') != std::string::npos)
    error = "must be a whole number in " + range_text(s) + "; " + text + " has a fractional part";
  return digits;
}

/// "" when `text` is a plain decimal whole number in [lo, hi]; else what is wrong, naming the range: "must be a whole
/// number in [1, 64], got 'x'" (empty, or not only digits), "must be in [1, 64], got 99" (out of range).
inline std::string whole_number_text_error(const std::string& text, std::uint64_t lo, std::uint64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    return "must be a whole number in " + range + ", got '" + text + "'";
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE || v < lo || v > hi) return "must be in " + range + ", got " + text;
  return "";
}

}  // namespace xgrad
