#include "report/explain.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/escape.h"
#include "report/claims.h"
#include "report/explain_figures.h"
#include "report/stats.h"
#include "report/tables.h"
#include "train/settings.h"

namespace xgrad::report {

const ArmMeasurement* Explanation::arm(std::size_t d_k, const std::string& scale) const {
  for (const auto& a : arms)
    if (a.d_k == d_k && a.scale == scale) return &a;
  return nullptr;
}

namespace {

// Log-spaced score stds from 0.01 to past the largest measured std: the softmax curves' x.
std::vector<double> curve_grid(const std::vector<ArmMeasurement>& arms) {
  double top = 100;
  for (const auto& a : arms) top = std::max(top, 4 * a.score_std);
  const std::size_t n = 81;
  std::vector<double> xs;
  for (std::size_t i = 0; i < n; ++i)
    xs.push_back(0.01 * std::pow(top / 0.01, static_cast<double>(i) / static_cast<double>(n - 1)));
  return xs;
}

std::string setup_line(const train::TrainConfig& c, const ArmMeasurement& a) {
  return text("explain", "setup",
              {{"task", c.task},
               {"d_model", c.model.d_model},
               {"n_heads", c.model.n_heads},
               {"heads_s", c.model.n_heads == 1 ? "" : "s"},
               {"n_layers", c.model.n_layers},
               {"layers_s", c.model.n_layers == 1 ? "" : "s"},
               {"causal", c.model.causal ? "causal" : "not causal"},
               {"seq_len", a.heatmap.size() ? a.heatmap.front().size() : 0},
               {"batch", c.batch_size},
               {"seed", static_cast<std::size_t>(c.seed)},
               {"data_seed", static_cast<std::size_t>(c.data_seed)}});
}

// How an arm's final loss compares with the unscaled arm's (a tie at the floor is no comparison).
std::string versus(const Verdict& v) {
  if (v.why_not == "both_solved" || v.why_not == "neither_learned")
    return v.why_not == "both_solved" ? "both solved" : "neither learned";
  static const char* const names[]{"lower", "higher", "same", "not decided"};
  return names[static_cast<int>(v.outcome)];
}

TrainingPoint training_point(const Comparison& c, const ArmStats& arm, const std::vector<std::string>& extra) {
  TrainingPoint p;
  p.d_k = arm.d_k();
  p.scale = arm.scale();
  p.label = arm_label(arm, extra, {"d_k"});
  p.group = arm_label(arm, extra, {"d_k", "scale"});
  p.n_runs = arm.kept.size();
  p.settings = arm.settings;
  p.final_loss = arm.stat("final_loss").mean;
  p.reached = arm.stat("step_to_loss").n;
  p.steps_to_loss = arm.stat("step_to_loss").mean;
  std::vector<double> saturated, relative;
  for (const auto r : arm.kept) {
    saturated.push_back(median(c.runs[r].series.saturated));  // over the measured rows of the first layer
    relative.push_back(c.stats[r]["score_grad_relative"]);    // compare's definition (report/stats.h)
  }
  p.saturated_share = mean_sd(saturated).mean;
  p.score_grad_relative = mean_sd(relative).mean;
  return p;
}

// "d_model (runs 128; measured 64)": evidence of another model says little about this one's initialisation.
std::vector<std::string> model_differences(const train::TrainConfig& base, const TrainingEvidence& t) {
  const nlohmann::json measured = base.to_json();
  std::map<std::string, std::set<std::string>> differ;  // key → the runs' values
  for (const auto& p : t.points)
    for (const auto& [key, value] : p.settings.items()) {
      const Setting* s = train::find_setting(key);
      if (!s || !(s->commands & Setting::kProbe) || key == "d_k" || key == "scale" || key == "seed" ||
          key == "data_seed" || key == "batch_size" || !measured.contains(key) || measured.at(key) == value)
        continue;
      differ[key].insert(value.dump());
    }
  std::vector<std::string> out;
  for (const auto& [key, values] : differ)
    out.push_back(fmt::format("{} (runs {}; measured {})", key, fmt::join(values, ", "), measured.at(key).dump()));
  return out;
}

// Notes name directories and values (data): one line of visible text each wherever they are shown.
void escape_notes(std::vector<std::string>& notes) {
  for (std::string& note : notes) note = escape_control(note);
}

}  // namespace

TrainingEvidence training_evidence(const std::vector<std::string>& inputs, double loss_threshold) {
  TrainingEvidence t;
  std::vector<RunRecord> runs;
  const FoundRuns found = find_run_dirs(inputs, {}, "--runs");
  if (!found.unlisted.empty()) t.notes.push_back(text("explain", "note.unlisted", {{"n", found.unlisted.size()}}));
  for (const auto& dir : found.dirs) {
    try {
      runs.push_back(load_run(dir));
    } catch (const std::exception& e) {
      t.notes.push_back(text("explain", "note.unreadable", {{"dir", dir}, {"why", std::string(e.what())}}));
    }
  }
  if (runs.empty()) {
    t.notes.push_back(text("explain", "note.no_runs"));
    escape_notes(t.notes);
    return t;
  }
  const Comparison c = analyse_runs(std::move(runs), loss_threshold, 0.9, 10);
  for (const auto& run : c.runs)
    if (run.incomplete)
      t.notes.push_back(text("explain", "note.incomplete", {{"dir", run.dir}, {"why", run.incomplete_reason}}));
  const auto extra = distinguishing_keys(c.arms);
  const std::vector<Verdict> verdicts = judge(c, "scale", baseline_of(c));
  for (const auto& group : arm_groups(c, "scale")) {
    for (const auto i : group) {
      TrainingPoint p = training_point(c, c.arms[i], extra);
      for (const Verdict& v : verdicts)
        if (v.claim == "trains_better" && v.subject == i && is_reference_scale(c.arms[v.baseline].scale()))
          p.versus_reference = versus(v);
      if (p.d_k == 0)
        t.notes.push_back(text("explain", "note.no_d_k", {{"label", p.label}}));
      else if (p.n_runs > 0)
        t.points.push_back(std::move(p));
    }
  }
  std::stable_sort(t.points.begin(), t.points.end(),
                   [](const auto& a, const auto& b) { return a.label != b.label ? a.label < b.label : a.d_k < b.d_k; });
  if (t.points.empty()) t.notes.push_back(text("explain", "note.none_completed"));
  escape_notes(t.notes);
  return t;
}

Explanation explain(const train::TrainConfig& base, const ExplainOptions& options) {
  Explanation e;
  e.d_ks = options.d_ks;
  std::sort(e.d_ks.begin(), e.d_ks.end());  // every step reads from the smallest head size to the largest
  e.scales = options.scales;
  e.arms = measure_arms(base, e.d_ks, e.scales);
  e.setup = setup_line(base, e.arms.front());
  e.curves = softmax_curves(e.arms.front().key_counts, curve_grid(e.arms), base.seed);
  if (!options.runs.empty()) {
    e.training = training_evidence(options.runs, options.loss_threshold);
    e.notes.insert(e.notes.end(), e.training->notes.begin(), e.training->notes.end());
    const auto differences = model_differences(base, *e.training);
    if (!differences.empty())
      e.notes.push_back(
          text("explain", "note.model_differs", {{"list", fmt::format("{}", fmt::join(differences, ", "))}}));
  }
  if (e.arms.front().chance_share != e.arms.front().chance_share && e.arms.front().n_answerable == 0)
    e.notes.push_back(text("explain", "note.no_answer_key", {{"task", base.task}}));
  escape_notes(e.notes);
  e.sections = explain_sections(e);
  return e;
}

}  // namespace xgrad::report
