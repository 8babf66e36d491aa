#include "train/json_file.h"

#include <set>
#include <vector>

#include "train/config.h"

namespace xgrad::train {

nlohmann::json parse_json(std::istream& in, const std::string& source) {
  using json = nlohmann::json;
  std::vector<std::set<std::string>> keys;  // the keys seen so far in each open object
  const auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= kMaxJsonDepth)
          throw ConfigError(source + ": nests objects and arrays deeper than " + std::to_string(kMaxJsonDepth) +
                            " levels, more than any file xgrad reads; refused");
        if (event == json::parse_event_t::object_start) keys.emplace_back();
        break;
      case json::parse_event_t::key:
        if (!keys.back().insert(parsed.get<std::string>()).second)
          throw ConfigError(source + ": the key '" + parsed.get<std::string>() +
                            "' appears twice in one object; keep one of them");
        break;
      case json::parse_event_t::object_end:
        keys.pop_back();
        break;
      default:
        break;
    }
    return true;
  };
  return json::parse(in, callback);
}

}  // namespace xgrad::train
