// An enumeration's names: one table of {value, name} pairs for parsing, printing and --help, so that each value's
// text (config.json's, sweep.json's, a flag's) is written once and an unknown name is refused naming the allowed ones.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/escape.h"

namespace xgrad {

/// Thrown by parse_enum for a name that is not in the table; the message names the allowed names.
class EnumNameError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// One value of an enumeration and its name. A table is a constexpr array of these, each value once:
///   inline constexpr EnumName<OnNan> kOnNanNames[] = {{OnNan::stop, "stop"}, {OnNan::skip, "skip"}};
template <class E>
struct EnumName {
  E value;
  const char* name;
};

/// The names of `table`, in its order: the allowed values (Setting::choices, --help).
template <class E, std::size_t N>
std::vector<std::string> enum_names(const EnumName<E> (&table)[N]) {
  std::vector<std::string> names;
  for (const EnumName<E>& e : table) names.emplace_back(e.name);
  return names;
}

/// The name of `value`. Throws std::logic_error for a value the table lacks (a table missing a value is a bug).
template <class E, std::size_t N>
std::string enum_name(const EnumName<E> (&table)[N], E value) {
  for (const EnumName<E>& e : table)
    if (e.value == value) return e.name;
  throw std::logic_error("enum_name: a value without a name (value " + std::to_string(static_cast<long long>(value)) +
                         ")");
}

/// The value named `name`. Throws EnumNameError "'<name>' is not one of <a>, <b>" for any other text.
template <class E, std::size_t N>
E parse_enum(const EnumName<E> (&table)[N], const std::string& name) {
  std::string allowed;
  for (const EnumName<E>& e : table) {
    if (name == e.name) return e.value;
    allowed += (allowed.empty() ? "" : ", ") + std::string(e.name);
  }
  throw EnumNameError("'" + shortened_name(name) + "' is not one of " + allowed);
}

}  // namespace xgrad
