// Malformed file images and what a parser must answer to each: the loader tests (.npy, safetensors) hold such a
// table. One helper checks a table.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <doctest/doctest.h>

namespace xgrad::testing {

/// A malformed file image: what is wrong with it, its bytes, a part of the message that must refuse it.
struct BadFile {
  const char* what;
  std::string bytes;
  const char* message;
};

/// Every case of `cases` is refused with its message, which starts with `prefix`; and every truncation of the valid
/// image `good` is refused, none crashes. `parse_error(bytes)` is the message of parsing `bytes`, "" if it parses.
template <class ParseError>
void check_bad_files(const std::vector<BadFile>& cases, const std::string& good, const std::string& prefix,
                     const ParseError& parse_error) {
  for (const BadFile& c : cases) {
    INFO(c.what);
    const std::string message = parse_error(c.bytes);
    CHECK(message.find(c.message) != std::string::npos);
    CHECK(message.rfind(prefix, 0) == 0);
  }
  for (std::size_t n = 0; n < good.size(); ++n) CHECK_FALSE(parse_error(good.substr(0, n)).empty());
}

}  // namespace xgrad::testing
