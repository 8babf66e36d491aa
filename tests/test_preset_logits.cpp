// `xgrad experiment --preset logits --quick` through the real executable (label preset_quick), on kv_recall and on a
// text of this repository's own documentation: the grid it promises (AdamW and Muon x none, sqrt_dk, qk_clip and
// qk_norm at its two multipliers x d_k 16 and 256 x 2 tasks, the qk_norm_scale axis only on qk_norm's runs), its
// figures, and its verdicts as values: each row's numbers are its arms' statistics as `xgrad compare`'s analysis
// computes them from the runs, each outcome follows from them seed by seed, the counts add up, the QK-Clip rows stand
// where the clip acts, and qk_norm at scale 1 starts more saturated than at 1/sqrt(d_k) at d_k 256.
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "report/claims.h"
#include "report/runs.h"
#include "report/stats.h"
#include "tests/support/paths.h"
#include "tests/support/preset_run.h"
#include "tests/support/temp_dir.h"

using xgrad::testing::TempDir;

namespace {

// The cells of the markdown table rows of `section` whose first cell is one of a-d.
std::vector<std::vector<std::string>> verdict_rows(const std::string& section, std::size_t columns) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(section);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| ", 0) != 0) continue;
    std::vector<std::string> cells;
    for (std::size_t start = 2, bar; (bar = line.find(" | ", start)) != std::string::npos || start < line.size();) {
      if (bar == std::string::npos) bar = line.rfind(" |");
      std::string cell;  // as the table shows it: a backslash escapes the next character (markdown_text)
      for (std::size_t i = start; i < bar; ++i) cell += line[i] == '\\' && i + 1 < bar ? line[++i] : line[i];
      cells.push_back(cell);
      start = bar + 3;
      if (bar + 2 >= line.size()) break;
    }
    if (cells.size() == columns && cells[0].size() == 1 && cells[0][0] >= 'a' && cells[0][0] <= 'd')
      rows.push_back(cells);
  }
  return rows;
}

// The arms as compare's analysis reads them from the runs, by (task, d_k, name), the name as the verdict rows give
// it: "<optimizer> <scale_label>".
using Arms = std::map<std::tuple<std::string, std::string, std::string>, xgrad::report::ArmStats>;
Arms read_arms(const xgrad::testing::PresetRun& run) {
  std::vector<xgrad::report::RunRecord> records;
  for (const std::string& dir : xgrad::report::find_run_dirs({run.dir.string()}).dirs)
    records.push_back(xgrad::report::load_run(dir));
  const xgrad::report::Comparison c = xgrad::report::analyse_runs(std::move(records), -1, 0.9, 10);
  Arms arms;
  for (const auto& a : c.arms)
    arms[{xgrad::report::setting_text(a.settings, "task"), std::to_string(a.d_k()),
          a.optimizer() + " " + xgrad::report::scale_label(a)}] = a;
  REQUIRE(arms.size() == 40);
  return arms;
}

// One seed: a row's outcome is the subject's value against the baseline's beyond the statistic's tolerance
// (report/claims.cpp's table: a factor 1.5 for the largest logit, 2% for loss and entropy, none against tau).
std::string expected_outcome(const std::string& question, const std::string& statistic, double s, double b) {
  const bool higher_better = statistic != "final_loss" && question != "b";
  const double tol = statistic == "max_logit_max" ? (question == "b" ? 0 : std::max(s, b) / 3)
                                                  : 0.02 * std::max(std::fabs(s), std::fabs(b));
  const double gain = higher_better ? s - b : b - s;
  return gain > tol ? "better" : gain < -tol ? "worse" : "same";
}

// The verdict rows (question, task, d_k, subject, baseline, statistic, values, seeds, outcome) carry their arms'
// statistics and the outcomes those give; the counts table adds them up; the QK-Clip rows stand where the clip acts
// (where a sqrt_dk seed's largest logit passes the preset's qk_clip_tau).
void check_verdicts(const std::string& section, const Arms& arms) {
  std::map<std::string, std::map<std::string, int>> outcomes;  // question and statistic -> outcome -> rows
  std::set<std::tuple<std::string, std::string, std::string>> clip_rows;
  for (const auto& row : verdict_rows(section, 10)) {
    INFO(fmt::format("{}", fmt::join(row, " | ")));
    const std::string &q = row[0], &task = row[1], &d_k = row[2], &statistic = row[5];
    const double s = arms.at({task, d_k, row[3]}).stat(statistic).mean;
    const double b = row[4] == "tau" ? 100 : arms.at({task, d_k, row[4]}).stat(statistic).mean;
    CHECK(row[6] == fmt::format("{:.4g}", s));
    CHECK(row[7] == fmt::format("{:.4g}", b));
    CHECK(row[9] == expected_outcome(q, statistic, s, b));
    ++outcomes[q + " " + statistic][row[9]];
    if (q == "c") clip_rows.insert({task, d_k, row[3].substr(0, row[3].find(' '))});
    // QK-norm at scale 1 starts with |score| about sqrt(d_k) = 16 at d_k 256, against 1 at 1/sqrt(d_k): more
    // saturated, whatever the task and optimizer.
    if (q == "d" && statistic == "entropy_first" && d_k == "256") CHECK(row[9] == "worse");
  }
  // a, b, c only where the clip acts (it may act nowhere in 60 steps), and d's three statistics.
  CHECK(outcomes.size() == (clip_rows.empty() ? 5 : 6));
  std::map<std::string, std::map<std::string, int>> counted;
  for (const auto& row : verdict_rows(section, 9))
    for (std::size_t k = 0; k < 4; ++k)
      counted[row[0] + " " + row[3]][std::vector<std::string>{"better", "worse", "same", "not decided"}[k]] +=
          std::stoi(row[5 + k]);
  for (auto& entry : counted)
    for (auto it = entry.second.begin(); it != entry.second.end();)
      it = it->second ? std::next(it) : entry.second.erase(it);
  CHECK(counted == outcomes);
  double tau = 0;  // the preset's qk_clip_tau
  for (const auto& entry : arms)
    if (entry.second.scale() == "qk_clip") tau = entry.second.settings.at("qk_clip_tau").get<double>();
  CHECK(tau == 10);
  for (const auto& entry : arms) {
    if (entry.second.scale() != "sqrt_dk") continue;
    const bool passes = entry.second.stat("max_logit_max").max > tau;
    const std::tuple<std::string, std::string, std::string> cell{std::get<0>(entry.first), std::get<1>(entry.first),
                                                                 entry.second.optimizer()};
    CHECK(clip_rows.count(cell) == (passes ? 1u : 0u));
  }
}

}  // namespace

