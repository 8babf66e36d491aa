// Reading what a run wrote, for tests that compare runs.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace xgrad::testing {

/// The whole file as bytes ("" if it cannot be read).
inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The JSON document in the file at `path` (throws nlohmann::json::parse_error if it is not one).
inline nlohmann::json read_json(const std::filesystem::path& path) { return nlohmann::json::parse(read_text(path)); }

/// The lines of `run_dir`/metrics.csv (header first) without the step_ms column (wall-clock time, the one column
/// two identical runs do not share). Fails the test if the header has no step_ms column.
inline std::vector<std::string> metrics_without_timing(const std::filesystem::path& run_dir) {
  std::ifstream in(run_dir / "metrics.csv");
  std::string line;
  std::vector<std::string> out;
  long timing = -1;
  bool header = true;
  while (std::getline(in, line)) {
    std::stringstream cells(line);
    std::string cell, kept;
    for (long i = 0; std::getline(cells, cell, ','); ++i) {
      if (header && cell == "step_ms") timing = i;
      if (i == timing) continue;
      if (!kept.empty() || i > (timing == 0 ? 1 : 0)) kept += ',';
      kept += cell;
    }
    if (header) REQUIRE_MESSAGE(timing >= 0, (run_dir / "metrics.csv").string() << " has no step_ms column");
    header = false;
    out.push_back(kept);
  }
  return out;
}

}  // namespace xgrad::testing
