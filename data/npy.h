// NumPy .npy files of integers, read by a small parser of our own (the format:
// https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace xgrad::data {

/// An integer array from a .npy file, widened to int64, row-major.
struct NpyArray {
  std::vector<std::size_t> shape;
  std::vector<std::int64_t> values;
  std::string descr;  // the element type as the file spells it: "<i4" (int32) or "<i8" (int64)
};

/// Headers longer than this are refused (numpy itself refuses headers above 10000 bytes by default).
inline constexpr std::size_t kMaxNpyHeaderBytes = 1 << 20;

/// Parses a .npy image of `size` bytes at `data`; `source` names it in errors. Accepts exactly: the magic
/// "\x93NUMPY"; version 1.0 (2-byte header length), 2.0 or 3.0 (4-byte); a header of at most kMaxNpyHeaderBytes
/// that is a Python dict literal with the keys 'descr', 'fortran_order' and 'shape', each once, as numpy writes it
/// ({'descr': '<i8', 'fortran_order': False, 'shape': (3, 4), } padded with spaces and ending in a newline);
/// descr '<i4' or '<i8' (numpy's spelling of little-endian int32 and int64); fortran_order False; and exactly prod(shape) * itemsize bytes of data after the header. Throws TaskError
/// "npy: <source>: ..." naming what is wrong for anything else (big-endian, floats, Fortran order, object arrays,
/// truncated data, trailing bytes, ...), and never reads outside [data, data + size).
NpyArray parse_npy(const void* data, std::size_t size, const std::string& source);

/// Reads and parses the file at `path` (see parse_npy). Throws TaskError naming the path if it is missing, not a
/// regular file, unreadable or malformed.
NpyArray read_npy(const std::string& path);

}  // namespace xgrad::data
