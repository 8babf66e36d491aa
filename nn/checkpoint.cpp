#include "nn/checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "common/repeated_keys.h"
#include "platform/atomic_file.h"

namespace xgrad::nn {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; this reader copies it as is and needs a little-endian host");

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kMetadataKey = "__metadata__";
constexpr std::size_t kMaxDims = 32;

// A tensor's header entry, checked against the data size but not yet copied.
struct Entry {
  std::string name;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0, end = 0;
};

class Parser {
 public:
  Parser(const unsigned char* bytes, std::size_t size, std::string source)
      : bytes_(bytes), size_(size), source_(std::move(source)) {}

  Checkpoint parse() {
    if (size_ < 8) throw fail("the file is " + std::to_string(size_) + " bytes, shorter than the 8-byte header length");
    std::uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(bytes_[i]) << (8 * i);
    if (n > kMaxSafetensorsHeaderBytes)
      throw fail("header length " + std::to_string(n) + " exceeds the limit of " +
                 std::to_string(kMaxSafetensorsHeaderBytes) + " bytes");
    if (n > size_ - 8)
      throw fail("header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(size_ - 8) +
                 " bytes follow the length)");
    if (n == 0 || bytes_[8] != '{') throw fail("the header does not start with '{'");
    const json header = parse_header(reinterpret_cast<const char*>(bytes_ + 8), static_cast<std::size_t>(n));
    data_ = bytes_ + 8 + n;
    data_size_ = size_ - 8 - static_cast<std::size_t>(n);

    Checkpoint checkpoint;
    std::vector<Entry> entries;
    for (const auto& [name, info] : header.items()) {
      if (name == kMetadataKey)
        checkpoint.metadata = metadata(info);
      else
        entries.push_back(entry(name, info));
    }
    check_coverage(entries);
    for (const Entry& e : entries) {
      xt::xarray<float> value = xt::xarray<float>::from_shape(std::vector<std::size_t>(e.shape.begin(), e.shape.end()));
      if (e.end > e.begin) std::memcpy(value.data(), data_ + e.begin, static_cast<std::size_t>(e.end - e.begin));
      checkpoint.tensors.emplace_back(e.name, std::move(value));
    }
    return checkpoint;
  }

 private:
  CheckpointError fail(const std::string& what) const {
    return CheckpointError("safetensors: " + source_ + ": " + what);
  }

  // A valid header is an object of objects holding one array each: anything deeper is refused while parsing, so a
  // hostile header cannot build a deep tree. Repeated keys are refused too (JSON parsers differ on which one wins).
  json parse_header(const char* text, std::size_t n) const {
    RepeatedKeys keys;
    const auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
      if (event == json::parse_event_t::object_start && depth > 1)
        throw fail("the header nests objects deeper than a safetensors header does");
      if (event == json::parse_event_t::array_start && depth > 2)
        throw fail("the header nests arrays deeper than a safetensors header does");
      const std::string repeated = keys.repeated(event, parsed);
      if (!repeated.empty()) throw fail("the header repeats the key '" + repeated + "'");
      return true;
    };
    try {
      return json::parse(text, text + n, callback);
    } catch (const json::exception& e) {
      throw fail(std::string("the header is not valid JSON: ") + e.what());
    }
  }

  std::map<std::string, std::string> metadata(const json& info) const {
    if (!info.is_object()) throw fail("__metadata__ is not an object of strings");
    std::map<std::string, std::string> out;
    for (const auto& [key, value] : info.items()) {
      if (!value.is_string()) throw fail("__metadata__ value of '" + key + "' is not a string");
      out[key] = value.get<std::string>();
    }
    return out;
  }

  static bool whole_number(const json& v) { return v.is_number_unsigned(); }

