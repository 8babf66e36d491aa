// Checks of text xgrad shows (terminal output, report.md, explain.md) that holds names from the data: every name
// stays on its own line, escaped, so that no name can forge a line, move the cursor or break a terminal's UTF-8.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "common/escape.h"

namespace xgrad::testing {

/// The lines of `text` that hold a control character (any C0 byte, DEL, or a C1 control U+0080..U+009F) or a byte
/// that starts no well-formed UTF-8 sequence: a name shown raw. Their numbers (from 1); empty when every line is
/// clean.
inline std::vector<std::size_t> raw_lines(const std::string& text) {
  std::vector<std::size_t> found;
  std::istringstream lines(text);
  std::size_t number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    bool raw = false;
    for (std::size_t i = 0; i < line.size() && !raw;) {
      const auto ch = static_cast<unsigned char>(line[i]);
      const std::size_t n = utf8_sequence_length(line, i);
      raw = n == 0 || ch < 0x20 || ch == 0x7F || (ch == 0xC2 && static_cast<unsigned char>(line[i + 1]) <= 0x9F);
      i += n;
    }
    if (raw) found.push_back(number);
  }
  return found;
}

/// Whether a line of `text` starts with `start`: a line a name's newline forged.
inline bool has_line_starting(const std::string& text, const std::string& start) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(start, 0) == 0) return true;
  return false;
}

}  // namespace xgrad::testing
