// The report's sentences as data: report/text/*.md templates compiled in, read by name, filled from named fields.
#pragma once

#include <map>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace xgrad::report {

/// A template field's value: text, or a number the template formats ("{loss:.3f}"; "{n}" prints it as is).
struct Field {
  std::variant<std::string, double, long long> value;
  Field() = default;
  Field(std::string text) : value(std::move(text)) {}    // NOLINT: implicit, as fields are written {{"name", value}}
  Field(const char* text) : value(std::string(text)) {}  // NOLINT
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Field(T n) : value(static_cast<long long>(n)) {}  // NOLINT
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Field(T x) : value(static_cast<double>(x)) {}  // NOLINT
};

/// A template's fields by name: {{"subject", "sqrt_dk"}, {"n", 3}} fills "{subject}" and "{n}".
using Fields = std::map<std::string, Field>;

/// One "- key: template" line of a text file, with the "## " heading it is under ("" before the first).
struct TextLine {
  std::string section, key, text;
};

/// The "- key: template" lines of report/text/<file>.md, in order. Throws std::out_of_range naming an unknown file.
const std::vector<TextLine>& text_lines(const std::string& file);

/// `pattern` with each {field} filled in (fmt's syntax: "{n:>3}"). Throws fmt::format_error for a missing field.
std::string fill(const std::string& pattern, const Fields& fields);

/// The template `key` cut at each " | ", each part filled in (a table's header, title | caption). Throws as text().
std::vector<std::string> text_cells(const std::string& file, const std::string& key, const Fields& fields = {});

/// "1 run", "3 runs": `n` and `noun`, with an "s" unless n is 1 (the report's counted nouns are regular).
std::string counted(std::size_t n, const std::string& noun);

/// The template `key` of report/text/<file>.md, unfilled and filled in. Throw std::out_of_range naming a missing one.
const std::string& text_template(const std::string& file, const std::string& key);
std::string text(const std::string& file, const std::string& key, const Fields& fields = {});

}  // namespace xgrad::report
