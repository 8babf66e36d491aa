// Paths in the commands xgrad prints ("continue with: xgrad train --resume DIR", "xgrad compare DIR"), quoted so the
// line works pasted into a POSIX shell whatever the directory is called.
#pragma once

#include <string>

namespace xgrad::train {

/// `word` unchanged if it holds only characters no POSIX shell treats specially (letters, digits, and _ @ % + = : ,
/// . / -) and is not empty; otherwise in single quotes, each ' written as '\''.
inline std::string shell_quote(const std::string& word) {
  bool plain = !word.empty();
  for (const char ch : word) {
    const bool letter_or_digit = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
    plain = plain && (letter_or_digit || std::string("_@%+=:,./-").find(ch) != std::string::npos);
  }
  if (plain) return word;
  std::string quoted = "'";
  for (const char ch : word) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return quoted + "'";
}

/// A path as a command's argument, quoted as shell_quote does, with "./" before a relative path that starts with
/// '-', which the command would take for a flag.
inline std::string shell_quote_path(const std::string& path) {
  return shell_quote(!path.empty() && path[0] == '-' ? "./" + path : path);
}

}  // namespace xgrad::train
