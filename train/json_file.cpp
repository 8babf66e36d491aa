#include "train/json_file.h"

#include <array>
#include <fstream>

#include <fmt/format.h>

#include "common/repeated_keys.h"
#include "train/config.h"

namespace xgrad::train {

static std::string longer_than(std::size_t max_bytes) {
  const bool mib = max_bytes % (std::size_t(1) << 20) == 0;  // else KiB: the bounds are powers of two
  return fmt::format("longer than {} {}, more than xgrad reads of this file; refused", max_bytes >> (mib ? 20 : 10),
                     mib ? "MiB" : "KiB");
}

nlohmann::json parse_json(std::istream& in, const std::string& source, std::size_t max_bytes) {
  using json = nlohmann::json;
  RepeatedKeys keys;
  const auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      throw ConfigError(source + ": nests objects and arrays deeper than " + std::to_string(kMaxJsonDepth) +
                        " levels, more than any file xgrad reads; refused");
    const std::string repeated = keys.repeated(event, parsed);
    if (!repeated.empty())
      throw ConfigError(source + ": the key '" + repeated + "' appears twice in one object; keep one of them");
    return true;
  };
  // Read whole: parsing a stream ends at a NUL byte and would accept whatever follows it unread.
  std::string text;
  std::array<char, 1 << 16> chunk;
  while (in.read(chunk.data(), chunk.size()) || in.gcount() > 0) {
    text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_bytes) throw ConfigError(source + ": " + longer_than(max_bytes));
  }
  if (const auto nul = text.find('\0'); nul != std::string::npos)
    throw ConfigError(source + ": holds a NUL byte at offset " + std::to_string(nul) +
                      ", which no JSON file holds; refused");
  return json::parse(text, callback);
}

nlohmann::json read_json_file(const std::filesystem::path& path, std::size_t max_bytes) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw ConfigError(path.string() +
                      (std::filesystem::exists(path, ec) ? ": not a regular file; refused" : ": not found"));
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > max_bytes)  // refused before it is read
    throw ConfigError(path.string() + ": " + std::to_string(size) + " bytes, " + longer_than(max_bytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path.string() + ": cannot be opened for reading");
  return parse_json(in, path.string(), max_bytes);
}

}  // namespace xgrad::train
