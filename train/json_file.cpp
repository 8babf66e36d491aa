#include "train/json_file.h"

#include <array>
#include <fstream>

#include "common/repeated_keys.h"
#include "train/config.h"

namespace xgrad::train {

nlohmann::json parse_json(std::istream& in, const std::string& source) {
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
    if (text.size() > kMaxJsonBytes)
      throw ConfigError(source + ": longer than " + std::to_string(kMaxJsonBytes >> 20) +
                        " MiB, more than any JSON file xgrad reads; refused");
  }
  if (const auto nul = text.find('\0'); nul != std::string::npos)
    throw ConfigError(source + ": holds a NUL byte at offset " + std::to_string(nul) +
                      ", which no JSON file holds; refused");
  return json::parse(text, callback);
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw ConfigError(path.string() +
                      (std::filesystem::exists(path, ec) ? ": not a regular file; refused" : ": not found"));
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxJsonBytes)  // refused before it is read
    throw ConfigError(path.string() + ": longer than " + std::to_string(kMaxJsonBytes >> 20) +
                      " MiB, more than any JSON file xgrad reads; refused");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path.string() + ": cannot be opened for reading");
  return parse_json(in, path.string());
}

}  // namespace xgrad::train
