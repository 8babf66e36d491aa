// File images built in memory, for the loader tests and the fuzz seeds: raw little-endian values, a .npy image, and
// the message a parser throws on bytes.
#pragma once

#include <cstring>
#include <initializer_list>
#include <string>

namespace xgrad::testing {

/// The bytes of `values` as they lie in memory (little-endian on every machine xgrad builds on).
template <class T>
std::string raw(std::initializer_list<T> values) {
  std::string s(values.size() * sizeof(T), '\0');
  std::memcpy(s.data(), values.begin(), s.size());
  return s;
}

/// A .npy image laid out as numpy lays it out: magic, version `major`.0, header length (2 bytes in version 1, 4
/// after), the header dict padded with spaces to a multiple of 64 bytes and ended by a newline, then `data`.
inline std::string npy_image(const std::string& dict, const std::string& data, int major = 1) {
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  std::string header = dict;
  while ((out.size() + length_bytes + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  for (std::size_t i = 0; i < length_bytes; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

/// The message of the `Error` that `parse()` throws; "" if it throws none.
template <class Error, class Parse>
std::string error_message(const Parse& parse) {
  try {
    parse();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace xgrad::testing
