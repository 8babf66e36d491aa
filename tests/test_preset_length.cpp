// `xgrad experiment --preset length --quick` through the real executable (label preset_quick): the grid it promises
// (none, sqrt_dk, dk, ssmax at d_k 64, 2 seeds, evaluated at 8, 16, 32, 64 pairs), the figures of accuracy and largest
// attention weight against the number of keys carrying each scaling's mean over seeds of what the runs' summary.json
// recorded, and the findings table computed from them.
#include <array>
#include <cstdio>
#include <fstream>
#include <map>

#include <doctest/doctest.h>

#include "report/preset_report.h"
#include "tests/support/preset_run.h"
#include "tests/support/temp_dir.h"

using xgrad::testing::g3;
using xgrad::testing::TempDir;

TEST_CASE("preset length --quick: 4 scalings x 2 seeds, evaluated at 1x-8x the keys; figures and findings") {
  TempDir tmp("preset_length");
  const auto run = xgrad::testing::run_preset("length", tmp / "length");
  xgrad::testing::check_preset_run(run, "length", 8);
  // scale -> n_pairs -> (sum of accuracy, sum of max_prob_mean, runs)
  std::map<std::string, std::map<int, std::array<double, 3>>> per_point;
  for (const auto& r : run.sweep.at("runs")) {
    CHECK(r.at("config").at("kv_encoding") == "sum");
    CHECK(r.at("config").at("eval_n_pairs") == "8,16,32,64");
    CHECK(r.at("d_k") == 64);
    std::ifstream in(run.dir / r.at("dir").get<std::string>() / "summary.json");
    const nlohmann::json summary = nlohmann::json::parse(in);
    REQUIRE(summary.at("length_eval").size() == 4);
    for (const auto& e : summary.at("length_eval")) {
      auto& point = per_point[r.at("scale").get<std::string>()][e.at("value").get<int>()];
      point[0] += e.at("accuracy").get<double>();
      point[1] += e.at("max_prob_mean").get<double>();
      point[2] += 1;
    }
  }
  REQUIRE(per_point.size() == 4);
  const std::string accuracy = xgrad::testing::required_section(run.report, "length-accuracy");
  const std::string weight = xgrad::testing::required_section(run.report, "length-max-prob");
  const std::string findings = xgrad::testing::required_section(run.report, "length-findings");
  for (const auto& scale_points_entry : per_point) {
    const auto& scale = std::get<0>(scale_points_entry);
    const auto& points = std::get<1>(scale_points_entry);
    INFO(scale);
    CHECK(points.size() == 4);
    for (const auto& pairs_sums_entry : points) {
      const auto& pairs = std::get<0>(pairs_sums_entry);
      const auto& sums = std::get<1>(pairs_sums_entry);
      INFO("n_pairs " << pairs);
      CHECK(sums[2] == 2);
      CHECK(weight.find(g3(sums[1] / sums[2])) != std::string::npos);
    }
    // The findings table names the scaling with its trained -> longest largest weight (2 decimals).
    char row[96];
    std::snprintf(row, sizeof row, "%.2f → %.2f", points.at(8)[1] / 2, points.at(64)[1] / 2);
    CHECK(findings.find("| " + xgrad::report::markdown_text(scale, true) + " ") != std::string::npos);
    CHECK(findings.find(row) != std::string::npos);
  }
  // The scaled runs learn the task at the trained length (unscaled attention, saturated from step 0, may not), and
  // dk (scores / d_k, the flattest softmax) fades with more keys.
  for (const auto& [scale, points] : per_point)
    if (scale != "none") CHECK(points.at(8)[0] / 2 > 0.9);
  const auto& dk = per_point.at("dk");
  CHECK(dk.at(64)[1] / 2 < dk.at(8)[1] / 2 - 0.05);
  // The claim's verdict is given (which one, the seeds decide).
  const std::string claim = xgrad::report::preset_text("length.claim", {{"verdict", "@"}});
  CHECK(findings.find(claim.substr(0, claim.find('@'))) != std::string::npos);
  xgrad::testing::check_figure(run, "length_accuracy_vs_keys_dk64");
  xgrad::testing::check_figure(run, "length_max_prob_vs_keys_dk64");
}
