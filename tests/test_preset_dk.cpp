// `xgrad experiment --preset dk --quick` through the real executable (label preset_quick): the grid it promises, the
// preset recorded, and the usual report's final loss against d_k carrying each arm's mean over seeds of the final
// losses the runs wrote.
#include <cstdio>
#include <map>

#include <doctest/doctest.h>

#include "tests/support/preset_run.h"
#include "tests/support/temp_dir.h"

using xgrad::testing::TempDir;

TEST_CASE("preset dk --quick: d_k 16 and 256, both scalings, SGD and AdamW, 2 seeds; final loss against d_k") {
  TempDir tmp("preset_dk");
  const auto run = xgrad::testing::run_preset("dk", tmp / "dk");
  xgrad::testing::check_preset_run(run, "dk", 16);
  std::map<std::string, std::pair<double, int>> per_point;  // "scale optimizer d_k" -> (sum, n)
  for (const auto& r : run.sweep.at("runs")) {
    CHECK(r.at("config").at("steps") == 100);
    const std::string key = r.at("scale").get<std::string>() + " " + r.at("optimizer").get<std::string>() + " " +
                            std::to_string(r.at("d_k").get<int>());
    per_point[key].first += r.at("final_loss").get<double>();
    per_point[key].second += 1;
  }
  CHECK(per_point.size() == 8);
  const std::string section = xgrad::testing::required_section(run.report, "summary-figures");
  CHECK(section.find("| line \\ d_k | 16 | 256 |") != std::string::npos);
  for (const auto& key_sum_n_entry : per_point) {
    const auto& key = std::get<0>(key_sum_n_entry);
    const auto& sum_n = std::get<1>(key_sum_n_entry);
    INFO(key);
    CHECK(sum_n.second == 2);
    char mean[32];
    std::snprintf(mean, sizeof mean, "%.3g", sum_n.first / sum_n.second);
    CHECK(section.find(mean) != std::string::npos);
  }
  xgrad::testing::check_figure(run, "final_loss_vs_d_k");
}
