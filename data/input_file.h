// Input files as a run reads them: in bulk, once, with a content hash taken on the way, so that config.json can
// record which bytes the run was trained on and a resumed run can tell whether it reads the same ones.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace xgrad::data {

/// One file a task read: the setting that names it, where it was, how long and what it held.
struct InputFile {
  std::string setting;     ///< the config.json key that names it (or its directory): "text", "data"
  std::string path;        ///< absolute, lexically normal, as opened
  std::uint64_t size = 0;  ///< bytes
  std::uint64_t xxh3 = 0;  ///< XXH3-64 (seed 0) of all `size` bytes

  /// {"setting": ..., "path": ..., "size": ..., "xxh3": "16 hex digits"}, as config.json's "inputs" holds it.
  nlohmann::json to_json() const;
  /// The inverse of to_json; throws std::invalid_argument naming the missing or mistyped key.
  static InputFile from_json(const nlohmann::json& j);
};

/// "0123456789abcdef": a hash as config.json and messages show it.
std::string hash_text(std::uint64_t hash);

/// XXH3-64 over bytes fed in pieces (xxHash, Debian's libxxhash-dev, used header-only).
/// Not copyable (it owns its state).
class ContentHash {
 public:
  ContentHash();
  ~ContentHash();
  void update(const void* data, std::size_t size);
  std::uint64_t digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// An open regular file read front to back in large pieces. `what` names the file in errors ("char_lm: --text
/// file '...'"); every error is thrown as TaskError. Each byte read goes through the content hash as it arrives
/// (while it is in cache), so the hash costs no second pass over the file.
class InputReader {
 public:
  /// Opens `path` (missing, a directory, a device or pipe, or unreadable: TaskError "<what> ...").
  InputReader(const std::string& path, const std::string& setting, const std::string& what);
  ~InputReader();
  InputReader(const InputReader&) = delete;
  InputReader& operator=(const InputReader&) = delete;
  /// The file's size in bytes when it was opened.
  std::uint64_t size() const { return size_; }
  /// Reads exactly `n` bytes into `out`; TaskError if the file ends first (it shrank while being read) or a read
  /// fails.
  void read(void* out, std::size_t n);
  /// After the whole file was read: its fingerprint. TaskError if bytes remain (the file grew while being read).
  InputFile finish();

 private:
  int fd_ = -1;
  std::string setting_, path_, what_;
  std::uint64_t size_ = 0, done_ = 0;
  ContentHash hash_;
};

/// The fingerprint of the whole file at `path` (read front to back; nothing kept), as InputReader gives it. Throws
/// TaskError "<what> ..." as InputReader does.
InputFile fingerprint_file(const std::string& path, const std::string& setting, const std::string& what);

}  // namespace xgrad::data
