// The report of preset `lr` (its grid and question: cli/presets/lr.cpp): final loss against lr per scaling, the
// LR-sensitivity table (the lrs whose objective is within a margin of the best), and the largest attention logit
// against step at the highest lr each scaling survives (Wortsman et al. 2023, sec. 3.1-3.2).
#include <cmath>

#include "nn/optim.h"
#include "report/preset_report.h"

namespace xgrad::report::presets::lr {
namespace {

// An lr counts as usable when min(final loss, initial loss) is within this share of the chance loss of the best
// mean objective of its scaling: the model still (nearly) learned what it learned at the best lr.
constexpr double kUsableMargin = 0.1;
// The largest logit "grows" (or shrinks) over a run when its last measured value is a factor above (below) its first,
// in every seed: tolerance("logit_growth"), relative r, is the factor 1 / (1 - r).
double logit_factor() { return 1 / (1 - tolerance("logit_growth").relative); }

std::string g3(double v) { return number_or_dash(v, "{:.3g}"); }

// What the seeds say about one curve's lrs.
struct CurveFacts {
  const ArmStats* best = nullptr;  // the lowest mean lr objective
  double best_objective = kNoValue;
  std::size_t usable_all = 0;                         // lrs usable in every seed
  std::size_t usable_any = 0;                         // lrs usable in some seed (usable_all <= usable_any)
  double usable_lo = kNoValue, usable_hi = kNoValue;  // the lowest and highest lr usable in every seed
  double sensitivity = kNoValue;       // Wortsman et al.: mean over lrs of the objective minus its minimum
  double highest_survived = kNoValue;  // the highest lr at which no seed diverged
  // The highest lr with no seed diverged where the arm learned (ArmStats::learned): AdamW's updates stall, not blow up.
  const ArmStats* highest_learned = nullptr;
  std::string survival_note;  // seeds that disagree on divergence at some lr
  bool all_diverged = true;   // every run at every lr diverged: no best lr, no sensitivity
};

// One scaling's arms over the learning rates, in one panel (optimizer, d_k).
struct Curve {
  std::string scale;
  std::vector<const ArmStats*> arms;  // by increasing lr
  std::string extras;                 // LineLabels::extras: the other settings in which the curves differ
  std::string label;                  // the scaling and those extras
  CurveFacts f;
};
struct Panel {
  std::string optimizer;
  std::size_t d_k = 0;
  std::vector<Curve> curves;  // in registry order (the arms' order)
  std::string stem;           // its figures' file stem, unique among the panels
  std::string title() const { return fmt::format("{}, d_k = {}", optimizer, d_k); }
};

CurveFacts facts_of(const Comparison& c, const std::vector<const ArmStats*>& arms) {
  CurveFacts f;
  std::vector<double> objectives;
  f.best = arms.front();
  for (const ArmStats* arm : arms) {
    const double o = objectives.emplace_back(arm->stat("lr_objective").mean);
    if (std::isfinite(o) && !(o >= f.best_objective)) f.best_objective = o, f.best = arm;
    f.all_diverged = f.all_diverged && !arm->used.empty() && arm->diverged_steps.size() == arm->used.size();
  }
  f.sensitivity = lr_sensitivity(objectives);
  if (f.all_diverged) f.best_objective = f.sensitivity = kNoValue;  // every objective an initial loss: noise
  const double chance = arms.front()->settings.value("chance_loss", kNoValue), margin = kUsableMargin * chance;
  for (const ArmStats* arm : arms) {
    std::size_t usable = 0, n = 0;
    for (std::size_t r : arm->used) {
      const double o = c.stats[r]["lr_objective"];
      n += std::isfinite(o) ? 1 : 0;
      // Near the best, and below chance by the margin: nothing learned is not usable, even when so at the best lr.
      usable += std::isfinite(o) && o <= f.best_objective + margin && o < chance - margin ? 1 : 0;
    }
    if (n && usable == n) {
      ++f.usable_all;
      if (!std::isfinite(f.usable_lo)) f.usable_lo = arm->lr();
      f.usable_hi = arm->lr();
    }
    f.usable_any += usable ? 1 : 0;
    const std::size_t diverged = arm->diverged_steps.size();
    if (!arm->used.empty() && diverged == 0) {
      f.highest_survived = arm->lr();
      if (arm->learned()) f.highest_learned = arm;
    } else if (diverged && diverged < arm->used.size()) {
      f.survival_note +=
          (f.survival_note.empty() ? "" : "; ") +
          preset_text("lr.diverged_at", {{"diverged", diverged}, {"n", arm->used.size()}, {"lr", g3(arm->lr())}});
    }
  }
  return f;
}

// The arms in panels by (optimizer, d_k) and in curves by scaling and extras. A panel's file stem is
// "<optimizer>_dk<d_k>", "unknown" for an optimizer this build does not register (never a name from data in a file).
std::vector<Panel> panels_of(const Comparison& c) {
  const LineLabels labels(c, {"d_k", "scale", "optimizer", "lr"});
  std::vector<Panel> panels;
  for (const auto& [key, arms] : group_by(arm_pointers(c), [](const ArmStats* a) {
         return std::pair{a->optimizer(), a->d_k()};
       })) {
    Panel& panel = panels.emplace_back(Panel{key.first, key.second, {}, ""});
    for (auto [label, curve] : group_by(arms, [&](const ArmStats* a) { return labels(a->scale(), a->settings); })) {
      std::stable_sort(curve.begin(), curve.end(),
                       [](const ArmStats* a, const ArmStats* b) { return a->lr() < b->lr(); });
      panel.curves.push_back(
          Curve{curve.front()->scale(), curve, labels.extras(curve.front()->settings), label, facts_of(c, curve)});
    }
  }
  std::sort(panels.begin(), panels.end(), [](const Panel& a, const Panel& b) {
    return a.optimizer != b.optimizer ? a.optimizer < b.optimizer : a.d_k < b.d_k;
  });
  std::set<std::string> taken;
  for (Panel& panel : panels) {
    const bool known = Registry<nn::OptimizerEntry>::instance().find(panel.optimizer) != nullptr;
    panel.stem = unique_stem(taken, fmt::format("{}_dk{}", known ? panel.optimizer : "unknown", panel.d_k));
  }
  return panels;
}

SummaryFigure loss_figure(const Panel& panel) {
  std::vector<LinePoint> points;
  for (const Curve& curve : panel.curves)
    for (const ArmStats* arm : curve.arms) {
      points.push_back(
          {curve.label, curve.scale, mean_point(arm->lr(), arm->stat("final_loss"), arm->diverged_steps.size())});
      points.back().point.n = arm->kept.size();
    }
  return lines_figure("lr_final_loss_vs_lr_" + panel.stem, "lr.loss", Axis::log, Axis::log, points,
                      {{"panel", panel.title()}});
}

// "3 of 7 (0.001 to 0.01)"
std::string usable_text(const CurveFacts& f, std::size_t n_lrs) {
  const std::size_t more = f.usable_any - f.usable_all;
  return preset_text("lr.usable_cell", {{"all", f.usable_all}, {"n", n_lrs}}) +
         (f.usable_all ? preset_text("lr.usable_range", {{"lo", g3(f.usable_lo)}, {"hi", g3(f.usable_hi)}}) : "") +
         (more ? preset_text("lr.usable_cell_more", {{"count", more}}) : "");
}

// A curve's usable lrs against those of unscaled attention of its panel and extras, decided only when every seed
// agrees: the fewest lrs one side may have (usable in every seed) against the most the other may have (in some seed).
std::string against_reference(const Panel& panel, const Curve& curve) {
  const auto ref = std::find_if(panel.curves.begin(), panel.curves.end(), [&](const Curve& other) {
    return other.extras == curve.extras && is_reference_scale(other.scale);
  });
  if (ref == panel.curves.end()) return preset_text("lr.no_reference");
  const CurveFacts &f = curve.f, &rf = ref->f;
  const bool here = f.usable_all != f.usable_any, there = rf.usable_all != rf.usable_any;
  if (&*ref == &curve) return "—";
  if (curve.arms.size() != ref->arms.size()) return preset_text("lr.other_lrs");
  if (f.usable_all > rf.usable_any) return preset_text("lr.wider", {{"this", f.usable_all}, {"ref", rf.usable_any}});
  if (f.usable_any < rf.usable_all) return preset_text("lr.narrower", {{"this", f.usable_any}, {"ref", rf.usable_all}});
  if (!here && !there) return preset_text("lr.same");
  return preset_text("lr.seeds_disagree", {{"who", here && there ? curve.scale + " and of none"
                                                   : here        ? curve.scale
                                                                 : "none"}});
}

Table sensitivity_table(const std::vector<Panel>& panels) {
  Table t = preset_table("lr.table_header");
  for (const Panel& panel : panels)
    for (const Curve& curve : panel.curves) {
      const CurveFacts& f = curve.f;
      const MeanSd& objective = f.best->stat("lr_objective");
      t.rows.push_back({panel.optimizer, std::to_string(panel.d_k), curve.label,
                        f.all_diverged ? "—" : g3(f.best->lr()),
                        f.all_diverged ? "every run diverged"
                                       : g3(f.best_objective) + (objective.n > 1 ? " ± " + g3(objective.sd) : ""),
                        usable_text(f, curve.arms.size()), against_reference(panel, curve), g3(f.sensitivity),
                        std::isfinite(f.highest_survived) ? g3(f.highest_survived) : "none",
                        f.highest_learned ? g3(f.highest_learned->lr()) : "none"});
    }
  return t;
}

// How the largest logit of the kept runs of one arm moves from the first logged step to the last: the last value
// against the first, run by run; `last_sum` gets the sum of the measured runs' last values.
Verdict logit_trend(const Comparison& c, const ArmStats& arm, double& last_sum) {
  std::map<nlohmann::json, double> first, last;
  for (std::size_t r : arm.kept) {
    const double first_value = c.stats[r]["max_logit_first"];
    if (!std::isfinite(first_value) || !(first_value > 0)) continue;
    first[r] = first_value;
    last_sum += last[r] = c.stats[r]["max_logit_last"];
  }
  return compare_values(last, first, Better::higher, tolerance("logit_growth"));
}

// One curve's row of the logit table, and its line of the logit figure at the highest lr it survives.
std::vector<std::string> logit_row(const Comparison& c, const Panel& panel, const Curve& curve,
                                   std::vector<LinePoint>& points) {
  const ArmStats* arm = curve.f.highest_learned;
  const char* why = curve.f.all_diverged                      ? "lr.why_all_diverged"
                    : std::isfinite(curve.f.highest_survived) ? "lr.why_not_learned"
                                                              : "lr.why_diverged";
  const std::string note = curve.f.survival_note.empty() ? "—" : curve.f.survival_note;
  std::vector<std::string> row{
      panel.optimizer, std::to_string(panel.d_k), curve.label, "none", preset_text(why), "—", note};
  if (!arm) return row;
  row[3] = g3(arm->lr()) + (arm == curve.arms.back() ? " (the highest tried)" : "");
  double last_sum = 0;
  const Verdict v = logit_trend(c, *arm, last_sum);
  add_line(points, fmt::format("{} lr={}", curve.label, g3(arm->lr())), curve.scale,
           logit_points(c, arm->kept, v.n_shared));
  row[4] = preset_text("lr.trend_" + Tally(v).agreement(), Tally(v).fields({{"factor", logit_factor()}}));
  if (v.n_shared) row[5] = preset_text("lr.ending", {{"value", g3(last_sum / v.n_shared)}, {"n", v.n_shared}});
  return row;
}

std::vector<PresetSection> report(const PresetInput& in) {
  const std::vector<Panel> panels = panels_of(in.comparison);
  PresetSection loss = preset_section("lr-final-loss");
  PresetSection table =
      preset_section("lr-sensitivity-table", preset_text("lr.table_legend", {{"m", kUsableMargin}}) + "\n\n" +
                                                 sensitivity_table(panels).markdown() + "\n");
  PresetSection logits = preset_section("lr-max-logit");
  Table survived = preset_table("lr.logit_header");
  for (const Panel& panel : panels) {
    loss.figures.push_back(loss_figure(panel));
    std::vector<LinePoint> points;
    for (const Curve& curve : panel.curves) survived.rows.push_back(logit_row(in.comparison, panel, curve, points));
    logits.figures.push_back(lines_figure("lr_max_logit_vs_step_" + panel.stem, "lr.logit", Axis::linear, Axis::log,
                                          points, {{"panel", panel.title()}}));
    logits.figures.back().tabulate = false;
  }
  logits.markdown = preset_text("lr.logit_legend") + "\n\n" + survived.markdown() + "\n";
  return {loss, table, logits};
}

const Registration<PresetReport> lr_registration{PresetReport{"lr", 10, report}};

}  // namespace
}  // namespace xgrad::report::presets::lr
