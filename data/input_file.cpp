#include "data/input_file.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// Header-only: no library to link, for xgrad or for what builds against an installed xgrad.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "data/task.h"

namespace xgrad::data {

nlohmann::json InputFile::to_json() const {
  return {{"setting", setting}, {"path", path}, {"size", size}, {"xxh3", hash_text(xxh3)}};
}

InputFile InputFile::from_json(const nlohmann::json& j) {
  auto field = [&](const char* key) -> const nlohmann::json& {
    if (!j.is_object() || !j.contains(key)) throw std::invalid_argument(std::string("no '") + key + "'");
    return j.at(key);
  };
  InputFile f;
  if (!field("setting").is_string() || !field("path").is_string() || !field("size").is_number_unsigned() ||
      !field("xxh3").is_string())
    throw std::invalid_argument("setting, path, xxh3 must be strings and size a whole number");
  f.setting = j.at("setting").get<std::string>();
  f.path = j.at("path").get<std::string>();
  f.size = j.at("size").get<std::uint64_t>();
  const std::string hex = j.at("xxh3").get<std::string>();
  if (hex.size() != 16 || hex.find_first_not_of("0123456789abcdef") != std::string::npos)
    throw std::invalid_argument("xxh3 is not 16 hex digits");
  f.xxh3 = std::stoull(hex, nullptr, 16);
  return f;
}

std::string hash_text(std::uint64_t hash) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(hash));
  return buf;
}

struct ContentHash::State {
  XXH3_state_t xxh;
};

ContentHash::ContentHash() : state_(std::make_unique<State>()) { XXH3_64bits_reset(&state_->xxh); }
ContentHash::~ContentHash() = default;
void ContentHash::update(const void* data, std::size_t size) { XXH3_64bits_update(&state_->xxh, data, size); }
std::uint64_t ContentHash::digest() const { return XXH3_64bits_digest(&state_->xxh); }

InputReader::InputReader(const std::string& path, const std::string& setting, const std::string& what)
    : setting_(setting), path_(std::filesystem::absolute(path).lexically_normal().string()), what_(what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) throw TaskError(what_ + " does not exist");
    throw TaskError(what_ + " cannot be read: " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) throw TaskError(what_ + " is a directory, not a file");
  // A device or pipe (/dev/zero, /dev/stdin) would be read without end.
  if (!S_ISREG(st.st_mode)) throw TaskError(what_ + " is not a regular file");
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw TaskError(what_ + " cannot be opened: " + std::strerror(errno));
  if (::fstat(fd_, &st) != 0) throw TaskError(what_ + " cannot be read: " + std::strerror(errno));
  size_ = static_cast<std::uint64_t>(st.st_size);
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
}

InputReader::~InputReader() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

// Faults in the pages of [p, p + n) in one call (Linux 5.14+; elsewhere a no-op): read() into fresh memory would
// otherwise take a page fault per 4 KiB, which costs more than the copy itself.
void populate(unsigned char* p, std::size_t n) {
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;
#endif
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(p) + page - 1) / page * page;
  const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(p) + n) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

}  // namespace

void InputReader::read(void* out, std::size_t n) {
  // Pieces small enough to be hashed while still in cache.
  constexpr std::size_t kPiece = std::size_t(4) << 20;
  auto* p = static_cast<unsigned char*>(out);
  if (n >= 16 * kPiece) populate(p, n);
  while (n > 0) {
    const ssize_t got = ::read(fd_, p, std::min(n, kPiece));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw TaskError(what_ + " cannot be read: " + std::strerror(errno));
    }
    if (got == 0)
      throw TaskError(what_ + " ended after " + std::to_string(done_) + " of its " + std::to_string(size_) +
                      " bytes (was it changed while being read?)");
    hash_.update(p, static_cast<std::size_t>(got));
    p += got;
    n -= static_cast<std::size_t>(got);
    done_ += static_cast<std::uint64_t>(got);
  }
}

InputFile InputReader::finish() {
  char extra;
  ssize_t got;
  do got = ::read(fd_, &extra, 1);
  while (got < 0 && errno == EINTR);
  if (got > 0 || done_ != size_)
    throw TaskError(what_ + " changed size while being read (" + std::to_string(size_) + " bytes when opened)");
  return InputFile{setting_, path_, size_, hash_.digest()};
}

InputFile fingerprint_file(const std::string& path, const std::string& setting, const std::string& what) {
  InputReader in(path, setting, what);
  std::vector<unsigned char> piece(std::size_t(4) << 20);
  for (std::uint64_t left = in.size(); left > 0;) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, piece.size()));
    in.read(piece.data(), n);
    left -= n;
  }
  return in.finish();
}

}  // namespace xgrad::data
