// The report of preset `length` (its grid and question: cli/presets/length.cpp): accuracy and the largest attention
// weight against the number of keys per scaling, and which scalings fade, from each run's summary.json
// (Nakanishi 2025, Scalable-Softmax).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/registry.h"
#include "report/claims.h"
#include "report/preset_report.h"
#include "report/tables.h"
#include "train/json_file.h"
#include "train/run_files.h"

namespace xgrad::report::presets::length {
using train::LengthEval;
namespace {

// A seed's largest attention weight "fades" between the trained and the longest length when it falls by more than
// tolerance("length_change") (and "rises" when it grows by more); within it, it "holds". The same for accuracy.
double change_margin() { return tolerance("length_change").absolute; }
// A run has learned the task when its accuracy at the trained length is at least this: length results of a run that
// did not learn say little.
constexpr double kLearned = 0.9;
// The scaling the question is about.
constexpr const char* kScalable = "ssmax";

std::string f2(double v) { return std::isfinite(v) ? fmt::format("{:.2f}", v) : "—"; }

// One run's evaluations, by number of pairs.
struct RunLengths {
  nlohmann::json seed;  // seed_key
  std::map<std::size_t, LengthEval> by_pairs;
};

// The kept runs of `arm` that recorded length evaluations (summary.json's length_eval, read through RunSummary).
std::vector<RunLengths> lengths_of(const Comparison& c, const ArmStats& arm) {
  std::vector<RunLengths> out;
  for (std::size_t r : arm.kept) {
    std::ifstream in(c.runs[r].dir + "/" + train::kSummaryFile);
    if (!in) continue;
    RunLengths run;
    try {
      const train::RunSummary s =
          train::RunSummary::from_json(train::parse_json(in, c.runs[r].dir + "/" + train::kSummaryFile));
      for (const LengthEval& e : s.length_eval)
        if (e.setting == "n_pairs") run.by_pairs[e.value] = e;
      run.seed = seed_key(c.runs[r].config);
    } catch (const std::exception&) {
      continue;
    }
    if (!run.by_pairs.empty()) out.push_back(std::move(run));
  }
  return out;
}

// One arm: a scaling at one d_k (and the other settings flags may add to the grid).
struct Curve {
  std::string scale;
  std::string extras;              // LineLabels::extras: the other settings in which the arms differ
  std::string label;               // the scaling and those extras
  std::size_t trained = 0;         // n_pairs of training
  std::vector<RunLengths> runs;    // kept runs with evaluations
  std::vector<std::size_t> pairs;  // evaluated in every run, increasing
  std::size_t n_diverged = 0;
};
// The curves of one d_k (a figure), or of one d_k and extras (a group of findings: curves that differ only in scaling).
struct Panel {
  std::size_t d_k = 0;
  std::vector<Curve> curves;  // in the arms' (report) order
  std::string extras;         // a group's extras ("" for a figure)
};

std::vector<Panel> panels_of(const Comparison& c) {
  const report::LineLabels labels(c, {"d_k", "scale"});
  std::vector<Panel> panels;
  for (const ArmStats& arm : c.arms) {
    auto panel = std::find_if(panels.begin(), panels.end(), [&](const Panel& p) { return p.d_k == arm.d_k(); });
    if (panel == panels.end()) {
      panels.push_back(Panel{arm.d_k(), {}, ""});
      panel = panels.end() - 1;
    }
    Curve curve;
    curve.scale = arm.scale();
    curve.extras = labels.extras(arm.settings);
    curve.label = labels(arm.scale(), arm.settings);
    curve.trained = arm.settings.value("n_pairs", std::size_t{0});
    curve.runs = lengths_of(c, arm);
    for (std::size_t r : arm.used) curve.n_diverged += c.runs[r].diverged ? 1 : 0;
    if (!curve.runs.empty()) {
      for (const auto& [pairs, e] : curve.runs.front().by_pairs) {
        bool everywhere = true;
        for (const RunLengths& run : curve.runs) everywhere = everywhere && run.by_pairs.count(pairs);
        if (everywhere) curve.pairs.push_back(pairs);
      }
    }
    panel->curves.push_back(std::move(curve));
  }
  std::sort(panels.begin(), panels.end(), [](const Panel& a, const Panel& b) { return a.d_k < b.d_k; });
  return panels;
}

// A figure's curves split by their extras, in first-appearance order: the curves each group of findings compares.
std::vector<Panel> groups_of(const Panel& panel) {
  std::vector<Panel> groups;
  for (const Curve& curve : panel.curves) {
    auto g = std::find_if(groups.begin(), groups.end(), [&](const Panel& p) { return p.extras == curve.extras; });
    if (g == groups.end()) {
      groups.push_back(Panel{panel.d_k, {}, curve.extras});
      g = groups.end() - 1;
    }
    g->curves.push_back(curve);
  }
  return groups;
}

std::string count_list(const std::vector<std::size_t>& values) {
  std::vector<std::string> items;
  for (std::size_t v : values) items.push_back(std::to_string(v));
  return report::join_and(items);
}

// "8 pairs, evaluated at 16 and 32 (2x and 4x)"
std::string lengths_text(const Curve& curve) {
  std::string s = fmt::format("{} key-value pairs and evaluated after training at ", curve.trained);
  if (curve.pairs.empty()) return s + "no length (no run recorded length evaluations)";
  std::vector<std::string> ratios;
  for (std::size_t p : curve.pairs)
    ratios.push_back(curve.trained ? fmt::format("{:g}x", static_cast<double>(p) / curve.trained) : "?");
  return s + count_list(curve.pairs) + " (" + report::join_and(ratios) + ")";
}

// Mean and sample sd over the curve's runs of one field at `pairs`.
report::MeanSd at(const Curve& curve, std::size_t pairs, double LengthEval::*field) {
  std::vector<double> values;
  for (const RunLengths& run : curve.runs) values.push_back(run.by_pairs.at(pairs).*field);
  return report::mean_sd(values);
}

SummaryFigure figure(const Panel& panel, const std::string& stem, const std::string& what, double LengthEval::*field) {
  SummaryFigure f;
  f.name = fmt::format("length_{}_vs_keys_dk{}", stem, panel.d_k);
  f.title = fmt::format("{} against the number of keys, d_k = {}", what, panel.d_k);
  std::set<std::size_t> trained;
  for (const Curve& curve : panel.curves) trained.insert(curve.trained);
  f.caption = fmt::format(
      "Evaluated at the end of training on --eval-batches held-out batches per length (summary.json length_eval); "
      "trained at {} pairs{}. Mean over the seeds that did not diverge, error bars ± their sample sd",
      count_list({trained.begin(), trained.end()}), trained.size() > 1 ? " (n_pairs in the legend)" : "");
  f.x_label = "key-value pairs per sequence (keys a query sees)";
  f.y_label = what;
  f.log_x = true;
  for (const Curve& curve : panel.curves) {
    SummaryLine line = summary_line(curve.label, curve.scale);
    for (std::size_t pairs : curve.pairs) {
      line.points.push_back(mean_point(static_cast<double>(pairs), at(curve, pairs, field), curve.n_diverged));
    }
    if (curve.pairs.empty()) f.notes.push_back(curve.label + ": no run recorded length evaluations");
    f.lines.push_back(line);
  }
  return f;
}

// What every seed of a curve says about the change of `field` from the trained to the longest length.
struct Change {
  std::size_t down = 0, same = 0, up = 0, n = 0;
  double from = kNoValue, to = kNoValue;  // means
  // "falls in every seed", "holds in every seed", "rises in every seed", or "not decided (...)"
  std::string not_measured;  // why n is 0
  std::string text(const std::string& falls, const std::string& holds, const std::string& rises) const {
    if (n == 0) return "not measured (" + not_measured + ")";
    if (down == n) return falls + " in every seed";
    if (same == n) return holds + " in every seed";
    if (up == n) return rises + " in every seed";
    return fmt::format("not decided (seeds disagree: {} {}, {} {}, {} {})", down, falls, same, holds, up, rises);
  }
};

Change change_of(const Curve& curve, double LengthEval::*field) {
  Change c;
  if (curve.pairs.empty()) {
    c.not_measured = "no run recorded length evaluations";
    return c;
  }
  const std::size_t first = curve.trained, last = curve.pairs.back();
  if (!std::count(curve.pairs.begin(), curve.pairs.end(), first)) {
    c.not_measured = fmt::format("trained at {} pairs, evaluated at {} only", first, count_list(curve.pairs));
    return c;
  }
  if (last == first) {
    c.not_measured = fmt::format("evaluated at the trained {} pairs only", first);
    return c;
  }
  // Each run's value at the longest length against its own at the trained one (a run without both counts, as
  // neither falling, holding nor rising).
  std::map<nlohmann::json, double> longest, trained;
  for (std::size_t r = 0; r < curve.runs.size(); ++r) {
    const double a = curve.runs[r].by_pairs.at(first).*field, b = curve.runs[r].by_pairs.at(last).*field;
    if (std::isfinite(a) && std::isfinite(b)) longest[r] = b, trained[r] = a;
  }
  const Verdict v = compare_values(longest, trained, Better::higher, tolerance("length_change"));
  c.n = curve.runs.size();
  c.down = v.seeds_worse;
  c.up = v.seeds_better;
  c.same = v.seeds_same;
  c.from = at(curve, first, field).mean;
  c.to = at(curve, last, field).mean;
  return c;
}

// The runs evaluated at the trained length, and those of them that learned the task.
struct Learned {
  std::size_t learned = 0, measured = 0;
};
Learned learned_seeds(const Curve& curve) {
  Learned n;
  for (const RunLengths& run : curve.runs)
    if (run.by_pairs.count(curve.trained)) {
      ++n.measured;
      n.learned += run.by_pairs.at(curve.trained).accuracy >= kLearned ? 1 : 0;
    }
  return n;
}

// `a` against `b` at the longest length, paired by seed (compare_values with the "probability" tolerance): larger,
// smaller or about equal in every common seed, else not decided.
std::string paired(const Curve& a, const Curve& b, double LengthEval::*field) {
  if (a.pairs.empty() || b.pairs.empty() || a.pairs.back() != b.pairs.back()) return "";
  const std::size_t last = a.pairs.back();
  std::map<nlohmann::json, double> va, vb;
  for (const RunLengths& r : a.runs) va[r.seed] = r.by_pairs.at(last).*field;
  for (const RunLengths& r : b.runs) vb[r.seed] = r.by_pairs.at(last).*field;
  const Tolerance& tol = tolerance("probability");
  const Verdict v = compare_values(va, vb, Better::higher, tol);
  if (!v.paired) return "";
  double sum_a = 0, sum_b = 0;
  for (const auto& [seed, x] : va)
    if (vb.count(seed)) sum_a += x, sum_b += vb.at(seed);
  const std::string values = fmt::format("{} vs {}", f2(sum_a / v.n_shared), f2(sum_b / v.n_shared));
  if (v.outcome == Outcome::better) return fmt::format("larger than {}'s in every seed ({})", b.scale, values);
  if (v.outcome == Outcome::worse) return fmt::format("smaller than {}'s in every seed ({})", b.scale, values);
  if (v.outcome == Outcome::same)
    return fmt::format("within {:g} of {}'s in every seed ({})", tol.absolute, b.scale, values);
  return fmt::format(
      "not decided against {}'s (seeds disagree: larger in {}, smaller in {}, within {:g} in {} of {}; "
      "{})",
      b.scale, v.seeds_better, v.seeds_worse, tol.absolute, v.seeds_same, v.n_shared, values);
}

// The last curve of `panel` with scaling `scale`; nullptr when none.
const Curve* curve_of(const Panel& panel, const std::string& scale) {
  const Curve* found = nullptr;
  for (const Curve& curve : panel.curves)
    if (curve.scale == scale) found = &curve;
  return found;
}

// What the curves of a group say about the largest weight: the scalings per outcome.
struct WeightLists {
  std::vector<std::string> fading, holding, undecided, not_learned;
  std::vector<std::pair<std::string, std::vector<std::string>>> unmeasured;  // why -> scalings
};

// The lists of `panel`'s curves, and their rows of the findings table `t`.
WeightLists weight_lists(const Panel& panel, report::Table& t) {
  WeightLists w;
  for (const Curve& curve : panel.curves) {
    const Change acc = change_of(curve, &LengthEval::accuracy);
    const Change weight = change_of(curve, &LengthEval::max_prob_mean);
    const Learned learned = learned_seeds(curve);
    t.rows.push_back({curve.scale,
                      learned.measured ? fmt::format("{} of {}", learned.learned, learned.measured)
                                       : "not measured at the trained length",
                      f2(acc.from) + " → " + f2(acc.to), acc.text("falls", "holds", "rises"),
                      f2(weight.from) + " → " + f2(weight.to), weight.text("fades", "holds", "rises")});
    if (learned.learned < learned.measured)
      w.not_learned.push_back(
          fmt::format("{} ({} of {})", curve.scale, learned.measured - learned.learned, learned.measured));
    if (weight.n && weight.down == weight.n)
      w.fading.push_back(fmt::format("{} ({} → {})", curve.scale, f2(weight.from), f2(weight.to)));
    else if (weight.n && weight.same + weight.up == weight.n)
      w.holding.push_back(fmt::format("{} ({} → {})", curve.scale, f2(weight.from), f2(weight.to)));
    else if (weight.n)
      w.undecided.push_back(curve.scale);
    else {
      auto why = std::find_if(w.unmeasured.begin(), w.unmeasured.end(),
                              [&](const auto& u) { return u.first == weight.not_measured; });
      if (why == w.unmeasured.end()) why = w.unmeasured.insert(w.unmeasured.end(), {weight.not_measured, {}});
      why->second.push_back(curve.scale);
    }
  }
  return w;
}

// The sentences of the lists (only those that hold a scaling).
std::string lists_text(const WeightLists& w, std::size_t trained, std::size_t longest) {
  std::string md;
  // Only the lists that hold a scaling: an empty one would read as a scaling's name ("none") or as a result.
  std::vector<std::string> clauses;
  if (!w.fading.empty())
    clauses.push_back(fmt::format("fades (falls by more than {:g} in every seed) with {}", change_margin(),
                                  report::join_and(w.fading)));
  if (!w.holding.empty())
    clauses.push_back(fmt::format("holds (within {:g}, or rises, in every seed) with {}", change_margin(),
                                  report::join_and(w.holding)));
  if (!w.undecided.empty())
    clauses.push_back(fmt::format("is not decided (the seeds disagree) with {}", report::join_and(w.undecided)));
  if (!clauses.empty())
    md += fmt::format("- From {} to {} keys per query, the largest attention weight {}.\n", trained, longest,
                      fmt::join(clauses, "; "));
  for (const auto& [why, scales] : w.unmeasured)
    md += fmt::format("- The change from the trained length is not measured for {} ({}).\n", report::join_and(scales),
                      why);
  if (!w.not_learned.empty())
    md += fmt::format(
        "- Runs below {:g} accuracy at the trained length (they did not learn the task, so their length "
        "results say little): {}.\n",
        kLearned, fmt::join(w.not_learned, ", "));
  return md;
}

// `scalable` against every other curve of `panel` at the longest length, in `field` (paired, per curve).
std::vector<std::string> paired_all(const Panel& panel, const Curve& scalable, double LengthEval::*field) {
  std::vector<std::string> out;
  for (const Curve& curve : panel.curves) {
    if (&curve == &scalable) continue;
    const std::string s = paired(scalable, curve, field);
    if (!s.empty()) out.push_back(s);
  }
  return out;
}

// Nakanishi 2025's claim at this scale: standard attention fades with more keys, Scalable-Softmax does not.
std::string claim_verdict(const Curve& reference, const Curve& scalable) {
  const Change ref = change_of(reference, &LengthEval::max_prob_mean);
  const Change ss = change_of(scalable, &LengthEval::max_prob_mean);
  // The claim is about attention that has learned where to look: a seed that never learned the task (its weight
  // sits on an arbitrary key) decides nothing, so every seed of both must have learned.
  const Learned ref_learned = learned_seeds(reference), ss_learned = learned_seeds(scalable);
  std::string verdict;
  if (ref.n == 0 || ss.n == 0)
    verdict = "not measured (" + (ref.n == 0 ? ref.not_measured : ss.not_measured) + ")";
  else if (ref_learned.learned < ref_learned.measured || ss_learned.learned < ss_learned.measured)
    verdict = fmt::format("not decided (seeds that learned the task: sqrt_dk {} of {}, ssmax {} of {})",
                          ref_learned.learned, ref_learned.measured, ss_learned.learned, ss_learned.measured);
  else if (ref.down == ref.n && ss.down == 0)
    verdict = "reproduced: sqrt_dk fades in every seed, ssmax in none";
  else if (ref.down == 0)
    verdict = "not reproduced: sqrt_dk's largest weight does not fade in any seed";
  else if (ss.down == ss.n)
    verdict = "not reproduced: ssmax fades in every seed too";
  else
    verdict =
        fmt::format("not decided (sqrt_dk fades in {} of {} seeds, ssmax in {} of {})", ref.down, ref.n, ss.down, ss.n);
  return verdict;
}

// One group of findings: curves of one d_k that differ only in scaling (Panel::extras names what else they share).
std::string findings(const Panel& panel) {
  std::string md = fmt::format("**d_k = {}{}.**\n\n", panel.d_k, panel.extras.empty() ? "" : ", " + panel.extras);
  report::Table t;
  t.header = {"scaling",
              "seeds learned",
              "accuracy (trained → longest)",
              "accuracy change",
              "max attention weight (trained → longest)",
              "max weight change"};
  const WeightLists lists = weight_lists(panel, t);
  const std::size_t longest =
      panel.curves.empty() || panel.curves.front().pairs.empty() ? 0 : panel.curves.front().pairs.back();
  const std::size_t trained = panel.curves.empty() ? 0 : panel.curves.front().trained;
  md += t.markdown() + "\n";
  md += lists_text(lists, trained, longest);
  const Curve* scalable = curve_of(panel, kScalable);
  const Curve* reference = curve_of(panel, "sqrt_dk");
  if (!scalable) {
    md += fmt::format("- No {} runs in this sweep: the comparison with Scalable-Softmax is not made.\n", kScalable);
    return md + "\n";
  }
  const std::vector<std::string> against = paired_all(panel, *scalable, &LengthEval::max_prob_mean);
  if (!against.empty())
    md += fmt::format("- At {} keys, {}'s largest attention weight is {}.\n", longest, kScalable,
                      fmt::join(against, "; "));
  const std::vector<std::string> accuracy_against = paired_all(panel, *scalable, &LengthEval::accuracy);
  if (!accuracy_against.empty())
    md += fmt::format("- At {} keys, {}'s accuracy is {}.\n", longest, kScalable, fmt::join(accuracy_against, "; "));
  if (reference)
    md += fmt::format("- Attention fading with more keys, and Scalable-Softmax preventing it (Nakanishi 2025): {}.\n",
                      claim_verdict(*reference, *scalable));
  return md + "\n";
}

std::vector<report::PresetSection> report(const report::PresetInput& in) {
  const std::vector<Panel> panels = panels_of(in.comparison);
  report::PresetSection accuracy;
  accuracy.anchor = "length-accuracy";
  accuracy.title = "Accuracy against the number of keys";
  report::PresetSection weight;
  weight.anchor = "length-max-prob";
  weight.title = "Largest attention weight against the number of keys";
  report::PresetSection facts;
  facts.anchor = "length-findings";
  facts.title = "What changes with more keys, per scaling";
  std::vector<std::string> lengths;  // what the runs were trained and evaluated at, each once
  for (const Panel& panel : panels) {
    accuracy.figures.push_back(figure(panel, "accuracy", "accuracy", &LengthEval::accuracy));
    weight.figures.push_back(figure(panel, "max_prob", "largest attention weight", &LengthEval::max_prob_mean));
    for (const Panel& group : groups_of(panel)) facts.markdown += findings(group);
    for (const Curve& curve : panel.curves)
      if (std::find(lengths.begin(), lengths.end(), lengths_text(curve)) == lengths.end())
        lengths.push_back(lengths_text(curve));
  }
  accuracy.markdown =
      (lengths.empty()       ? std::string("No run was read.")
       : lengths.size() == 1 ? "Each run is trained at " + lengths.front() + "."
                             : fmt::format("The runs are trained at {} (the legend names each run's settings).",
                                           fmt::join(lengths, ", or at "))) +
      " The evaluated sequences reuse the trained positions (pair i takes the trained pair position i mod the trained "
      "number of pairs, the query the trained query position), so only the number of keys a query sees changes.\n";
  weight.markdown =
      "The largest attention weight is the mean over the queries of the last attention layer's largest softmax "
      "weight (1 / n for uniform attention over n keys): Nakanishi 2025's measure of attention fading.\n";
  facts.markdown = fmt::format(
                       "A change counts when it exceeds {:g} (accuracy) or {:g} (largest weight) in every seed; seeds "
                       "that disagree leave it not decided. Comparisons between scalings pair runs of the same seed "
                       "(same data and initial weights) and count a difference above {:g}.\n\n",
                       change_margin(), change_margin(), tolerance("probability").absolute) +
                   facts.markdown;
  return {accuracy, weight, facts};
}

const Registration<PresetReport> length_registration{PresetReport{"length", 40, report}};

}  // namespace
}  // namespace xgrad::report::presets::length
