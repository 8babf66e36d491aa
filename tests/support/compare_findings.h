// Fabricated runs and the text compare makes of them, for the tests of its statistics, story and findings: runs
// analysed as `xgrad compare` would, an SGD run of known final loss, a score-gradient column FakeRun does not write,
// and the findings or story lines as one string to search.
#pragma once

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "report/claims.h"
#include "report/markdown.h"
#include "report/runs.h"
#include "report/stats.h"
#include "report/tables.h"
#include "tests/support/fake_run.h"

namespace xgrad::testing {

/// A missing value in a metric series (compare reads an empty or "nan" cell as one).
inline const double nan_value = std::numeric_limits<double>::quiet_NaN();

/// `n` copies of `v`: a flat metric series.
inline std::vector<double> constant(std::size_t n, double v) { return std::vector<double>(n, v); }

/// The run directories at or below `inputs`, loaded and analysed (loss threshold 1 unless given).
inline report::Comparison analyse_dirs(const std::vector<std::string>& inputs, double loss_threshold = 1.0,
                                       double accuracy_threshold = 0.9, std::size_t window = 1) {
  std::vector<report::RunRecord> runs;
  for (const auto& d : report::find_run_dirs(inputs).dirs) runs.push_back(report::load_run(d));
  return report::analyse_runs(std::move(runs), loss_threshold, accuracy_threshold, window);
}

/// The verdict of `claim` ("trains_better", "more_gradient_step0_w_q", ...) whose subject arm has scale `subject`
/// (and d_k `d_k`, when not 0), judged as compare judges them; none when there is no such verdict.
inline std::optional<report::Verdict> verdict_of(const report::Comparison& c, const std::string& claim,
                                                 const std::string& subject, std::size_t d_k = 0) {
  for (const report::Verdict& v : report::judge(c, c.axis, report::baseline_of(c)))
    if (v.claim == claim && c.arms[v.subject].scale() == subject && (d_k == 0 || c.arms[v.subject].d_k() == d_k))
      return v;
  return std::nullopt;
}

/// An SGD run of `scale` at `lr` and `seed`: loss 4 at step 0, then `final_loss` for 20 steps; `diverged`: inf at
/// step 1 instead, marked diverged there (planned like the others: 21 steps).
inline FakeRun sgd_run(const std::string& scale, double lr, int seed, double final_loss, bool diverged) {
  FakeRun r;
  r.scale = scale;
  r.optimizer = "sgd";
  r.lr = lr;
  r.seed = seed;
  r.loss = {4.0};
  if (diverged) {
    r.loss.push_back(std::numeric_limits<double>::infinity());
    r.diverged = true;
    r.diverged_step = 1;
    r.steps = 21;
  } else {
    r.loss.insert(r.loss.end(), 20, final_loss);
  }
  return r;
}

/// Appends the column attn/l0h0/score_grad_median (FakeRun writes none) to `run_dir`'s metrics.csv, `value(row)` in
/// each row.
template <class Value>
void add_score_grad(const std::filesystem::path& run_dir, Value value) {
  const std::filesystem::path csv = run_dir / "metrics.csv";
  std::ifstream in(csv);
  std::string line, text;
  std::size_t row = 0;
  for (bool header = true; std::getline(in, line); header = false)
    text += line + "," + (header ? std::string("attn/l0h0/score_grad_median") : csv_number(value(row++))) + "\n";
  in.close();
  std::ofstream(csv) << text;
}

/// The lines, each followed by a newline.
inline std::string joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  return all;
}

/// The findings' texts, each followed by a newline.
inline std::string findings_text(const report::Comparison& cmp) {
  std::string all;
  for (const auto& l : report::findings(cmp)) all += l.text + "\n";
  return all;
}

/// The findings whose glossary entry is `term`'s (report::glossary_anchor): the lines of one kind, in order.
inline std::vector<report::FindingLine> findings_of(const report::Comparison& cmp, const std::string& term) {
  std::vector<report::FindingLine> out;
  for (const auto& l : report::findings(cmp))
    if (l.glossary == report::glossary_anchor(term)) out.push_back(l);
  return out;
}

/// The numbers in `text`, in order: "in 2 of 3, as well in 1" -> {2, 3, 1}; "0.50/0.33" -> {0.5, 0.33}.
inline std::vector<double> numbers_in(const std::string& text) {
  static const std::regex number(R"((^|[^A-Za-z_0-9.])(-?[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?))");
  std::vector<double> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), number); it != std::sregex_iterator(); ++it)
    out.push_back(std::stod((*it)[2].str()));
  return out;
}

/// The words of `text`: its whitespace-separated tokens.
inline std::size_t word_count(const std::string& text) {
  std::istringstream in(text);
  std::size_t n = 0;
  for (std::string word; in >> word;) ++n;
  return n;
}

/// How the verdicts of `claim` came out for the arms of scale `subject`: {better, worse, same, not decided, all}.
inline std::vector<double> outcome_counts(const report::Comparison& c, const std::string& claim,
                                          const std::string& subject) {
  std::vector<double> n(5, 0);
  for (const report::Verdict& v : report::judge(c, c.axis, report::baseline_of(c)))
    if (v.claim == claim && c.arms[v.subject].scale() == subject) {
      n[static_cast<std::size_t>(v.outcome)] += 1;
      n[4] += 1;
    }
  return n;
}

}  // namespace xgrad::testing
