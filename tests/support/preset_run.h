// Running an experiment preset through the real xgrad executable (XGRAD_BIN), for the preset_quick tests: one
// quick preset's sweep directory, its sweep.json, report.md and console output, and the parts of report.md a
// preset's test checks against numbers it computes from the runs itself.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "report/tables.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "tests/support/run_files.h"
#include "tests/support/temp_dir.h"

namespace xgrad::testing {

struct PresetRun {
  std::filesystem::path dir;  // the sweep directory (--out)
  int exit_code = -1;
  std::string output;    // stdout and stderr of the command
  nlohmann::json sweep;  // sweep.json
  std::string report;    // report.md
};

/// `xgrad experiment --preset NAME --quick --out DIR <extra>` (extra: words split at spaces), into `dir`.
inline PresetRun run_preset(const std::string& name, const std::filesystem::path& dir, const std::string& extra = "",
                            bool quick = true) {
  PresetRun run;
  run.dir = dir;
  std::vector<std::string> args{"experiment", "--preset", name};
  if (quick) args.push_back("--quick");
  args.insert(args.end(), {"--out", dir.string()});
  for (const std::string& word : words(extra)) args.push_back(word);
  const ProcessResult result = run_xgrad(args, merged_output());
  run.exit_code = result.exit_code;
  run.output = result.out;
  std::ifstream sweep(dir / "sweep.json");
  if (sweep) run.sweep = nlohmann::json::parse(sweep, nullptr, false);
  run.report = read_text(dir / "report.md");
  return run;
}

/// The scalings presets lr, collapse and length run (named in their grids): those registered before qk_norm, in
/// registry order.
inline const std::vector<std::string> kPresetScalings{"none",    "sqrt_dk", "dk",    "qk_layernorm",
                                                      "learned", "softcap", "ssmax", "sigma_reparam"};

/// README.md and docs/*.md concatenated into dir/docs.txt, for the presets that train on text (--text): English
/// prose and tables, over 100 kB. Returns its path.
inline std::string write_docs_text(const std::filesystem::path& dir) {
  const std::filesystem::path root = XGRAD_SOURCE_DIR;
  std::string text = read_text(root / "README.md");
  for (const auto& entry : std::filesystem::directory_iterator(root / "docs"))
    if (entry.path().extension() == ".md") text += read_text(entry.path());
  const std::string path = (dir / "docs.txt").string();
  std::ofstream(path) << text;
  REQUIRE(text.size() > 50000);
  return path;
}

/// `v` as report.md prints a number: 3 significant digits (%.3g).
inline std::string g3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

/// The line of `text` that starts with `prefix`, "" if none.
inline std::string line_starting(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) return line;
  return "";
}

/// The section of report.md that starts at <a id="anchor"> and ends before the next level-2 heading's anchor or
/// heading; "" when the anchor is absent.
inline std::string report_section(const std::string& report, const std::string& anchor) {
  const std::size_t start = report.find("<a id=\"" + anchor + "\"></a>");
  if (start == std::string::npos) return "";
  std::size_t end = report.find("\n## ", report.find("\n## ", start) + 1);
  const std::size_t next_anchor = report.find("<a id=\"", start + 1);
  if (next_anchor != std::string::npos && next_anchor < end) end = next_anchor;
  return report.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

/// report_section, failing the test when the section is absent or empty.
inline std::string required_section(const std::string& report, const std::string& anchor) {
  std::string section = report_section(report, anchor);
  REQUIRE_MESSAGE(!section.empty(), "report.md has no section " << anchor);
  return section;
}

/// The figure plots/<name> exists as a gnuplot script and, when gnuplot is installed, as PNG and SVG referenced by
/// the report.
inline void check_figure(const PresetRun& run, const std::string& name) {
  INFO("figure " << name);
  CHECK(std::filesystem::exists(run.dir / "plots" / (name + ".gp")));
  if (on_path("gnuplot")) {
    CHECK(std::filesystem::exists(run.dir / "plots" / (name + ".png")));
    CHECK(std::filesystem::exists(run.dir / "plots" / (name + ".svg")));
    CHECK(run.report.find("](plots/" + name + ".png)") != std::string::npos);
  }
}

/// The checks every quick preset passes: exit 0; sweep.json records the preset and the quick grid; every run is
/// complete or diverged; the console names the planned run count; report.md names the preset; and `xgrad compare
/// DIR --out DIR2` writes the same report (the preset's sections again, from sweep.json's record).
inline void check_preset_run(const PresetRun& run, const std::string& name, std::size_t planned_runs) {
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  REQUIRE(run.sweep.is_object());
  CHECK(run.sweep.at("preset") == nlohmann::json{{"name", name}, {"quick", true}});
  CHECK(run.sweep.at("runs").size() == planned_runs);
  for (const auto& r : run.sweep.at("runs")) CHECK(r.at("status").get<std::string>() == "complete");
  CHECK(run.output.find("experiment --preset " + name + " --quick: " + std::to_string(planned_runs) + " runs into") !=
        std::string::npos);
  CHECK(run.report.find("Preset: " + report::markdown_text(name) + " (its --quick grid)") != std::string::npos);
  const std::filesystem::path again = run.dir.string() + "-compare";
  REQUIRE(run_xgrad({"compare", run.dir.string(), "--out", again.string()}).exit_code == 0);
  // The same text but for the run paths and the link to the sweep's explain.html, which report.md shows relative to
  // its own directory.
  const std::string link = "[explain/explain.html](explain/explain.html)";
  const std::string moved = "[../" + run.dir.filename().string() + "/explain/explain.html](../" +
                            run.dir.filename().string() + "/explain/explain.html)";
  CHECK(run.report.find(link) != std::string::npos);
  std::string from_elsewhere = read_text(again / "report.md");
  REQUIRE(from_elsewhere.find(moved) != std::string::npos);
  from_elsewhere.replace(from_elsewhere.find(moved), moved.size(), link);
  auto preset_part = [](const std::string& report) { return report.substr(0, report.find("## Findings")); };
  CHECK(preset_part(from_elsewhere) == preset_part(run.report));
}

}  // namespace xgrad::testing
