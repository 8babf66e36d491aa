// `xgrad experiment --preset width --quick` through the real executable (label preset_quick): d_model = d_k 16 and
// 64 x AdamW at 3 lrs x {SP sqrt_dk, SP none, muP} x 2 seeds. The grid keeps only the diagonal and the three
// parametrizations; the section's loss-against-lr tables and best-lr table carry the numbers this test computes
// from the runs' own files.
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include <doctest/doctest.h>

#include "report/preset_report.h"
#include "report/tables.h"
#include "tests/support/preset_run.h"
#include "tests/support/temp_dir.h"

using xgrad::testing::g3;
using xgrad::testing::read_text;
using xgrad::testing::TempDir;

namespace {
std::string variant(const nlohmann::json& config) {
  return config.at("parametrization") == "mup" ? "muP (1/d_k)" : "SP " + config.at("scale").get<std::string>();
}
}  // namespace

TEST_CASE("preset width --quick: the diagonal d_model = d_k, three parametrizations, loss against lr, best lr") {
  TempDir tmp("preset_width");
  const auto run = xgrad::testing::run_preset("width", tmp / "width");
  xgrad::testing::check_preset_run(run, "width", 2 * 3 * 3 * 2);

  // (variant, width) -> lr -> (final losses, lr objectives by seed)
  std::map<std::pair<std::string, int>, std::map<double, std::pair<std::vector<double>, std::map<int, double>>>> cells;
  for (const auto& r : run.sweep.at("runs")) {
    const auto& config = r.at("config");
    INFO(r.at("name"));
    CHECK(config.at("d_model") == r.at("d_k"));
    CHECK(config.at("kv_encoding") == "sum");
    CHECK(config.at("mlp") == false);
    CHECK((config.at("parametrization") == "mup") == (config.at("scale") == "dk"));
    const nlohmann::json summary =
        nlohmann::json::parse(read_text(run.dir / "runs" / r.at("name").get<std::string>() / "summary.json"));
    auto& cell = cells[{variant(config), config.at("d_model").get<int>()}][config.at("lr").get<double>()];
    cell.first.push_back(summary.at("final_loss").get<double>());
    cell.second[config.at("seed").get<int>()] =
        std::min(summary.at("final_loss").get<double>(), summary.at("first_loss").get<double>());
  }
  REQUIRE(cells.size() == 6);
  const std::string section = xgrad::testing::required_section(run.report, "width");
  for (const auto& [key, by_lr] : cells) {
    const auto& name = std::get<0>(key);
    const auto& width = std::get<1>(key);
    INFO(name << " d_model " << width);
    // the loss-against-lr table: its row for this width holds the mean final loss at each lr
    const std::size_t figure = section.find("per width, " + name);
    REQUIRE(figure != std::string::npos);
    const std::size_t row =
        section.find("| " + xgrad::report::markdown_text("d_model=" + std::to_string(width), true) + " |", figure);
    REQUIRE(row != std::string::npos);
    const std::string line = section.substr(row, section.find('\n', row) - row);
    std::map<int, std::pair<double, double>> best_by_seed;  // seed -> (objective, lr)
    double best_mean = INFINITY, best_lr = 0;
    for (const auto& [lr, cell] : by_lr) {
      double sum = 0;
      for (double v : cell.first) sum += v;
      CHECK(line.find(g3(sum / cell.first.size())) != std::string::npos);
      double objective = 0;
      for (const auto& [seed, o] : cell.second) {
        objective += o / cell.second.size();
        if (!best_by_seed.count(seed) || o < best_by_seed[seed].first) best_by_seed[seed] = {o, lr};
      }
      if (objective < best_mean) {
        best_mean = objective;
        best_lr = lr;
      }
    }
    // the best-lr table: the lr of the lowest mean objective, "not decided" where the seeds' own best lrs differ
    std::set<double> seed_lrs;
    for (const auto& [seed, pair] : best_by_seed) seed_lrs.insert(pair.second);
    char cell[64];
    std::snprintf(cell, sizeof cell, "%g", best_lr);
    const std::string expected = "| " + xgrad::report::markdown_text(name, true) + " | " + std::to_string(width) +
                                 " | " + cell + (seed_lrs.size() == 1 ? " |" : " (not decided) |");
    CHECK(section.find(expected) != std::string::npos);
  }
  // one sentence per variant, and the claim's verdict
  for (const char* name : {"SP sqrt_dk", "SP none", "muP (1/d_k)"})
    CHECK(section.find("- **" + xgrad::report::markdown_text(name) + "**: ") != std::string::npos);
  std::size_t verdicts = 0;
  for (const char* key : {"width.claim_not_asked", "width.claim_no_spread", "width.claim_reproduced", "width.claim_tie",
                          "width.claim_not_reproduced"}) {
    const std::string claim = xgrad::report::preset_text(key, {{"mup", 1.0}, {"sp", 1.0}, {"missing", "@"}});
    verdicts += section.find(claim.substr(0, claim.find_first_of("@1"))) != std::string::npos ? 1 : 0;
  }
  CHECK(verdicts == 1);
  for (const char* figure :
       {"width_loss_vs_lr_sqrt_dk_sp", "width_loss_vs_lr_none_sp", "width_loss_vs_lr_dk_mup", "width_best_lr_vs_d_k"})
    xgrad::testing::check_figure(run, figure);
}
