// File names made from data (an optimizer's name in config.json, a setting's value, a sweep point's name): reduced to
// an alphabet that means nothing to a shell, gnuplot, a URL or a path, so that a name a colleague's run directory
// holds can never reach outside the directory or into a command.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace xgrad {

/// The longest safe file stem: room for a suffix ("_12.dat", ".png") within any file system's 255-byte name limit.
inline constexpr std::size_t kMaxFileStem = 96;
/// The longest stem safe_file_stem makes of a text that is not one: room for a caller's number ("-2") within
/// kMaxFileStem.
inline constexpr std::size_t kMaxReducedStem = 80;

/// Whether `stem` is already a safe file stem: 1 to kMaxFileStem characters of [A-Za-z0-9._-], not starting with
/// '.' (hidden, "." and "..") or '-' (read as an option by a program given the name).
inline bool is_safe_file_stem(std::string_view stem) {
  if (stem.empty() || stem.size() > kMaxFileStem || stem[0] == '.' || stem[0] == '-') return false;
  for (const char ch : stem) {
    const bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
    if (!alnum && ch != '.' && ch != '_' && ch != '-') return false;
  }
  return true;
}

/// `text` as a file stem (is_safe_file_stem): unchanged when it is one already; otherwise each run of other bytes
/// becomes one '_', a leading '.' or '-' becomes '_', the result is cut to leave room for "-" and 8 hex digits of a
/// hash (FNV-1a) of the whole of `text`, which are appended (kMaxReducedStem characters in all), so that two texts that
/// reduce alike ("a;b", "a b") keep apart names. Callers that put several stems in one directory still make them unique
/// among themselves.
inline std::string safe_file_stem(std::string_view text) {
  if (is_safe_file_stem(text)) return std::string(text);
  std::string out;
  for (const char ch : text) {
    const bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
    const bool kept = alnum || ch == '_' || ((ch == '.' || ch == '-') && !out.empty());
    if (kept)
      out += ch;
    else if (out.empty() || out.back() != '_')
      out += '_';
  }
  if (out.empty()) out = "_";  // an empty text
  std::uint32_t hash = 2166136261u;
  for (const unsigned char ch : text) hash = (hash ^ ch) * 16777619u;
  const std::string suffix = fmt::format("-{:08x}", hash);
  if (out.size() > kMaxReducedStem - suffix.size()) out.resize(kMaxReducedStem - suffix.size());
  return out + suffix;
}

}  // namespace xgrad
