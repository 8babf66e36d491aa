#include "train/json_file.h"

#include <iterator>

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
  const std::string text(std::istreambuf_iterator<char>(in), {});
  if (const auto nul = text.find('\0'); nul != std::string::npos)
    throw ConfigError(source + ": holds a NUL byte at offset " + std::to_string(nul) +
                      ", which no JSON file holds; refused");
  return json::parse(text, callback);
}

}  // namespace xgrad::train
