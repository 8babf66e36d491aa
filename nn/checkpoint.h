// Checkpoints in the safetensors format (https://github.com/huggingface/safetensors): named float32 tensors and a
// string-to-string metadata map, in a file that numpy, PyTorch and the safetensors library read as they are.
//
// Layout: 8 bytes, the header length N as a little-endian unsigned 64-bit integer; N bytes of UTF-8 JSON, an object
// mapping each tensor name to {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}, plus an
// optional "__metadata__" object of string values; then the data: every tensor's elements, row-major,
// little-endian, at [begin, end) counted from the first byte after the header. xgrad writes the header padded with
// spaces to a multiple of 8 bytes (so the data is 8-byte aligned) and the tensors back to back in the order given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <xtensor/xarray.hpp>

#include "autograd/tensor.h"

namespace xgrad::nn {

/// Thrown for a checkpoint that cannot be read or written. The message starts with "safetensors:" and names the file
/// (or buffer), and for a bad tensor its name, the value found and what was expected.
class CheckpointError : public Error {
 public:
  using Error::Error;
};

/// Named float32 tensors (in file order) and metadata.
struct Checkpoint {
  std::vector<std::pair<std::string, xt::xarray<float>>> tensors;
  std::map<std::string, std::string> metadata;

  /// Appends a tensor. Throws CheckpointError on an empty name, the reserved name "__metadata__", or a name already
  /// present.
  void add(const std::string& name, xt::xarray<float> value);
  /// The tensor called `name`, or nullptr.
  const xt::xarray<float>* find(const std::string& name) const;
  /// The metadata value of `key`; throws CheckpointError naming the key if absent.
  const std::string& meta(const std::string& key) const;
};

/// Headers longer than this are refused without being read (a real header of a few thousand tensors is well
/// under a megabyte; the limit stops a corrupt length from allocating gigabytes).
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100ull * 1024 * 1024;

/// The file's bytes for `checkpoint`.
std::string to_safetensors(const Checkpoint& checkpoint);

/// Parses a safetensors image of `size` bytes at `data`. `source` names it in error messages. Throws
/// CheckpointError, without reading outside [data, data + size), for: fewer than 8 bytes; a header length above
/// kMaxSafetensorsHeaderBytes or past the end; a header that is not a JSON object (or starts with anything but
/// '{', nests deeper than the format does, or repeats a key); a "__metadata__" that is not an object of strings;
/// an entry without exactly dtype, shape and data_offsets; a dtype other than "F32"; a shape that is not a list of
/// whole numbers or whose element count overflows; data_offsets that are not two whole numbers begin <= end inside
/// the data, or whose length is not 4 x the element count; tensors that overlap, or bytes of the data that belong
/// to no tensor (the format forbids holes).
Checkpoint from_safetensors(const void* data, std::size_t size, const std::string& source);

/// Writes `checkpoint` to `path` atomically: a temporary file in the same directory, fsync, rename over `path`,
/// fsync of the directory. A crash at any point leaves either the old file or the new one, never a mix.
/// Throws CheckpointError naming the path and the system error.
void save_checkpoint(const std::string& path, const Checkpoint& checkpoint);

/// Reads and parses `path` (see from_safetensors). Throws CheckpointError naming the path if it is missing, not a
/// regular file, unreadable or malformed.
Checkpoint load_checkpoint(const std::string& path);

/// Writes `bytes` to `path` atomically, as save_checkpoint does (also used for config.json and summary.json).
/// Throws CheckpointError naming the path and the system error (without the "safetensors:" prefix).
void write_file_atomically(const std::string& path, const std::string& bytes);

}  // namespace xgrad::nn
