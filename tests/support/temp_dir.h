// Temporary directories for tests, removed with everything in them when their owner goes away — at the end of a
// scope, or when the test executable exits — also after a failed CHECK or an exception.
#pragma once

#include <atomic>
#include <filesystem>
#include <string>
#include <system_error>

#include <unistd.h>

namespace xgrad::testing {

/// A fresh, empty directory <temp>/xgrad_test_<name>_<pid>_<n>, removed (recursively) by the destructor.
class TempDir {
 public:
  explicit TempDir(const std::string& name) {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("xgrad_test_" + name + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;  // a destructor must not throw; a directory already gone is fine
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string string() const { return path_.string(); }
  std::filesystem::path operator/(const std::filesystem::path& p) const { return path_ / p; }
  operator const std::filesystem::path&() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// A path that does not exist yet, for a test to create (a run directory, a file): `name` inside one TempDir that
/// lives as long as the test executable, so everything under it is removed when the executable exits.
inline std::filesystem::path temp_dir(const std::string& name) {
  static const TempDir root("run");
  const std::filesystem::path p = root / name;
  std::filesystem::remove_all(p);
  return p;
}

}  // namespace xgrad::testing
