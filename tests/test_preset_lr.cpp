// `xgrad experiment --preset lr --quick` through the real executable (label preset_quick): the 8 scalings it names
// x 4 lrs of AdamW and of SGD x 2 seeds at d_k 64. Its three sections and their figures exist, and their numbers are
// the ones this test computes from the runs' own files (summary.json): each scaling's mean final loss per lr, its best
// lr by the Wortsman objective, the highest lr at which no seed diverged and the highest that learned.
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include <doctest/doctest.h>

#include "report/preset_report.h"
#include "report/tables.h"
#include "tests/support/preset_run.h"
#include "tests/support/temp_dir.h"
#include "train/run_files.h"

using xgrad::testing::g3;
using xgrad::testing::line_starting;
using xgrad::testing::read_text;
using xgrad::testing::TempDir;

namespace {

struct Seeds {
  std::vector<double> kept_final;  // final losses of the runs that did not diverge
  std::vector<double> objective;   // min(final, first) per run; a diverged run counts as its first loss
  std::size_t diverged = 0;
  std::size_t n = 0;
};

// (optimizer, scale) -> lr -> the seeds.
using Curves = std::map<std::pair<std::string, std::string>, std::map<double, Seeds>>;

// The seeds of every arm from each run's summary.json; compare counts a run as diverged when it says so or its
// final loss blew up (run_files.h). `chance`: the runs' chance loss.
Curves read_curves(const xgrad::testing::PresetRun& run, double& chance) {
  Curves curves;
  for (const auto& r : run.sweep.at("runs")) {
    CHECK(r.at("config").at("kv_encoding") == "sum");
    CHECK(r.at("d_k") == 64);
    const nlohmann::json summary =
        nlohmann::json::parse(read_text(run.dir / r.at("dir").get<std::string>() / "summary.json"));
    const double first = summary.at("first_loss").get<double>();
    chance = summary.at("chance_loss").get<double>();
    const bool diverged = summary.at("diverged").get<bool>() ||
                          (summary.at("final_loss").is_number() &&
                           xgrad::train::loss_blew_up(first, summary.at("final_loss").get<double>()));
    Seeds& s =
        curves[{r.at("optimizer").get<std::string>(), r.at("scale").get<std::string>()}][r.at("lr").get<double>()];
    ++s.n;
    if (diverged) {
      ++s.diverged;
      s.objective.push_back(first);
    } else {
      const double final_loss = summary.at("final_loss").get<double>();
      s.kept_final.push_back(final_loss);
      s.objective.push_back(std::min(final_loss, first));
    }
  }
  return curves;
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum / v.size();
}

// What the sensitivity table says of one arm: the best lr by the Wortsman objective and its mean objective, the
// highest lr at which no seed diverged and the highest that learned (NaN: none).
struct Sensitivity {
  double best_lr = NAN, best_objective = INFINITY, highest_survived = NAN, highest_learned = NAN;
};

Sensitivity sensitivity(const std::map<double, Seeds>& by_lr, double chance) {
  Sensitivity out;
  for (const auto& [lr, seeds] : by_lr) {
    const double objective = mean(seeds.objective);
    if (objective < out.best_objective) {
      out.best_objective = objective;
      out.best_lr = lr;
    }
    if (seeds.diverged == 0) {
      out.highest_survived = lr;
      // Learned (ArmStats::learned): the mean final loss below chance by more than the seed sd and 2%.
      const double m = mean(seeds.kept_final);
      double sq = 0;
      for (double v : seeds.kept_final) sq += (v - m) * (v - m);
      const double sd = seeds.kept_final.size() > 1 ? std::sqrt(sq / (seeds.kept_final.size() - 1)) : 0;
      if (chance - m > std::max(0.02 * std::max(chance, m), sd)) out.highest_learned = lr;
    }
  }
  return out;
}

// Final loss against lr, one scaling's row: the mean over the kept seeds, or "diverged" when none is kept.
void check_final_loss_row(const std::string& row, const std::map<double, Seeds>& by_lr) {
  for (const auto& [lr, seeds] : by_lr) {
    if (seeds.kept_final.empty())
      CHECK(row.find("diverged") != std::string::npos);
    else
      CHECK(row.find("| " + g3(mean(seeds.kept_final))) != std::string::npos);
  }
}

// The table row: best lr, its mean objective, the highest lr without divergence and the highest that learned.
void check_table_row(const std::string& table_row, const std::string& scale, const Sensitivity& s) {
  REQUIRE(!table_row.empty());
  CHECK(table_row.find("| " + xgrad::report::markdown_text(scale, true) + " | " + g3(s.best_lr) + " | " +
                       g3(s.best_objective)) != std::string::npos);
  const std::string survived = std::isnan(s.highest_survived) ? "none" : g3(s.highest_survived);
  const std::string learned = std::isnan(s.highest_learned) ? "none" : g3(s.highest_learned);
  CHECK(table_row.size() > survived.size() + learned.size() + 6);
  CHECK(table_row.substr(table_row.size() - survived.size() - learned.size() - 7) ==
        "| " + survived + " | " + learned + " |");
}

}  // namespace

TEST_CASE("preset lr --quick: final loss per lr, LR-sensitivity table and largest logit carry the runs' numbers") {
  const std::vector<std::string>& scalings = xgrad::testing::kPresetScalings;
  REQUIRE(scalings.size() >= 2);
  TempDir tmp("preset_lr");
  const auto run = xgrad::testing::run_preset("lr", tmp / "lr");
  xgrad::testing::check_preset_run(run, "lr", scalings.size() * 8 * 2);
  double chance = NAN;
  const Curves curves = read_curves(run, chance);
  REQUIRE(curves.size() == scalings.size() * 2);

  const std::string loss = xgrad::testing::required_section(run.report, "lr-final-loss");
  const std::string table = xgrad::testing::required_section(run.report, "lr-sensitivity-table");
  const std::string logit = xgrad::testing::required_section(run.report, "lr-max-logit");
  std::size_t some_diverged = 0;
  for (const std::string optimizer : {"adamw", "sgd"}) {
    xgrad::testing::check_figure(run, "lr_final_loss_vs_lr_" + optimizer + "_dk64");
    xgrad::testing::check_figure(run, "lr_max_logit_vs_step_" + optimizer + "_dk64");
    const std::string figure = loss.substr(loss.find("### Final loss against learning rate, " + optimizer));
    for (const std::string& scale : scalings) {
      INFO(optimizer << " " << scale);
      const auto& by_lr = curves.at({optimizer, scale});
      CHECK(by_lr.size() == 4);
      const std::string row = line_starting(figure, "| " + xgrad::report::markdown_text(scale, true) + " |");
      REQUIRE(!row.empty());
      check_final_loss_row(row, by_lr);
      for (const auto& [lr, seeds] : by_lr) some_diverged += seeds.diverged;
      const Sensitivity s = sensitivity(by_lr, chance);
      check_table_row(
          line_starting(table, "| " + optimizer + " | 64 | " + xgrad::report::markdown_text(scale, true) + " | "),
          scale, s);
      // The logit table's row names the lr that learned.
      const std::string learned = std::isnan(s.highest_learned) ? "none" : g3(s.highest_learned);
      const std::string start = "| " + optimizer + " | 64 | " + xgrad::report::markdown_text(scale, true) + " | ";
      CHECK(line_starting(logit, start).rfind(start + learned, 0) == 0);
    }
  }
  // The quick grid reaches divergence (SGD at lr 1), so the survival column is not trivially the highest lr.
  CHECK(some_diverged > 0);
}
