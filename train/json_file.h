// Reading a JSON file a user may have handed over (config.json, a --config file, sweep.json, summary.json): with
// limits, so that a hostile file is refused, naming it, rather than crashing a reader or a printer of the value.
#pragma once

#include <cstddef>
#include <filesystem>
#include <istream>
#include <string>

#include <nlohmann/json.hpp>

namespace xgrad::train {

/// The deepest nesting of objects and arrays xgrad reads. Its own files nest at most 3 deep (config.json's
/// "environment" and "inputs"); 64 leaves room for hand-written files while keeping every recursive walk of the
/// value (printing it, comparing it) far from the stack's limit, which 100,000 levels overflow.
inline constexpr int kMaxJsonDepth = 64;

/// The largest JSON file xgrad reads unless told less (summary.json: kMaxRunJsonBytes, train/run_files.h): its own
/// are a few kB (a config.json with its environment, a summary.json); a sweep.json of 100,000 runs is about 20 MiB.
inline constexpr std::size_t kMaxJsonBytes = std::size_t(64) << 20;

/// Parses the JSON text of `in`, read from `source` (named in every error).
/// Throws ConfigError (the CLI exits 2) for nesting deeper than kMaxJsonDepth and for an object that repeats a key
/// (JSON parsers differ on which of the two wins, so the file means different things to different readers).
/// Throws nlohmann::json::parse_error, as nlohmann::json::parse does, for text that is not JSON, and ConfigError for
/// text longer than `max_bytes` (what /dev/zero or /dev/urandom in place of a file would give without end).
nlohmann::json parse_json(std::istream& in, const std::string& source, std::size_t max_bytes = kMaxJsonBytes);

/// parse_json of the file at `path` (a symbolic link is followed), named by its path in errors. Throws ConfigError
/// when `path` is not a regular file (a FIFO would block the reader until a writer came; a device would not end),
/// is larger than `max_bytes` (before reading it: parsed JSON takes up to 30 times its size in memory) or cannot be
/// opened, and as parse_json.
nlohmann::json read_json_file(const std::filesystem::path& path, std::size_t max_bytes = kMaxJsonBytes);

}  // namespace xgrad::train
