#include "data/npy.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include <fcntl.h>
#include <unistd.h>

#include "data/task.h"

namespace xgrad::data {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the reader copies little-endian data as is");

namespace {

// The header dict, in the small subset of Python literal syntax numpy writes: strings in quotes, True/False,
// tuples of whole numbers.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& source) : s_(text), source_(source) {}

  void parse(std::string& descr, bool& fortran_order, std::vector<std::size_t>& shape) {
    std::set<std::string> seen;
    skip_space();
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') {
        ++pos_;
        break;
      }
      const std::string key = string_literal();
      if (!seen.insert(key).second) throw fail("the header repeats the key '" + key + "'");
      skip_space();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"')
          throw fail("descr is not a string (structured or record arrays are not supported)");
        descr = string_literal();
      } else if (key == "fortran_order") {
        fortran_order = boolean();
      } else if (key == "shape") {
        shape = tuple();
      } else {
        throw fail("the header has an unknown key '" + key + "' (allowed: descr, fortran_order, shape)");
      }
      if (!next_item('}', "")) break;
    }
    skip_space();
    if (pos_ != s_.size()) throw fail("the header has text after its closing '}'");
    for (const char* key : {"descr", "fortran_order", "shape"})
      if (!seen.count(key)) throw fail(std::string("the header has no '") + key + "' key");
  }

 private:
  TaskError fail(const std::string& what) const { return TaskError("npy: " + source_ + ": " + what); }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  // After an item of a dict or tuple: true past a ',' (another item may follow), false past `close` (the end).
  bool next_item(char close, const char* where) {
    skip_space();
    if (peek() == ',') {
      ++pos_;
      return true;
    }
    if (peek() != close)
      throw fail(std::string("expected ',' or '") + close + "'" + where + " at header byte " + std::to_string(pos_));
    ++pos_;
    return false;
  }
  void expect(char c) {
    if (peek() != c) throw fail(std::string("expected '") + c + "' at header byte " + std::to_string(pos_));
    ++pos_;
  }
  std::string string_literal() {
    const char quote = peek();
    if (quote != '\'' && quote != '"')
      throw fail("expected a quoted key or string at header byte " + std::to_string(pos_));
    ++pos_;
    const std::size_t begin = pos_;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      if (s_[pos_] == '\\') throw fail("escape sequences in header strings are not supported");
      ++pos_;
    }
    if (pos_ >= s_.size()) throw fail("a header string is not closed");
    return s_.substr(begin, pos_++ - begin);
  }
  bool boolean() {
    if (s_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (s_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    throw fail("fortran_order is neither True nor False");
  }
  std::vector<std::size_t> tuple() {
    std::vector<std::size_t> dims;
    expect('(');
    while (true) {
      skip_space();
      if (peek() == ')') {
        ++pos_;
        break;
      }
      if (peek() < '0' || peek() > '9') throw fail("shape holds something other than whole numbers");
      std::size_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        const std::size_t digit = static_cast<std::size_t>(peek() - '0');
        if (v > (SIZE_MAX - digit) / 10) throw fail("a shape dimension does not fit in 64 bits");
        v = v * 10 + digit;
        ++pos_;
      }
      if (peek() == 'L') ++pos_;  // Python 2 long literal, as old numpy versions wrote
      dims.push_back(v);
      if (dims.size() > 32) throw fail("shape has more than 32 dimensions");
      if (!next_item(')', " in shape")) break;
    }
    return dims;
  }

  const std::string& s_;
  const std::string& source_;
  std::size_t pos_ = 0;
};

}  // namespace

