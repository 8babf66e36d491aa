// The report of preset `lr` (its grid and question: cli/presets/lr.cpp): final loss against lr per scaling, the
// LR-sensitivity table (the lrs whose objective is within a margin of the best), and the largest attention logit
// against step at the highest lr each scaling survives (Wortsman et al. 2023, sec. 3.1-3.2).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/file_name.h"
#include "common/registry.h"
#include "nn/optim.h"
#include "report/claims.h"
#include "report/preset_report.h"
#include "report/tables.h"

namespace xgrad::report::presets::lr {
namespace {

// An lr counts as usable when min(final loss, initial loss) is within this share of the chance loss of the best
// mean objective of its scaling: the model still (nearly) learned what it learned at the best lr.
constexpr double kUsableMargin = 0.1;
// The largest logit "grows" (or shrinks) over a run when its last measured value is a factor above (below) its first,
// in every seed: tolerance("logit_growth"), relative r, is the factor 1 / (1 - r).
double logit_factor() { return 1 / (1 - tolerance("logit_growth").relative); }

std::string g3(double v) { return std::isfinite(v) ? fmt::format("{:.3g}", v) : "—"; }

// One scaling's arms over the learning rates, in one panel (optimizer, d_k).
struct Curve {
  std::string scale;
  std::vector<std::size_t> arms;  // by increasing lr
  std::string extras;             // LineLabels::extras: the other settings in which the curves differ
  std::string label;              // the scaling and those extras
};
struct Panel {
  std::string optimizer;
  std::size_t d_k = 0;
  std::vector<Curve> curves;  // in registry order (the arms' order)
  std::string stem;           // its figures' file stem, unique among the panels (panel_stems)
  std::string title() const { return fmt::format("{}, d_k = {}", optimizer, d_k); }
  std::string shown() const { return markdown_escape(title()); }  // the title in report.md's text
};

// Each panel's file stem, "<optimizer>_dk<d_k>". An optimizer this build does not register (a run from another
// build, or a config.json written to attack) is "unknown" there: its name is shown, escaped, in titles and text, but
// never becomes part of a file name or a command. Unknown ones of one d_k are numbered apart.
void panel_stems(std::vector<Panel>& panels) {
  std::set<std::string> taken;
  for (Panel& panel : panels) {
    const bool known = Registry<nn::OptimizerEntry>::instance().find(panel.optimizer) != nullptr;
    const std::string base = safe_file_stem(fmt::format("{}_dk{}", known ? panel.optimizer : "unknown", panel.d_k));
    panel.stem = base;
    for (int k = 2; !taken.insert(panel.stem).second; ++k) panel.stem = fmt::format("{}-{}", base, k);
  }
}

// The arms grouped into panels by (optimizer, d_k) and curves by scaling, from the groups of arms that differ only
// in lr (an arm alone at its settings is a curve of one point).
std::vector<Panel> panels_of(const Comparison& c) {
  const report::LineLabels labels(c, {"d_k", "scale", "optimizer", "lr"});
  std::vector<Panel> panels;
  std::set<std::size_t> grouped;
  std::vector<std::vector<std::size_t>> groups;
  for (const auto& g : c.lr_groups) {
    groups.push_back(g.arms);
    grouped.insert(g.arms.begin(), g.arms.end());
  }
  for (std::size_t a = 0; a < c.arms.size(); ++a)
    if (!grouped.count(a)) groups.push_back({a});
  std::sort(groups.begin(), groups.end(), [&](const auto& x, const auto& y) { return x.front() < y.front(); });
  for (const auto& g : groups) {
    const ArmStats& first = c.arms[g.front()];
    auto panel = std::find_if(panels.begin(), panels.end(),
                              [&](const Panel& p) { return p.optimizer == first.optimizer() && p.d_k == first.d_k(); });
    if (panel == panels.end()) {
      panels.push_back(Panel{first.optimizer(), first.d_k(), {}, ""});
      panel = panels.end() - 1;
    }
    panel->curves.push_back(
        Curve{first.scale(), g, labels.extras(first.settings), labels(first.scale(), first.settings)});
  }
  std::sort(panels.begin(), panels.end(), [](const Panel& a, const Panel& b) {
    return a.optimizer != b.optimizer ? a.optimizer < b.optimizer : a.d_k < b.d_k;
  });
  panel_stems(panels);
  return panels;
}

// What the seeds say about one curve's lrs.
struct CurveFacts {
  std::size_t best = 0;  // index into curve.arms: the lowest mean lr objective
  double best_objective = kNoValue;
  double margin = kNoValue;                           // kUsableMargin x the chance loss
  std::size_t usable_all = 0;                         // lrs usable in every seed
  std::size_t usable_any = 0;                         // lrs usable in some seed (usable_all <= usable_any)
  double usable_lo = kNoValue, usable_hi = kNoValue;  // the lowest and highest lr usable in every seed
  double sensitivity = kNoValue;       // Wortsman et al.: mean over lrs of the objective minus its minimum
  double highest_survived = kNoValue;  // the highest lr at which no seed diverged
  bool survived_any = false;
  // The highest lr the scaling survives: no seed diverged and the arm learned (ArmStats::learned: mean final loss
  // below the chance loss by more than the seed sd and 2%). A run whose loss stays at chance did not diverge, but its
  // training failed all the same (AdamW's normalised updates rarely blow up; they stall).
  double highest_learned = kNoValue;
  std::size_t highest_learned_arm = 0;
  bool learned_any = false;
  std::string survival_note;  // seeds that disagree on divergence at some lr
  bool all_diverged = false;  // every run at every lr diverged: no best lr, no sensitivity
};

CurveFacts facts_of(const Comparison& c, const Curve& curve) {
  CurveFacts f;
  std::vector<double> objectives;
  for (std::size_t i = 0; i < curve.arms.size(); ++i) {
    const double o = c.arms[curve.arms[i]].stat("lr_objective").mean;
    objectives.push_back(o);
    if (std::isfinite(o) && !(o >= f.best_objective)) {
      f.best_objective = o;
      f.best = i;
    }
  }
  f.sensitivity = report::lr_sensitivity(objectives);
  f.all_diverged = true;
  for (std::size_t a : curve.arms) {
    const ArmStats& arm = c.arms[a];
    f.all_diverged = f.all_diverged && !arm.used.empty() && arm.diverged_steps.size() == arm.used.size();
  }
  if (f.all_diverged) {  // the objective is every run's initial loss: the "best" of them is noise
    f.best_objective = kNoValue;
    f.sensitivity = kNoValue;
  }
  const double chance = c.arms[curve.arms.front()].settings.value("chance_loss", kNoValue);
  f.margin = kUsableMargin * chance;
  for (std::size_t i = 0; i < curve.arms.size(); ++i) {
    const ArmStats& arm = c.arms[curve.arms[i]];
    std::size_t usable = 0, n = 0;
    for (std::size_t r : arm.used) {
      const double o = c.stats[r]["lr_objective"];
      if (!std::isfinite(o)) continue;
      ++n;
      // Near the best, and below chance by the margin: an lr where nothing was learned is not usable, even when
      // nothing was learned at the best one either.
      usable += o <= f.best_objective + f.margin && o < chance - f.margin ? 1 : 0;
    }
    if (n && usable == n) {
      ++f.usable_all;
      if (!std::isfinite(f.usable_lo)) f.usable_lo = arm.lr();
      f.usable_hi = arm.lr();
    }
    if (usable) ++f.usable_any;
    const std::size_t diverged = arm.diverged_steps.size();
    if (!arm.used.empty() && diverged == 0) {
      f.highest_survived = arm.lr();
      f.survived_any = true;
      if (arm.learned()) {
        f.highest_learned = arm.lr();
        f.highest_learned_arm = curve.arms[i];
        f.learned_any = true;
      }
    } else if (diverged && diverged < arm.used.size()) {
      f.survival_note += fmt::format("{}{} of {} seeds diverged at lr {}", f.survival_note.empty() ? "" : "; ",
                                     diverged, arm.used.size(), g3(arm.lr()));
    }
  }
  return f;
}

// Final loss against lr, one figure per panel.
SummaryFigure loss_figure(const Comparison& c, const Panel& panel) {
  SummaryFigure f = summary_figure(
      "lr_final_loss_vs_lr_" + panel.stem, "Final loss against learning rate, " + panel.title(),
      "Mean final loss (last 20 steps) over the seeds that did not diverge, error bars ± their sample sd; a "
      "point whose every seed diverged is not drawn and says \"diverged\" in the table",
      "learning rate", Axis::log, "final loss (nats)", Axis::log);
  for (const Curve& curve : panel.curves) {
    SummaryLine line = summary_line(curve.label, curve.scale);
    for (std::size_t a : curve.arms) {
      const ArmStats& arm = c.arms[a];
      line.points.push_back(mean_point(arm.lr(), arm.stat("final_loss"), arm.diverged_steps.size()));
      line.points.back().n = arm.kept.size();
    }
    f.lines.push_back(line);
  }
  return f;
}

// "3 of 7 (0.001 to 0.01)"
std::string usable_text(const CurveFacts& f, std::size_t n_lrs) {
  std::string s = fmt::format("{} of {}", f.usable_all, n_lrs);
  if (f.usable_all) s += fmt::format(" ({} to {})", g3(f.usable_lo), g3(f.usable_hi));
  if (f.usable_any > f.usable_all) s += fmt::format("; {} more in some seeds only", f.usable_any - f.usable_all);
  return s;
}

// The reference scaling's curve of a panel (the unscaled one) with the given extras, or null.
const Curve* reference_curve(const Panel& panel, const std::string& extras) {
  for (const Curve& curve : panel.curves)
    if (curve.extras == extras && report::is_reference_scale(curve.scale)) return &curve;
  return nullptr;
}

// The extras of a panel's curves, in their order, each once.
std::vector<std::string> extras_of(const Panel& panel) {
  std::vector<std::string> out;
  for (const Curve& curve : panel.curves)
    if (std::find(out.begin(), out.end(), curve.extras) == out.end()) out.push_back(curve.extras);
  return out;
}

// One panel's sentence of the final-loss section: each scaling's lowest mean final loss, or that it diverged.
std::string best_loss_line(const Comparison& c, const Panel& panel) {
  std::vector<std::string> best, diverged;
  for (const Curve& curve : panel.curves) {
    const CurveFacts f = facts_of(c, curve);
    if (std::isfinite(f.best_objective))
      best.push_back(fmt::format("{} at lr {} ({})", curve.label, g3(c.arms[curve.arms[f.best]].lr()),
                                 g3(c.arms[curve.arms[f.best]].stat("final_loss").mean)));
    else if (f.all_diverged)
      diverged.push_back(curve.label);
  }
  std::string line = "- " + panel.shown() + ": ";
  if (!best.empty()) line += fmt::format("the lowest mean final loss of each scaling: {}", fmt::join(best, "; "));
  if (!diverged.empty())
    line += (best.empty() ? "" : "; ") + fmt::format("every run diverged with {}", report::join_and(diverged));
  if (best.empty() && diverged.empty()) line += "no run measured";
  return line + ".\n";
}

report::PresetSection loss_section(const Comparison& c, const std::vector<Panel>& panels) {
  report::PresetSection loss;
  loss.anchor = "lr-final-loss";
  loss.title = "Final loss against learning rate, per scaling";
  for (const Panel& panel : panels) loss.figures.push_back(loss_figure(c, panel));
  for (const Panel& panel : panels) loss.markdown += best_loss_line(c, panel);
  return loss;
}

// The LR-sensitivity table: a row per curve of every panel.
report::Table sensitivity_table(const Comparison& c, const std::vector<Panel>& panels) {
  report::Table t;
  t.header = {"optimizer",
              "d_k",
              "scaling",
              "best lr",
              "best objective",
              "usable lrs",
              "LR sensitivity",
              "highest lr without divergence",
              "highest lr that learned"};
  for (const Panel& panel : panels)
    for (const Curve& curve : panel.curves) {
      const CurveFacts f = facts_of(c, curve);
      const ArmStats& best = c.arms[curve.arms[f.best]];
      if (f.all_diverged) {
        t.rows.push_back({panel.optimizer, std::to_string(panel.d_k), curve.label, "—", "every run diverged",
                          usable_text(f, curve.arms.size()), "—", "none", "none"});
        continue;
      }
      t.rows.push_back(
          {panel.optimizer, std::to_string(panel.d_k), curve.label, g3(best.lr()),
           g3(f.best_objective) + (best.stat("lr_objective").n > 1 ? " ± " + g3(best.stat("lr_objective").sd) : ""),
           usable_text(f, curve.arms.size()), g3(f.sensitivity), f.survived_any ? g3(f.highest_survived) : "none",
           f.learned_any ? g3(f.highest_learned) : "none"});
    }
  return t;
}

// The sentence comparing the usable lrs of the curves of `panel` with `extras` against unscaled attention's.
std::string usable_line(const Comparison& c, const Panel& panel, const std::string& extras) {
  const std::string where = panel.shown() + (extras.empty() ? "" : ", " + extras);
  const Curve* ref = reference_curve(panel, extras);
  if (!ref) return "- " + where + ": no unscaled (`none`) curve to compare the scalings with.\n";
  const CurveFacts rf = facts_of(c, *ref);
  std::vector<std::string> wider, narrower, same, undecided;
  for (const Curve& curve : panel.curves) {
    if (&curve == ref || curve.extras != extras) continue;
    const CurveFacts f = facts_of(c, curve);
    if (curve.arms.size() != ref->arms.size()) {
      undecided.push_back(curve.scale + " (other lrs than none's)");
    } else if (f.usable_all > rf.usable_any) {
      wider.push_back(fmt::format("{} ({} vs {})", curve.scale, f.usable_all, rf.usable_any));
    } else if (f.usable_any < rf.usable_all) {
      narrower.push_back(fmt::format("{} ({} vs {})", curve.scale, f.usable_any, rf.usable_all));
    } else if (f.usable_all == f.usable_any && rf.usable_all == rf.usable_any) {
      same.push_back(curve.scale);
    } else {
      const bool here = f.usable_all != f.usable_any, there = rf.usable_all != rf.usable_any;
      undecided.push_back(fmt::format("{} (the seeds of {} disagree at some lr)", curve.scale,
                                      here && there ? curve.scale + " and of none"
                                      : here        ? curve.scale
                                                    : "none"));
    }
  }
  std::string line = fmt::format(
      "- {}: unscaled attention has {} of {} lrs usable in every seed{}.", where, rf.usable_all, ref->arms.size(),
      rf.usable_any > rf.usable_all ? fmt::format(" ({} more in some seeds)", rf.usable_any - rf.usable_all) : "");
  // Decided only when every seed agrees: the fewest lrs one side may have (usable in every seed) against the most
  // the other may have (usable in some seed), the counts shown in that order.
  if (!wider.empty())
    line +=
        fmt::format(" More usable lrs than unscaled (usable in every seed, against unscaled's usable in any seed): {}.",
                    fmt::join(wider, ", "));
  if (!narrower.empty())
    line += fmt::format(
        " Fewer usable lrs than unscaled (usable in any seed, against unscaled's usable in every seed): {}.",
        fmt::join(narrower, ", "));
  if (!same.empty()) line += fmt::format(" As many as unscaled: {}.", fmt::join(same, ", "));
  if (!undecided.empty()) line += fmt::format(" Not decided: {}.", fmt::join(undecided, ", "));
  return line + "\n";
}

report::PresetSection sensitivity_section(const Comparison& c, const std::vector<Panel>& panels) {
  report::PresetSection table;
  table.anchor = "lr-sensitivity-table";
  table.title = "LR sensitivity per scaling";
  const report::Table t = sensitivity_table(c, panels);
  table.markdown = fmt::format(
      "The objective of a run is min(final loss, initial loss), a diverged run counting as its initial loss (Wortsman "
      "et al. 2023, sec. 3.2). *best objective*: the lowest mean over seeds, ± its seed sd. *usable lrs*: the learning "
      "rates at which every seed's objective is within m = {:g} x the chance loss (ln(n_values), a uniform guess among "
      "the values) of that best and below the chance loss by m (it learned something); lrs usable in some seeds only "
      "are counted apart. *LR sensitivity*: the mean over the lrs of the mean objective "
      "minus the best (0: every lr as good as the best). *highest lr without divergence*: no seed diverged there. "
      "*highest "
      "lr that learned*: no seed diverged there and the mean final loss is below the chance loss by more than the seed "
      "sd and 2% (the lr the scaling survives, below).\n\n",
      kUsableMargin);
  table.markdown += t.markdown() + "\n";
  for (const Panel& panel : panels)
    for (const std::string& extras : extras_of(panel)) table.markdown += usable_line(c, panel, extras);
  return table;
}

// How the largest logit of the kept runs of one arm moves from the first logged step to the last.
struct LogitTrend {
  std::map<double, std::pair<double, std::size_t>> by_step;  // step -> (sum, n)
  std::size_t grows = 0, shrinks = 0, flat = 0, measured = 0;
  double last_mean = 0;  // the sum of the measured runs' last values
};

LogitTrend logit_trend(const Comparison& c, const ArmStats& arm) {
  LogitTrend tr;
  for (std::size_t r : arm.kept) {
    const RunSeries& series = c.runs[r].series;
    for (std::size_t i = 0; i < series.max_logit.size(); ++i)
      if (std::isfinite(series.max_logit[i])) {
        tr.by_step[series.step[i]].first += series.max_logit[i];
        tr.by_step[series.step[i]].second += 1;
      }
    const double first = c.stats[r]["max_logit_first"], last = c.stats[r]["max_logit_last"];
    if (!std::isfinite(first) || !(first > 0)) continue;
    ++tr.measured;
    tr.last_mean += last;
    const Verdict v = compare_values({{r, last}}, {{r, first}}, Better::higher, tolerance("logit_growth"));
    tr.grows += v.seeds_better;
    tr.shrinks += v.seeds_worse;
    tr.flat += v.seeds_same;
  }
  return tr;
}

std::string trend_text(const LogitTrend& tr) {
  const std::size_t grows = tr.grows, shrinks = tr.shrinks, flat = tr.flat, measured = tr.measured;
  std::string trend;
  if (measured == 0)
    trend = "no attention logit measured";
  else if (grows == measured)
    trend = fmt::format("the largest logit grows by more than {:g}x in every seed", logit_factor());
  else if (shrinks == measured)
    trend = fmt::format("the largest logit shrinks by more than {:g}x in every seed", logit_factor());
  else if (flat == measured)
    trend = fmt::format("the largest logit stays within {:g}x of its start in every seed", logit_factor());
  else
    trend = fmt::format(
        "not decided whether the largest logit grows (seeds disagree: {} grow, {} shrink, {} "
        "stay within {:g}x)",
        grows, shrinks, flat, logit_factor());
  return trend;
}

// One curve's line of the logit figure `f` (at the highest lr it survives) and its sentence.
std::string logit_sentence(const Comparison& c, const Curve& curve, SummaryFigure& f) {
  const CurveFacts facts = facts_of(c, curve);
  if (!facts.learned_any) {
    return fmt::format("{}: no learning rate survives ({})", curve.label,
                       facts.all_diverged   ? "every run diverged"
                       : facts.survived_any ? "at no learning rate did it learn without diverging"
                                            : "some seed diverged at every lr");
  }
  const ArmStats& arm = c.arms[facts.highest_learned_arm];
  const LogitTrend tr = logit_trend(c, arm);
  const std::size_t measured = tr.measured;
  SummaryLine line = summary_line(fmt::format("{} lr={}", curve.label, g3(arm.lr())), curve.scale);
  for (const auto& [step, sum_n] : tr.by_step)
    if (sum_n.second == measured)
      line.points.push_back(SummaryPoint{step, sum_n.first / sum_n.second, kNoValue, kNoValue, sum_n.second, 0});
  f.lines.push_back(line);
  const std::string trend = trend_text(tr);
  std::string s = fmt::format("{}: highest lr survived {}{}; there {}", curve.label, g3(arm.lr()),
                              facts.highest_learned_arm == curve.arms.back() ? " (the highest tried)" : "", trend);
  if (measured) s += fmt::format(", ending at {} (mean over {} seeds)", g3(tr.last_mean / measured), measured);
  if (!facts.survival_note.empty()) s += "; seeds disagree on divergence: " + facts.survival_note;
  return s;
}

report::PresetSection logit_section(const Comparison& c, const std::vector<Panel>& panels) {
  report::PresetSection logits;
  logits.anchor = "lr-max-logit";
  logits.title = "Largest attention logit against step, at the highest lr each scaling survives";
  logits.markdown =
      "A scaling *survives* an lr when no seed diverged there and the arm learned (mean final loss below "
      "the chance loss by more than the seed sd and 2%): a run stuck at the chance loss did not diverge, "
      "but its training failed. The largest logit is the largest |scaled score| over every layer and "
      "head at a logged step (metrics.csv attn/l*h*/score_max_abs).\n\n";
  for (const Panel& panel : panels) {
    SummaryFigure f = summary_figure(
        "lr_max_logit_vs_step_" + panel.stem, "Largest attention logit at the highest surviving lr, " + panel.title(),
        "Per logged step, the largest |scaled score| over every layer and head (metrics.csv "
        "attn/l*h*/score_max_abs), mean over the seeds, at the highest lr the scaling survives (no seed "
        "diverged and it learned; the lr is in the legend)",
        "step", Axis::linear, "largest attention logit", Axis::log);
    f.tabulate = false;
    std::vector<std::string> sentences;
    for (const Curve& curve : panel.curves) sentences.push_back(logit_sentence(c, curve, f));
    logits.figures.push_back(f);
    logits.markdown += "**" + panel.shown() + ".** " + fmt::format("{}", fmt::join(sentences, ". ")) + ".\n\n";
  }
  return logits;
}

std::vector<report::PresetSection> report(const report::PresetInput& in) {
  const Comparison& c = in.comparison;
  const std::vector<Panel> panels = panels_of(c);
  std::vector<report::PresetSection> sections;
  sections.push_back(loss_section(c, panels));
  sections.push_back(sensitivity_section(c, panels));
  sections.push_back(logit_section(c, panels));
  return sections;
}

const Registration<PresetReport> lr_registration{PresetReport{"lr", 10, report}};

}  // namespace
}  // namespace xgrad::report::presets::lr
