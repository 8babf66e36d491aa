// Reading a JSON file a user may have handed over (config.json, a --config file, sweep.json, summary.json): with
// limits, so that a hostile file is refused, naming it, rather than crashing a reader or a printer of the value.
#pragma once

#include <istream>
#include <string>

#include <nlohmann/json.hpp>

namespace xgrad::train {

/// The deepest nesting of objects and arrays xgrad reads. Its own files nest at most 3 deep (config.json's
/// "environment" and "inputs"); 64 leaves room for hand-written files while keeping every recursive walk of the
/// value (printing it, comparing it) far from the stack's limit, which 100,000 levels overflow.
inline constexpr int kMaxJsonDepth = 64;

/// Parses the JSON text of `in`, read from `source` (named in every error).
/// Throws ConfigError (the CLI exits 2) for nesting deeper than kMaxJsonDepth and for an object that repeats a key
/// (JSON parsers differ on which of the two wins, so the file means different things to different readers).
/// Throws nlohmann::json::parse_error, as nlohmann::json::parse does, for text that is not JSON.
nlohmann::json parse_json(std::istream& in, const std::string& source);

}  // namespace xgrad::train
