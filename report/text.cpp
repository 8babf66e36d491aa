#include "report/text.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <stdexcept>

#include <fmt/args.h>
#include <fmt/format.h>

#include "report/web_assets.h"

namespace xgrad::report {

namespace {

std::vector<TextLine> parse(const std::string& md) {
  std::vector<TextLine> out;
  std::istringstream in(md);
  for (std::string line, section; std::getline(in, line);) {
    const std::size_t colon = line.find(": ");
    if (line.rfind("## ", 0) == 0)
      section = line.substr(3);
    else if (line.rfind("- ", 0) == 0 && colon != std::string::npos)
      out.push_back({section, line.substr(2, colon - 2), line.substr(colon + 2)});
  }
  return out;
}

const TextLine* find_line(const std::string& file, const std::string& key) {
  const std::vector<TextLine>& lines = text_lines(file);
  const auto it = std::find_if(lines.begin(), lines.end(), [&](const TextLine& l) { return l.key == key; });
  return it == lines.end() ? nullptr : &*it;
}

}  // namespace

const std::vector<TextLine>& text_lines(const std::string& file) {
  static const std::map<std::string, std::vector<TextLine>> files = [] {
    std::map<std::string, std::vector<TextLine>> out;
    for (std::size_t i = 0; i < web_assets::kTextCount; ++i)
      out[web_assets::kTextNames[i]] = parse(web_assets::kTexts[i]);
    return out;
  }();
  const auto it = files.find(file);
  if (it == files.end()) throw std::out_of_range("report/text has no file '" + file + ".md'");
  return it->second;
}

std::string fill(const std::string& pattern, const Fields& fields) {
  fmt::dynamic_format_arg_store<fmt::format_context> args;
  for (const auto& [name, field] : fields)
    std::visit([&args, &name = name](const auto& v) { args.push_back(fmt::arg(name.c_str(), v)); }, field.value);
  return fmt::vformat(pattern, args);
}

std::string counted(std::size_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

const std::string& text_template(const std::string& file, const std::string& key) {
  const TextLine* line = find_line(file, key);
  if (!line) throw std::out_of_range("report/text/" + file + ".md has no line '" + key + "'");
  return line->text;
}

std::string text(const std::string& file, const std::string& key, const Fields& fields) {
  return fill(text_template(file, key), fields);
}

std::vector<std::string> text_cells(const std::string& file, const std::string& key, const Fields& fields) {
  const std::string& line = text_template(file, key);
  std::vector<std::string> cells;
  for (std::size_t at = 0, bar = 0; bar != std::string::npos; at = bar + 3) {
    bar = line.find(" | ", at);
    cells.push_back(fill(line.substr(at, bar == std::string::npos ? bar : bar - at), fields));
  }
  return cells;
}

}  // namespace xgrad::report
