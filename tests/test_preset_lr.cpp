// `xgrad experiment --preset lr --quick` through the real executable (label preset_quick): every registered scaling
// x 4 lrs of AdamW and of SGD x 2 seeds at d_k 64. Its three sections and their figures exist, and their numbers are
// the ones this test computes from the runs' own files (summary.json): each scaling's mean final loss per lr, its best
// lr by the Wortsman objective, the highest lr at which no seed diverged and the highest that learned.
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include <doctest/doctest.h>

#include "common/registry.h"
#include "nn/scaling.h"
#include "tests/support/preset_run.h"
#include "tests/support/temp_dir.h"
#include "train/run_files.h"

using xgrad::testing::read_text;
using xgrad::testing::TempDir;

namespace {

std::string g3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// The line of `text` that starts with `prefix`, "" if none.
std::string line_starting(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) return line;
  return "";
}

struct Seeds {
  std::vector<double> kept_final;  // final losses of the runs that did not diverge
  std::vector<double> objective;   // min(final, first) per run; a diverged run counts as its first loss
  std::size_t diverged = 0;
  std::size_t n = 0;
};

}  // namespace

TEST_CASE("preset lr --quick: final loss per lr, LR-sensitivity table and largest logit carry the runs' numbers") {
  const std::vector<std::string> scalings = xgrad::Registry<xgrad::nn::ScalingEntry>::instance().names();
  REQUIRE(scalings.size() >= 2);
  TempDir tmp("preset_lr");
  const auto run = xgrad::testing::run_preset("lr", tmp / "lr");
  xgrad::testing::check_preset_run(run, "lr", scalings.size() * 8 * 2);

  // (optimizer, scale) -> lr -> the seeds, from each run's summary.json; compare counts a run as diverged when it
  // says so or its final loss blew up (run_files.h).
  std::map<std::pair<std::string, std::string>, std::map<double, Seeds>> curves;
  double chance = NAN;
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
  REQUIRE(curves.size() == scalings.size() * 2);

  const std::string loss = xgrad::testing::report_section(run.report, "lr-final-loss");
  const std::string table = xgrad::testing::report_section(run.report, "lr-sensitivity-table");
  const std::string logit = xgrad::testing::report_section(run.report, "lr-max-logit");
  REQUIRE(!loss.empty());
  REQUIRE(!table.empty());
  REQUIRE(!logit.empty());
  std::size_t some_diverged = 0;
  for (const std::string optimizer : {"adamw", "sgd"}) {
    xgrad::testing::check_figure(run, "lr_final_loss_vs_lr_" + optimizer + "_dk64");
    xgrad::testing::check_figure(run, "lr_max_logit_vs_step_" + optimizer + "_dk64");
    const std::string figure = loss.substr(loss.find("### Final loss against learning rate, " + optimizer));
    const std::string sentences = logit.substr(logit.find("**" + optimizer + ", d_k = 64.**"));
    for (const std::string& scale : scalings) {
      INFO(optimizer << " " << scale);
      const auto& by_lr = curves.at({optimizer, scale});
      CHECK(by_lr.size() == 4);
      // Final loss against lr: the mean over the kept seeds, or "diverged" when none is kept.
      const std::string row = line_starting(figure, "| " + scale + " |");
      REQUIRE(!row.empty());
      double best_lr = NAN, best_objective = INFINITY, highest_survived = NAN, highest_learned = NAN;
      for (const auto& [lr, seeds] : by_lr) {
        double sum = 0;
        for (double v : seeds.kept_final) sum += v;
        if (seeds.kept_final.empty())
          CHECK(row.find("diverged") != std::string::npos);
        else
          CHECK(row.find("| " + g3(sum / seeds.kept_final.size())) != std::string::npos);
        double objective = 0;
        for (double v : seeds.objective) objective += v;
        objective /= seeds.objective.size();
        if (objective < best_objective) {
          best_objective = objective;
          best_lr = lr;
        }
        if (seeds.diverged == 0) {
          highest_survived = lr;
          // Learned (ArmStats::learned): the mean final loss below chance by more than the seed sd and 2%.
          const double mean = sum / seeds.kept_final.size();
          double sq = 0;
          for (double v : seeds.kept_final) sq += (v - mean) * (v - mean);
          const double sd = seeds.kept_final.size() > 1 ? std::sqrt(sq / (seeds.kept_final.size() - 1)) : 0;
          if (chance - mean > std::max(0.02 * std::max(chance, mean), sd)) highest_learned = lr;
        }
        some_diverged += seeds.diverged;
      }
      // The table: best lr, its mean objective, the highest lr without divergence and the highest that learned.
      const std::string table_row = line_starting(table, "| " + optimizer + " | 64 | " + scale + " | ");
      REQUIRE(!table_row.empty());
      CHECK(table_row.find("| " + scale + " | " + g3(best_lr) + " | " + g3(best_objective)) != std::string::npos);
      const std::string survived = std::isnan(highest_survived) ? "none" : g3(highest_survived);
      const std::string learned = std::isnan(highest_learned) ? "none" : g3(highest_learned);
      CHECK(table_row.size() > survived.size() + learned.size() + 6);
      CHECK(table_row.substr(table_row.size() - survived.size() - learned.size() - 7) ==
            "| " + survived + " | " + learned + " |");
      // The logit sentence names the lr that learned.
      if (!std::isnan(highest_learned))
        CHECK(sentences.find(scale + ": highest lr survived " + learned) != std::string::npos);
      else
        CHECK(sentences.find(scale + ": no learning rate survives") != std::string::npos);
    }
  }
  // The quick grid reaches divergence (SGD at lr 1), so the survival column is not trivially the highest lr.
  CHECK(some_diverged > 0);
}
