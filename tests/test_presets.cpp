// The experiment-preset machinery (train/cli/presets/preset.h, train/report/preset_report.h): `xgrad experiment
// --help` lists the registered presets, an unknown one is refused naming them, flags override a preset's grid, and a
// preset's report sections and figures reach report.md with the numbers its function computed from the runs.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "common/registry.h"
#include "tests/support/preset_run.h"
#include "tests/support/temp_dir.h"
#include "train/report/compare.h"
#include "train/report/preset_report.h"

using namespace xgrad;
using namespace xgrad::train;
using xgrad::testing::read_text;
using xgrad::testing::TempDir;
namespace fs = std::filesystem;

namespace {

std::string output_of(const std::string& args, int* exit_code) {
  TempDir tmp("presets_output");
  const std::string log = (tmp / "out.log").string();
  const int status = std::system((std::string(XGRAD_BIN) + " " + args + " >" + log + " 2>&1").c_str());
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return read_text(log);
}

std::string g3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// A preset report registered by this test alone: one figure of each scaling's arm mean final loss against d_k and
// one sentence counting the arms, so the test can check what reaches report.md against sweep.json's numbers.
std::vector<PresetSection> api_test_sections(const PresetInput& in) {
  PresetSection s;
  s.anchor = "api-test";
  s.title = "API test section";
  SummaryFigure f;
  f.name = "api_test_final_loss";
  f.title = "Final loss per scaling";
  f.caption = "mean over seeds";
  f.x_label = "d_k";
  f.y_label = "final loss";
  for (const ArmStats& arm : in.comparison.arms) {
    SummaryLine line;
    line.label = arm.scale();
    line.scale = arm.scale();
    SummaryPoint p;
    p.x = static_cast<double>(arm.d_k());
    p.y = arm.final_loss.mean;
    p.n = arm.kept.size();
    line.points.push_back(p);
    f.lines.push_back(line);
  }
  s.figures.push_back(f);
  s.markdown = "These runs hold " + std::to_string(in.comparison.arms.size()) + " arms" +
               (in.quick ? " (quick grid)" : "") + ".\n";
  return {s};
}
const Registration<PresetReport> api_test_registration{PresetReport{"api_test", 100, api_test_sections}};

}  // namespace

TEST_CASE("experiment --help lists every preset with its run counts; an unknown preset is refused naming them") {
  int code = -1;
  const std::string help = output_of("experiment --help", &code);
  CHECK(code == 0);
  CHECK(help.find("--preset") != std::string::npos);
  CHECK(help.find("--quick") != std::string::npos);
  CHECK(help.find("Presets (train/cli/presets/") != std::string::npos);
  CHECK(help.find("  dk ") != std::string::npos);
  CHECK(help.find("(72 / 16 runs)") != std::string::npos);  // dk: 4 d_k x 2 scales x 3 arms x 3 seeds; quick 2x2x2x2

  const std::string refused = output_of("experiment --preset bogus --out /nonexistent/x", &code);
  CHECK(code == 2);
  CHECK(refused.find("--preset: 'bogus' is not a preset (allowed: dk") != std::string::npos);
}

TEST_CASE("flags given with --preset override its grid; sweep.json records the preset") {
  TempDir tmp("presets_override");
  const auto ok = xgrad::testing::run_preset("dk", tmp / "sweep2", "--seeds 0 --steps 12 --d-k 16");
  INFO(ok.output);
  REQUIRE(ok.exit_code == 0);
  CHECK(ok.sweep.at("preset") == nlohmann::json{{"name", "dk"}, {"quick", true}});
  REQUIRE(ok.sweep.at("runs").size() == 4);  // 2 scales x 2 quick arms x seed 0 x d_k 16
  for (const auto& r : ok.sweep.at("runs")) {
    CHECK(r.at("config").at("steps") == 12);
    CHECK(r.at("d_k") == 16);
    CHECK(r.at("seed") == 0);
  }
}

TEST_CASE("a preset's sections and figures reach report.md with the numbers its function computed") {
  TempDir tmp("presets_api");
  const fs::path dir = tmp / "sweep";
  const std::string sweep = std::string(XGRAD_BIN) + " sweep --out " + dir.string() +
                            " --scale sqrt_dk,none --d-k 16 --seeds 0,1 --arms adamw@0.003 --steps 20 --d-model 16 "
                            "--print-every 1000 >/dev/null 2>&1";
  REQUIRE(std::system(sweep.c_str()) == 0);
  // What `xgrad experiment --preset api_test --quick` would have recorded.
  nlohmann::json index = nlohmann::json::parse(read_text(dir / "sweep.json"));
  index["preset"] = {{"name", "api_test"}, {"quick", true}};
  std::ofstream(dir / "sweep.json") << index.dump(2);

  CompareOptions options;
  options.inputs = {dir.string()};
  std::ostringstream out;
  REQUIRE(run_compare(options, out) == 4);
  const std::string report = read_text(dir / "report.md");
  const std::string section = xgrad::testing::report_section(report, "api-test");
  INFO(report);
  REQUIRE(!section.empty());
  CHECK(section.find("## API test section") != std::string::npos);
  CHECK(section.find("These runs hold 2 arms (quick grid).") != std::string::npos);
  CHECK(report.find("Preset: `api_test` (its --quick grid)") < report.find("## Findings"));
  CHECK(fs::exists(dir / "plots" / "api_test_final_loss.gp"));
  // Each scaling's cell is the mean of its seeds' final losses, as sweep.json has them.
  for (const std::string scale : {"sqrt_dk", "none"}) {
    double sum = 0;
    int n = 0;
    for (const auto& r : index.at("runs"))
      if (r.at("scale") == scale) {
        sum += r.at("final_loss").get<double>();
        ++n;
      }
    REQUIRE(n == 2);
    CHECK(section.find("| " + scale + " | " + g3(sum / n)) != std::string::npos);
  }

  // A preset this build does not know: the usual report, with a note saying so.
  index["preset"] = {{"name", "not_here"}, {"quick", false}};
  std::ofstream(dir / "sweep.json") << index.dump(2);
  options.plots = false;
  run_compare(options, out);
  CHECK(read_text(dir / "report.md").find("preset 'not_here' is not registered in this build") != std::string::npos);
}