namespace {

TaskError npy_error(const std::string& source, const std::string& what) {
  return TaskError("npy: " + source + ": " + what);
}

// Where the header dict lies in a file of `size` bytes, from its first min(size, 12) bytes at `bytes`: checks the
// magic, the version and the header length. Returns {header_begin, header_len}.
std::pair<std::size_t, std::size_t> locate_header(const unsigned char* bytes, std::size_t size,
                                                  const std::string& source) {
  static const unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (size < 10 || std::memcmp(bytes, magic, 6) != 0) throw npy_error(source, "not a .npy file (no \\x93NUMPY magic)");
  const unsigned major = bytes[6], minor = bytes[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    throw npy_error(source, "format version " + std::to_string(major) + "." + std::to_string(minor) +
                                " is not supported (allowed: 1.0, 2.0, 3.0)");
  std::size_t header_len = 0, header_begin = 0;
  if (major == 1) {
    header_len = bytes[8] | (static_cast<std::size_t>(bytes[9]) << 8);
    header_begin = 10;
  } else {
    if (size < 12) throw npy_error(source, "the file ends inside the header length");
    header_len = bytes[8] | (static_cast<std::size_t>(bytes[9]) << 8) | (static_cast<std::size_t>(bytes[10]) << 16) |
                 (static_cast<std::size_t>(bytes[11]) << 24);
    header_begin = 12;
  }
  if (header_len > kMaxNpyHeaderBytes)
    throw npy_error(source, "header length " + std::to_string(header_len) + " exceeds the limit of " +
                                std::to_string(kMaxNpyHeaderBytes) + " bytes");
  if (header_len > size - header_begin)
    throw npy_error(source, "header length " + std::to_string(header_len) + " runs past the end of the file (" +
                                std::to_string(size - header_begin) + " bytes follow the length)");
  return {header_begin, header_len};
}

// The array a header describes, without its data; `data_size` is the number of bytes after the header. Returns
// the number of elements, with out.descr and out.shape set.
std::size_t parse_header(const std::string& header, std::size_t data_size, const std::string& source, NpyArray& out) {
  bool fortran_order = false;
  HeaderParser(header, source).parse(out.descr, fortran_order, out.shape);
  std::size_t itemsize = 0;
  if (out.descr == "<i4")
    itemsize = 4;
  else if (out.descr == "<i8")
    itemsize = 8;
  else
    throw npy_error(source,
                    "dtype '" + out.descr + "' is not supported (allowed: '<i4' int32, '<i8' int64, little-endian)");
  if (fortran_order)
    throw npy_error(source, "fortran_order is True; save a C-ordered array (np.ascontiguousarray) instead");
  std::size_t count = 1;
  for (std::size_t d : out.shape) {
    if (d != 0 && count > (SIZE_MAX / itemsize) / d)
      throw npy_error(source, "the shape has more elements than a file can hold");
    count *= d;
  }
  if (data_size != count * itemsize)
    throw npy_error(source, "the data is " + std::to_string(data_size) + " bytes, but the shape and dtype need " +
                                std::to_string(count * itemsize) +
                                (data_size < count * itemsize ? " (truncated file)" : ""));
  return count;
}

// The element storage of `out` (descr and size known), as bytes to fill. A failed allocation is the data's size
// (the arrays are the largest thing a run holds, and are allocated before the model): said so, naming the file.
void* allocate(NpyArray& out, std::size_t count, const std::string& source) {
  try {
    if (out.descr == "<i4") {
      out.int32_values.resize(count);
      return out.int32_values.data();
    }
    out.int64_values.resize(count);
    return out.int64_values.data();
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  throw TaskError("npy: cannot allocate " + gib_text(static_cast<double>(count) * (out.descr == "<i4" ? 4 : 8)) +
                  " for " + source + " " + npy_text(out.shape, out.descr) +
                  ": the data does not fit in the memory this process may use; give fewer rows");
}

}  // namespace

std::string gib_text(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
  return buf;
}

std::string npy_text(const std::vector<std::size_t>& shape, const std::string& descr) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "] " + (descr == "<i4" ? "int32" : descr == "<i8" ? "int64" : descr);
}

NpyArray parse_npy(const void* data, std::size_t size, const std::string& source) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  const auto [header_begin, header_len] = locate_header(bytes, size, source);
  const std::string header(reinterpret_cast<const char*>(bytes + header_begin), header_len);
  const std::size_t data_begin = header_begin + header_len;
  NpyArray out;
  const std::size_t count = parse_header(header, size - data_begin, source, out);
  if (count > 0) {
    void* dest = allocate(out, count, source);
    std::memcpy(dest, bytes + data_begin, out.bytes());
  }
  return out;
}

NpyArray read_npy(const std::string& path, const std::string& setting, InputFile* fingerprint) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) throw TaskError("npy: " + path + ": no such file");
  if (!fs::is_regular_file(status)) throw TaskError("npy: " + path + ": not a regular file");
  InputReader in(path, setting, "npy: " + path + ":");
  const std::uint64_t size = in.size();
  unsigned char preamble[12] = {};
  const std::size_t preamble_size = static_cast<std::size_t>(std::min<std::uint64_t>(size, 12));
  in.read(preamble, preamble_size);
  const auto [header_begin, header_len] = locate_header(preamble, static_cast<std::size_t>(size), path);
  std::string header(header_len, '\0');
  // The preamble may hold the first bytes of the header (a version 1 header starts at byte 10).
  const std::size_t in_preamble = std::min(preamble_size - header_begin, header_len);
  std::memcpy(header.data(), preamble + header_begin, in_preamble);
  in.read(header.data() + in_preamble, header_len - in_preamble);
  const std::size_t data_begin = header_begin + header_len;
  NpyArray out;
  const std::size_t count = parse_header(header, static_cast<std::size_t>(size) - data_begin, path, out);
  // The preamble may also hold the first data bytes (a tiny file whose header ends before byte 12).
  const std::size_t data_in_preamble = preamble_size - std::min(preamble_size, data_begin);
  if (count > 0) {
    auto* dest = static_cast<unsigned char*>(allocate(out, count, path));
    std::memcpy(dest, preamble + data_begin, data_in_preamble);
    in.read(dest + data_in_preamble, out.bytes() - data_in_preamble);
  }
  const InputFile file = in.finish();
  if (fingerprint) *fingerprint = file;
  return out;
}

}  // namespace xgrad::data

namespace xgrad::data {

NpyHeader read_npy_header(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) throw TaskError("npy: " + path + ": no such file");
  if (!fs::is_regular_file(status)) throw TaskError("npy: " + path + ": not a regular file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw TaskError("npy: " + path + ": cannot be opened: " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  const auto size = static_cast<std::size_t>(fs::file_size(path, ec));
  if (ec) throw TaskError("npy: " + path + ": cannot be read: " + ec.message());
  // The magic, version and length, then the header: at most kMaxNpyHeaderBytes more.
  auto read_at = [&](std::size_t offset, std::size_t n) {
    std::string bytes(n, '\0');
    std::size_t done = 0;
    while (done < n) {
      const ssize_t got = ::pread(fd, bytes.data() + done, n - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw TaskError("npy: " + path + ": cannot be read: " + std::strerror(errno));
      if (got == 0) throw TaskError("npy: " + path + ": changed size while being read");
      done += static_cast<std::size_t>(got);
    }
    return bytes;
  };
  const std::string preamble = read_at(0, std::min<std::size_t>(size, 12));
  const auto [header_begin, header_len] =
      locate_header(reinterpret_cast<const unsigned char*>(preamble.data()), size, path);
  const std::string header = read_at(header_begin, header_len);
  NpyArray array;
  NpyHeader out;
  out.count = parse_header(header, size - header_begin - header_len, path, array);
  out.shape = array.shape;
  out.descr = array.descr;
  out.itemsize = array.descr == "<i4" ? 4 : 8;
  return out;
}

}  // namespace xgrad::data
