#include "report/summary.h"

#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "report/explain_measure.h"
#include "report/tables.h"
#include "report/text.h"
#include "train/config.h"
#include "train/settings.h"

namespace xgrad::report {

namespace {

std::string figure_text(const std::string& key, const Fields& fields = {}) { return text("figures", key, fields); }

// The settings that cannot change the model or the batch at step 0: what `xgrad probe` refuses, and the optimizer's.
const std::set<std::string>& not_at_step0() {
  static const std::set<std::string> keys = [] {
    std::set<std::string> k{"d_k", "optimizer"};
    for (const train::CoreSetting& s : train::core_settings())
      if ((s.setting.commands & Setting::kSweep) && !(s.setting.commands & Setting::kProbe)) k.insert(s.setting.key);
    for (const train::ComponentSetting& s : train::component_settings())
      if (s.component == "optimizer") k.insert(s.setting.key);
    return k;
  }();
  return keys;
}

// Arms grouped by `key` (first appearance order, which is analyse_runs' order), each group's arms by d_k.
template <class Key>
std::vector<std::vector<std::size_t>> group_arms(const Comparison& c, Key key) {
  return group_indices(c.arms.size(), [&](std::size_t a) { return key(c.arms[a]); });
}

// Final loss against `x` ("d_k" or "lr"), one line per group of arms that differ only in it.
SummaryFigure final_loss_vs(const Comparison& c, const std::string& x,
                            const std::vector<std::vector<std::size_t>>& groups) {
  SummaryFigure f = summary_figure("final_loss_vs_" + x, Axis::log, Axis::linear);
  const auto extra = distinguishing_keys(c.arms);
  const auto omit = shared_label_parts(c.arms, {x});
  for (const auto& group : groups) {
    SummaryLine line = summary_line(arm_label(c.arms[group.front()], extra, omit), c.arms[group.front()].scale());
    for (auto a : group) {
      const ArmStats& arm = c.arms[a];
      const double at = x == "lr" ? arm.lr() : static_cast<double>(arm.d_k());
      line.points.push_back(mean_point(at, arm.stat("final_loss"), arm.diverged_steps.size(), true));
      if (arm.stat("final_loss").n == 0 && !arm.diverged_steps.empty())
        f.notes.push_back(
            figure_text("diverged_point", {{"line", line.label}, {"x", x + "=" + setting_text(arm.settings, x)}}));
    }
    f.lines.push_back(std::move(line));
  }
  return f;
}

// Entropy or score std at step 0: the kept runs of each step-0 group at each d_k that measured attention at step 0.
SummaryFigure step0_vs_d_k(const Comparison& c, bool entropy) {
  SummaryFigure f = summary_figure(entropy ? "entropy_step0_vs_d_k" : "score_std_step0_vs_d_k", Axis::log,
                                   entropy ? Axis::linear : Axis::log);
  const auto extra = distinguishing_keys(c.arms);
  std::vector<std::string> extra_step0;
  for (const auto& k : extra)
    if (!not_at_step0().count(k)) extra_step0.push_back(k);
  std::size_t not_measured = 0;
  // Lines without a theory point: their label, the d_k values and the first reason, said in one note.
  std::vector<std::string> no_theory;
  for (const auto& group : group_arms(c, [](const ArmStats& a) { return step0_key(a.settings); })) {
    std::vector<std::string> no_theory_d_k;
    std::string no_theory_reason;
    SummaryLine line = summary_line(arm_label(c.arms[group.front()], extra_step0, {"d_k", "optimizer", "lr"}),
                                    c.arms[group.front()].scale());
    SummaryLine theory{line.label + ": theory", line.scale, true, {}};
    std::map<std::size_t, std::vector<std::size_t>> runs_at;  // d_k → arms' kept runs measured at step 0
    std::map<std::size_t, std::size_t> diverged_at;
    for (auto a : group) {
      const ArmStats& arm = c.arms[a];
      diverged_at[arm.d_k()] += arm.diverged_steps.size();
      auto& runs = runs_at[arm.d_k()];
      for (auto i : arm.kept) {
        if (c.stats[i]["first_measured_step"] == 0)
          runs.push_back(i);
        else
          ++not_measured;
      }
    }
    for (const auto& [d_k, runs] : runs_at) {
      std::vector<double> values;
      for (auto i : runs) values.push_back(entropy ? c.stats[i]["entropy_first"] : c.stats[i]["score_std_first"]);
      line.points.push_back(mean_point(static_cast<double>(d_k), mean_sd(values), diverged_at[d_k], true));
      if (entropy || runs.empty()) continue;
      // The theory on the weights and batch the first run started from.
      const RunRecord& run = c.runs[runs.front()];
      try {
        const train::TrainConfig config = train::TrainConfig::from_json(run.config, run.dir + "/config.json");
        const std::vector<ArmMeasurement> rows = probe(config, {d_k}, {config.model.scale});
        theory.points.push_back({static_cast<double>(d_k), rows.front().theory_std, kNoValue, kNoValue, 1, 0});
      } catch (const std::exception& e) {
        no_theory_d_k.push_back(std::to_string(d_k));
        if (no_theory_reason.empty()) no_theory_reason = e.what();
      }
    }
    if (!no_theory_d_k.empty())
      no_theory.push_back(figure_text("no_theory_line", {{"line", line.label},
                                                         {"d_ks", fmt::format("{}", fmt::join(no_theory_d_k, ", "))},
                                                         {"reason", no_theory_reason}}));
    f.lines.push_back(std::move(line));
    if (!theory.points.empty()) f.lines.push_back(std::move(theory));
  }
  if (!no_theory.empty())
    f.notes.push_back(figure_text("no_theory", {{"lines", fmt::format("{}", fmt::join(no_theory, "; "))}}));
  if (not_measured) f.notes.push_back(figure_text("not_measured", {{"runs", counted(not_measured, "run")}}));
  return f;
}

SummaryFigure score_grad_vs_d_k(const Comparison& c) {
  SummaryFigure f = summary_figure("score_grad_vs_d_k", Axis::log, Axis::log);
  f.error_bar_sd = false;
  const auto extra = distinguishing_keys(c.arms);
  const auto omit = shared_label_parts(c.arms, {"d_k"});
  std::size_t zero = 0;
  for (const auto& group : group_arms(c, [](const ArmStats& a) { return key_without(a.settings, {"d_k"}); })) {
    SummaryLine line = summary_line(arm_label(c.arms[group.front()], extra, omit), c.arms[group.front()].scale());
    for (auto a : group) {
      const ArmStats& arm = c.arms[a];
      const MeanSd& m = arm.stat("score_grad_median");
      line.points.push_back({static_cast<double>(arm.d_k()), m.median, m.min, m.max, m.n, arm.diverged_steps.size()});
      zero += m.median == 0 ? 1 : 0;
    }
    f.lines.push_back(std::move(line));
  }
  if (zero) f.notes.push_back(figure_text("zero_points", {{"points", counted(zero, "point")}}));
  return f;
}

}  // namespace

std::string step0_key(const nlohmann::json& settings) {
  nlohmann::json s = settings;
  for (const auto& key : not_at_step0()) s.erase(key);
  return s.dump();
}

SummaryFigure summary_figure(std::string name, std::string title, std::string caption, std::string x_label, Axis x,
                             std::string y_label, Axis y) {
  SummaryFigure f;
  f.name = std::move(name);
  f.title = std::move(title);
  f.caption = std::move(caption);
  f.x_label = std::move(x_label);
  f.y_label = std::move(y_label);
  f.log_x = x == Axis::log;
  f.log_y = y == Axis::log;
  return f;
}

SummaryFigure summary_figure(const std::string& name, Axis x, Axis y) {
  return summary_figure(name, figure_text(name + ".title"), figure_text(name + ".caption"),
                        figure_text(name + ".x_label"), x, figure_text(name + ".y_label"), y);
}

SummaryPoint mean_point(double x, const MeanSd& m, std::size_t n_diverged, bool bars_of_one) {
  const bool bars = m.n > 1 || bars_of_one;
  return {x, m.mean, bars ? m.mean - m.sd : kNoValue, bars ? m.mean + m.sd : kNoValue, m.n, n_diverged};
}

SummaryLine summary_line(std::string label, std::string scale) {
  return {std::move(label), std::move(scale), false, {}};
}

std::vector<SummaryFigure> summary_figures(const Comparison& c) {
  std::vector<SummaryFigure> out;
  std::set<std::size_t> d_ks;
  for (const ArmStats& arm : c.arms) d_ks.insert(arm.d_k());
  if (d_ks.size() >= 2) {
    out.push_back(
        final_loss_vs(c, "d_k", group_arms(c, [](const ArmStats& a) { return key_without(a.settings, {"d_k"}); })));
    out.push_back(step0_vs_d_k(c, true));
    out.push_back(step0_vs_d_k(c, false));
    out.push_back(score_grad_vs_d_k(c));
  }
  std::vector<std::vector<std::size_t>> lr_groups;
  for (const LrGroup& g : c.lr_groups) lr_groups.push_back(g.arms);
  if (!lr_groups.empty()) out.push_back(final_loss_vs(c, "lr", lr_groups));
  return out;
}

}  // namespace xgrad::report