  Entry entry(const std::string& name, const json& info) const {
    const std::string tensor = "tensor '" + name + "'";
    if (name.empty()) throw fail("a tensor has an empty name");
    if (!info.is_object()) throw fail(tensor + ": its entry is not an object");
    for (const auto& [key, value] : info.items())
      if (key != "dtype" && key != "shape" && key != "data_offsets")
        throw fail(tensor + ": unknown field '" + key + "' (allowed: dtype, shape, data_offsets)");
    for (const char* key : {"dtype", "shape", "data_offsets"})
      if (!info.contains(key)) throw fail(tensor + ": no '" + key + "' field");

    const json& dtype = info.at("dtype");
    if (!dtype.is_string()) throw fail(tensor + ": dtype is not a string");
    if (dtype.get<std::string>() != "F32")
      throw fail(tensor + " has dtype '" + dtype.get<std::string>() + "'; xgrad reads only F32 (float32)");

    Entry e;
    e.name = name;
    const json& shape = info.at("shape");
    if (!shape.is_array()) throw fail(tensor + ": shape is not a list");
    if (shape.size() > kMaxDims)
      throw fail(tensor + ": shape has " + std::to_string(shape.size()) + " dimensions (at most " +
                 std::to_string(kMaxDims) + ")");
    std::uint64_t numel = 1;
    for (const json& d : shape) {
      if (!whole_number(d))
        throw fail(tensor + ": shape " + shape.dump() + " holds something other than whole numbers");
      const auto dim = d.get<std::uint64_t>();
      if (dim != 0 && numel > (UINT64_MAX / 4) / dim)
        throw fail(tensor + ": shape " + shape.dump() + " has more elements than a file can hold");
      numel *= dim;
      e.shape.push_back(dim);
    }

    const json& offsets = info.at("data_offsets");
    if (!offsets.is_array() || offsets.size() != 2 || !whole_number(offsets[0]) || !whole_number(offsets[1]))
      throw fail(tensor + ": data_offsets " + offsets.dump() + " is not a pair of whole numbers [begin, end]");
    e.begin = offsets[0].get<std::uint64_t>();
    e.end = offsets[1].get<std::uint64_t>();
    if (e.begin > e.end || e.end > data_size_)
      throw fail(tensor + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                 "] lie outside the data (" + std::to_string(data_size_) + " bytes)");
    if (e.end - e.begin != 4 * numel)
      throw fail(tensor + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] hold " +
                 std::to_string(e.end - e.begin) + " bytes, but F32 shape " +
                 shape_str(shape_t(e.shape.begin(), e.shape.end())) + " needs " + std::to_string(4 * numel));
    return e;
  }

  // Sorted by offset, the tensors must tile the data exactly: each begins where the previous one ends.
  void check_coverage(std::vector<Entry>& entries) const {
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
    std::uint64_t pos = 0;
    const Entry* previous = nullptr;
    for (const Entry& e : entries) {
      if (e.begin < pos)
        throw fail("tensors '" + previous->name + "' and '" + e.name + "' overlap (bytes " + std::to_string(e.begin) +
                   " to " + std::to_string(pos) + ")");
      if (e.begin > pos)
        throw fail("bytes [" + std::to_string(pos) + ", " + std::to_string(e.begin) +
                   ") of the data belong to no tensor");
      pos = e.end;
      previous = &e;
    }
    if (pos != data_size_)
      throw fail("bytes [" + std::to_string(pos) + ", " + std::to_string(data_size_) +
                 ") of the data belong to no tensor");
  }

  const unsigned char* bytes_;
  std::size_t size_;
  std::string source_;
  const unsigned char* data_ = nullptr;
  std::size_t data_size_ = 0;
};

std::string system_error(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

void Checkpoint::add(const std::string& name, xt::xarray<float> value) {
  if (name.empty() || name == kMetadataKey)
    throw CheckpointError("safetensors: a tensor cannot be named '" + name + "'");
  if (find(name)) throw CheckpointError("safetensors: tensor '" + name + "' added twice");
  tensors.emplace_back(name, std::move(value));
}

const xt::xarray<float>* Checkpoint::find(const std::string& name) const {
  for (const auto& [n, value] : tensors)
    if (n == name) return &value;
  return nullptr;
}

const std::string& Checkpoint::meta(const std::string& key) const {
  const auto it = metadata.find(key);
  if (it == metadata.end()) throw CheckpointError("safetensors: the metadata has no '" + key + "' entry");
  return it->second;
}

std::string to_safetensors(const Checkpoint& checkpoint) {
  json header = json::object();
  std::uint64_t offset = 0;
  for (const auto& [name, value] : checkpoint.tensors) {
    const std::uint64_t bytes = 4 * static_cast<std::uint64_t>(value.size());
    header[name] = {{"dtype", "F32"},
                    {"shape", std::vector<std::size_t>(value.shape().begin(), value.shape().end())},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!checkpoint.metadata.empty()) header[kMetadataKey] = checkpoint.metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {
    throw CheckpointError(std::string("safetensors: cannot write a name or metadata value: ") + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // 8 + header length is then a multiple of 8

  std::string out;
  out.reserve(8 + text.size() + offset);
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += text;
  for (const auto& [name, value] : checkpoint.tensors)
    out.append(reinterpret_cast<const char*>(value.data()), 4 * value.size());
  return out;
}

Checkpoint from_safetensors(const void* data, std::size_t size, const std::string& source) {
  return Parser(static_cast<const unsigned char*>(data), size, source).parse();
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  try {
    platform::write_file_atomically(path, bytes);
  } catch (const std::runtime_error& e) {
    throw CheckpointError(e.what());
  }
}

void save_checkpoint(const std::string& path, const Checkpoint& checkpoint) {
  const std::string bytes = to_safetensors(checkpoint);
  try {
    write_file_atomically(path, bytes);
  } catch (const CheckpointError& e) {
    throw CheckpointError(std::string("safetensors: ") + e.what());
  }
}

Checkpoint load_checkpoint(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) throw CheckpointError("safetensors: " + path + ": no such file");
  if (!fs::is_regular_file(status)) throw CheckpointError("safetensors: " + path + ": not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError("safetensors: " + system_error("cannot open " + path));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw CheckpointError("safetensors: " + system_error("cannot read " + path));
  return from_safetensors(bytes.data(), bytes.size(), path);
}

}  // namespace xgrad::nn
