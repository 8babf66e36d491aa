#include "report/summary.h"

#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "report/probe.h"
#include "report/tables.h"
#include "train/config.h"
#include "train/settings.h"

namespace xgrad::report {

namespace {

// The settings that cannot change the model or the batch at step 0: what `xgrad probe` refuses (it trains nothing)
// and the optimizer with its own settings.
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

// Label parts every arm shares are left out ("adamw" when every arm uses AdamW).
std::vector<std::string> shared_parts(const std::vector<ArmStats>& arms, std::vector<std::string> omit) {
  for (const std::string key : {"scale", "optimizer", "lr"}) {
    bool same = true;
    for (const ArmStats& arm : arms)
      same = same && setting_text(arm.settings, key) == setting_text(arms[0].settings, key);
    if (same && key != "scale") omit.push_back(key);
  }
  return omit;
}

// Arms grouped by `key` (first appearance order, which is analyse_runs' order), each group's arms by d_k.
template <class Key>
std::vector<std::vector<std::size_t>> group_arms(const Comparison& c, Key key) {
  std::map<std::string, std::size_t> index;
  std::vector<std::vector<std::size_t>> groups;
  for (std::size_t a = 0; a < c.arms.size(); ++a) {
    const auto [it, inserted] = index.emplace(key(c.arms[a]), groups.size());
    if (inserted) groups.emplace_back();
    groups[it->second].push_back(a);
  }
  return groups;
}

std::size_t distinct_d_k(const Comparison& c) {
  std::set<std::size_t> d_ks;
  for (const ArmStats& arm : c.arms) d_ks.insert(arm.d_k());
  return d_ks.size();
}

SummaryPoint mean_point(double x, const MeanSd& m, std::size_t n_diverged) {
  SummaryPoint p;
  p.x = x;
  p.n = m.n;
  p.n_diverged = n_diverged;
  if (m.n == 0) return p;
  p.y = m.mean;
  p.lo = m.mean - m.sd;
  p.hi = m.mean + m.sd;
  return p;
}

SummaryFigure final_loss_vs_d_k(const Comparison& c) {
  SummaryFigure f = summary_figure(
      "final_loss_vs_d_k", "Final loss against d_k, mean ± sd over seeds",
      "Final loss (mean training loss over the last 20 steps) against d_k on a log2 axis, one line per arm "
      "without d_k (scaling, optimizer, learning rate); the point is the mean over the arm's seeds, the error "
      "bar ± their sample standard deviation. Diverged runs are left out and counted in the table",
      "d_k (log2 scale)", Axis::log, "final loss (nats)", Axis::linear);
  const auto extra = distinguishing_keys(c.arms);
  const auto omit = shared_parts(c.arms, {"d_k"});
  for (const auto& group : group_arms(c, [](const ArmStats& a) { return key_without(a.settings, {"d_k"}); })) {
    SummaryLine line = summary_line(arm_label(c.arms[group.front()], extra, omit), c.arms[group.front()].scale());
    for (auto a : group) {
      const ArmStats& arm = c.arms[a];
      line.points.push_back(
          mean_point(static_cast<double>(arm.d_k()), arm.stat("final_loss"), arm.diverged_steps.size()));
      if (arm.stat("final_loss").n == 0 && !arm.diverged_steps.empty())
        f.notes.push_back(fmt::format("{} at d_k={}: every run diverged, no point", line.label, arm.d_k()));
    }
    f.lines.push_back(std::move(line));
  }
  return f;
}

// Entropy or score std at step 0: the kept runs of each step-0 group at each d_k that measured attention at step 0.
SummaryFigure step0_vs_d_k(const Comparison& c, bool entropy) {
  SummaryFigure f = summary_figure(
      entropy ? "entropy_step0_vs_d_k" : "score_std_step0_vs_d_k",
      entropy ? "Attention entropy at step 0 against d_k" : "Attention score std at step 0 against d_k",
      std::string(entropy ? "Mean attention entropy (nats) of the first layer"
                          : "Standard deviation of the first layer's attention scores after the scaling") +
          " at step 0 against d_k on a log2 axis, one line per scaling (and any other setting that changes the "
          "weights at step 0; optimizer and learning rate do not), mean ± sd over the runs that measured "
          "attention at step 0 (diverged runs left out)" +
          (entropy ? ""
                   : "; dashed: the theory std = sqrt(d_k)·std(q)·std(k) times the scaling's multiplier "
                     "(Vaswani et al. 2017, footnote 4), with std(q) and std(k) measured by `xgrad probe` on "
                     "the first run's weights and batch"),
      "d_k (log2 scale)", Axis::log, entropy ? "entropy at step 0 (nats)" : "score std at step 0 (log scale)",
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
    SummaryLine line, theory;
    line.label = arm_label(c.arms[group.front()], extra_step0, {"d_k", "optimizer", "lr"});
    line.scale = c.arms[group.front()].scale();
    theory.label = line.label + ": theory";
    theory.scale = line.scale;
    theory.theory = true;
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
      line.points.push_back(mean_point(static_cast<double>(d_k), mean_sd(values), diverged_at[d_k]));
      if (entropy || runs.empty()) continue;
      // The theory on the weights and batch the first run started from.
      const RunRecord& run = c.runs[runs.front()];
      try {
        const train::TrainConfig config = train::TrainConfig::from_json(run.config, run.dir + "/config.json");
        const std::vector<ProbeRow> rows = probe(config, {d_k}, {config.model.scale});
        SummaryPoint p;
        p.x = static_cast<double>(d_k);
        p.y = rows.front().theory_std;
        p.n = 1;
        theory.points.push_back(p);
      } catch (const std::exception& e) {
        no_theory_d_k.push_back(std::to_string(d_k));
        if (no_theory_reason.empty()) no_theory_reason = e.what();
      }
    }
    if (!no_theory_d_k.empty())
      no_theory.push_back(
          fmt::format("{} at d_k={} ({})", line.label, fmt::join(no_theory_d_k, ", "), no_theory_reason));
    f.lines.push_back(std::move(line));
    if (!theory.points.empty()) f.lines.push_back(std::move(theory));
  }
  if (!no_theory.empty()) f.notes.push_back(fmt::format("no theory point for {}", fmt::join(no_theory, "; ")));
  if (not_measured)
    f.notes.push_back(fmt::format("{} run{} did not measure attention at step 0 and {} left out", not_measured,
                                  not_measured == 1 ? "" : "s", not_measured == 1 ? "is" : "are"));
  return f;
}

SummaryFigure score_grad_vs_d_k(const Comparison& c) {
  SummaryFigure f = summary_figure(
      "score_grad_vs_d_k", "Median per-query score gradient against d_k",
      "The gradient that reaches a typical query: per run, the median over logged steps of "
      "attn/l0h*/score_grad_median (the median over queries of ‖dLoss/d(score row)‖, first layer, mean over "
      "heads); the point is the median over the arm's seeds, the error bar their min and max; log2 x, log y. "
      "One line per arm without d_k; diverged runs left out. A saturated softmax passes almost no gradient "
      "to its scores, but a run that solved the task has tiny values too, as its loss is near zero: the findings "
      "give the gradient relative to the loss before the loss threshold, which tells the two apart",
      "d_k (log2 scale)", Axis::log, "median ‖dLoss/d(score row)‖ (log scale)", Axis::log);
  f.error_bar_sd = false;
  const auto extra = distinguishing_keys(c.arms);
  const auto omit = shared_parts(c.arms, {"d_k"});
  std::size_t zero = 0;
  for (const auto& group : group_arms(c, [](const ArmStats& a) { return key_without(a.settings, {"d_k"}); })) {
    SummaryLine line = summary_line(arm_label(c.arms[group.front()], extra, omit), c.arms[group.front()].scale());
    for (auto a : group) {
      const ArmStats& arm = c.arms[a];
      SummaryPoint p;
      p.x = static_cast<double>(arm.d_k());
      p.y = arm.stat("score_grad_median").median;
      p.lo = arm.stat("score_grad_median").min;
      p.hi = arm.stat("score_grad_median").max;
      p.n = arm.stat("score_grad_median").n;
      p.n_diverged = arm.diverged_steps.size();
      if (p.y == 0) ++zero;
      line.points.push_back(p);
    }
    f.lines.push_back(std::move(line));
  }
  if (zero)
    f.notes.push_back(
        fmt::format("{} point{} exactly 0 (every measured query fully saturated) and cannot be drawn "
                    "on the log axis",
                    zero, zero == 1 ? " is" : "s are"));
  return f;
}

SummaryFigure final_loss_vs_lr(const Comparison& c) {
  SummaryFigure f = summary_figure(
      "final_loss_vs_lr", "Final loss against learning rate, mean ± sd over seeds",
      "Final loss against the learning rate on a log axis, one line per group of arms that differ only in "
      "learning rate (Wortsman et al. 2023, \"Small-scale proxies for large-scale Transformer training "
      "instabilities\": a flatter line is less sensitive to the learning rate); mean ± sd over seeds, "
      "diverged runs left out (a learning rate where every run diverged has no point)",
      "learning rate (log scale)", Axis::log, "final loss (nats)", Axis::linear);
  const auto extra = distinguishing_keys(c.arms);
  const auto omit = shared_parts(c.arms, {"lr"});
  for (const LrGroup& g : c.lr_groups) {
    SummaryLine line = summary_line(arm_label(c.arms[g.arms.front()], extra, omit), c.arms[g.arms.front()].scale());
    for (auto a : g.arms) {
      const ArmStats& arm = c.arms[a];
      line.points.push_back(mean_point(arm.lr(), arm.stat("final_loss"), arm.diverged_steps.size()));
      if (arm.stat("final_loss").n == 0 && !arm.diverged_steps.empty())
        f.notes.push_back(
            fmt::format("{} at lr={}: every run diverged, no point", line.label, setting_text(arm.settings, "lr")));
    }
    f.lines.push_back(std::move(line));
  }
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

SummaryLine summary_line(std::string label, std::string scale) {
  SummaryLine line;
  line.label = std::move(label);
  line.scale = std::move(scale);
  return line;
}

std::vector<SummaryFigure> summary_figures(const Comparison& c) {
  std::vector<SummaryFigure> out;
  if (distinct_d_k(c) >= 2) {
    out.push_back(final_loss_vs_d_k(c));
    out.push_back(step0_vs_d_k(c, true));
    out.push_back(step0_vs_d_k(c, false));
    out.push_back(score_grad_vs_d_k(c));
  }
  if (!c.lr_groups.empty()) out.push_back(final_loss_vs_lr(c));
  return out;
}

}  // namespace xgrad::report
