// Refusing a JSON object that repeats a key, while nlohmann::json parses it: JSON parsers differ on which of two
// equal keys wins, so such a file means different things to different readers.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace xgrad {

/// The keys of the objects open so far. Called from a nlohmann::json parser callback with every event.
class RepeatedKeys {
 public:
  /// The key `parsed` when `event` is a key its object already holds, else "".
  std::string repeated(nlohmann::json::parse_event_t event, const nlohmann::json& parsed) {
    using event_t = nlohmann::json::parse_event_t;
    if (event == event_t::object_start) keys_.emplace_back();
    if (event == event_t::object_end) keys_.pop_back();
    if (event == event_t::key && !keys_.back().insert(parsed.get<std::string>()).second)
      return parsed.get<std::string>();
    return "";
  }

 private:
  std::vector<std::set<std::string>> keys_;
};

}  // namespace xgrad
