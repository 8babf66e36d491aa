// Where a test finds the xgrad executable and the source tree: from the environment ctest gives every test
// (tests/CMakeLists.txt), not compiled in, so that a compiler cache reuses a test's object for a build in another
// directory (a clean clone in CI).
#pragma once

#include <unistd.h>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace xgrad::test {

/// The environment variable `name`; throws std::runtime_error saying how to set it when it is not set.
inline const char* required_env(const char* name, const char* what) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0')
    throw std::runtime_error(std::string(name) + " is not set: run the tests through ctest, or set it to " + what);
  return value;
}

/// $XGRAD_BIN, else the xgrad beside the running test executable (both are built into build/bin).
inline const char* xgrad_bin() {
  static const std::string path = [] {
    if (const char* env = std::getenv("XGRAD_BIN"); env != nullptr && *env != '\0') return std::string(env);
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return std::string(required_env("XGRAD_BIN", "the path of build/bin/xgrad"));
    const std::string exe(self, static_cast<std::size_t>(n));
    return exe.substr(0, exe.rfind('/') + 1) + "xgrad";
  }();
  return path.c_str();
}

/// $XGRAD_SOURCE_DIR: the root of xgrad's source tree (fixtures live under tests/).
inline const char* source_dir() {
  static const std::string path = required_env("XGRAD_SOURCE_DIR", "the root of xgrad's source tree");
  return path.c_str();
}

}  // namespace xgrad::test

#define XGRAD_BIN (::xgrad::test::xgrad_bin())
#define XGRAD_SOURCE_DIR (::xgrad::test::source_dir())