TEST_CASE("preset logits --quick: AdamW and Muon x 5 scalings x 2 d_k x 2 tasks; the verdicts follow from the runs") {
  TempDir tmp("preset_logits");
  const std::string text = xgrad::testing::write_docs_text(tmp.path());
  const auto run = xgrad::testing::run_preset("logits", tmp / "logits", "--text " + text);
  xgrad::testing::check_preset_run(run, "logits", 40);
  std::map<std::string, int> per_scale;
  for (const auto& r : run.sweep.at("runs")) {
    const auto& config = r.at("config");
    ++per_scale[config.at("scale").get<std::string>() +
                (config.contains("qk_norm_scale") ? ":" + config.at("qk_norm_scale").get<std::string>() : "")];
    CHECK((config.at("task") == "kv_recall" || config.at("task") == "char_lm"));
    CHECK((config.at("optimizer") == "adamw" || config.at("optimizer") == "muon"));
  }
  CHECK(per_scale == std::map<std::string, int>{
                         {"none", 8}, {"qk_clip", 8}, {"qk_norm:1", 8}, {"qk_norm:inv_sqrt_dk", 8}, {"sqrt_dk", 8}});
  for (const char* anchor : {"logits", "logits-d-k"}) xgrad::testing::required_section(run.report, anchor);
  for (const char* task : {"kv_recall", "char_lm"})
    for (const char* optimizer : {"adamw", "muon"}) {
      xgrad::testing::check_figure(run, fmt::format("logits_max_logit_{}_{}_dk256", task, optimizer));
      xgrad::testing::check_figure(run, fmt::format("logits_final_loss_{}_{}", task, optimizer));
      xgrad::testing::check_figure(run, fmt::format("logits_entropy_last_{}_{}", task, optimizer));
    }

  const Arms arms = read_arms(run);
  // The qk_norm arms are named apart by their multiplier.
  CHECK(arms.count({"kv_recall", "256", "adamw qk_norm (qk_norm_scale=1)"}) == 1);
  CHECK(arms.count({"kv_recall", "256", "adamw qk_norm (qk_norm_scale=inv_sqrt_dk)"}) == 1);
  check_verdicts(xgrad::testing::required_section(run.report, "logits-verdicts"), arms);

  // A qk_clip arm at another tau, copied in, is an arm of its own: (a) pairs each arm with the other optimizer's at
  // its own tau, and (c) judges each tau apart (at kv_recall d_k 256 sqrt_dk's largest logit passes 5).
  const auto tau5 = run.dir / "runs" / "copied-tau5";
  REQUIRE(
      xgrad::testing::run_xgrad({"train", "--config",
                                 (run.dir / "configs" / "dk256-qk_clip-adamw-lr0.003-taskkv_recall-s0.json").string(),
                                 "--qk-clip-tau", "5", "--out", tau5.string()})
          .exit_code == 0);
  const auto again = tmp / "with-tau5";
  REQUIRE(xgrad::testing::run_xgrad(
              {"compare", run.dir.string(), "--include-unlisted", "--plots", "false", "--out", again.string()})
              .exit_code == 0);
  std::ifstream in(again / "report.md");
  const std::string report((std::istreambuf_iterator<char>(in)), {});
  int tau5_rows = 0;
  for (const auto& row : verdict_rows(xgrad::testing::required_section(report, "logits-verdicts"), 10)) {
    INFO(fmt::format("{}", fmt::join(row, " | ")));
    const bool subject5 = row[3].find("qk_clip_tau=5") != std::string::npos;
    if (row[0] == "a") CHECK(subject5 == (row[4].find("qk_clip_tau=5") != std::string::npos));
    if (row[0] == "c" && subject5) {
      ++tau5_rows;
      CHECK(row[4] == "adamw sqrt_dk");
    }
  }
  CHECK(tau5_rows == 1);
  // (c) is counted per tau: AdamW has a count row for each of its two qk_clip arms.
  std::set<std::string> adamw_c_subjects;
  for (const auto& row : verdict_rows(xgrad::testing::required_section(report, "logits-verdicts"), 9))
    if (row[0] == "c" && row[4] == "adamw") adamw_c_subjects.insert(row[1]);
  CHECK(adamw_c_subjects.count("qk_clip (qk_clip_tau=5)") == 1);
  CHECK(adamw_c_subjects.size() == (adamw_c_subjects.count("qk_clip (qk_clip_tau=10)") ? 2u : 1u));
}
