// NumPy .npy files of integers, read by a small parser of our own (the format:
// https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "data/input_file.h"

namespace xgrad::data {

/// std::allocator, except that resize() leaves new elements uninitialised: an array about to be filled from a file
/// is not first written with zeros (for gigabytes, that pass costs as much as the read).
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
/// The elements of an array read from a file.
template <class T>
using NpyValues = std::vector<T, DefaultInitAllocator<T>>;

/// An integer array from a .npy file, row-major, in the file's own element type: int32 files stay int32 (4 bytes
/// per element in memory, as on disk).
struct NpyArray {
  std::vector<std::size_t> shape;
  NpyValues<std::int32_t> int32_values;  // the elements of a '<i4' array (int64_values is then empty)
  NpyValues<std::int64_t> int64_values;  // the elements of a '<i8' array (int32_values is then empty)
  std::string descr;                     // the element type as the file spells it: "<i4" (int32) or "<i8" (int64)

  /// The number of elements, prod(shape).
  std::size_t size() const { return int32_values.size() + int64_values.size(); }
  /// The bytes the elements take in memory.
  std::size_t bytes() const { return 4 * int32_values.size() + 8 * int64_values.size(); }
  /// Element i (i < size()), widened.
  std::int64_t operator[](std::size_t i) const { return int32_values.empty() ? int64_values[i] : int32_values[i]; }
};

/// What a .npy file's header says of its array, without its data.
struct NpyHeader {
  std::vector<std::size_t> shape;
  std::string descr;         ///< "<i4" or "<i8"
  std::size_t itemsize = 0;  ///< 4 or 8
  std::size_t count = 0;     ///< prod(shape)
  /// The bytes the elements take in memory (as on disk).
  std::size_t bytes() const { return count * itemsize; }
};

/// "28.0 GiB": a size in bytes as messages show it (GiB, one decimal).
std::string gib_text(double bytes);

/// "[3, 4] int32": an array's shape and element type as messages show them.
std::string npy_text(const std::vector<std::size_t>& shape, const std::string& descr);

/// Headers longer than this are refused (numpy itself refuses headers above 10000 bytes by default).
inline constexpr std::size_t kMaxNpyHeaderBytes = 1 << 20;

/// Parses a .npy image of `size` bytes at `data`; `source` names it in errors. Accepts exactly: the magic
/// "\x93NUMPY"; version 1.0 (2-byte header length), 2.0 or 3.0 (4-byte); a header of at most kMaxNpyHeaderBytes
/// that is a Python dict literal with the keys 'descr', 'fortran_order' and 'shape', each once, as numpy writes it
/// ({'descr': '<i8', 'fortran_order': False, 'shape': (3, 4), } padded with spaces and ending in a newline);
/// descr '<i4' or '<i8' (numpy's spelling of little-endian int32 and int64); fortran_order False; and exactly
/// prod(shape) * itemsize bytes of data after the header. Throws TaskError "npy: <source>: ..." naming what is wrong
/// for anything else (big-endian, floats, Fortran order, object arrays, truncated data, trailing bytes, ...), and never
/// reads outside [data, data + size).
NpyArray parse_npy(const void* data, std::size_t size, const std::string& source);

/// Reads and parses the file at `path` (see parse_npy) in one pass: the header, then the data straight into the
/// array, hashed as it is read. `setting` names the setting the file belongs to in `fingerprint` (when not null),
/// which receives the file's path, size and content hash. Throws TaskError naming the path if it is missing, not a
/// regular file, unreadable or malformed.
NpyArray read_npy(const std::string& path, const std::string& setting = "", InputFile* fingerprint = nullptr);

/// The header of the file at `path` alone (its first bytes), checked as read_npy checks it, the file's size
/// included: what reading the file would allocate, known before reading it. Throws TaskError as read_npy does.
NpyHeader read_npy_header(const std::string& path);

}  // namespace xgrad::data
