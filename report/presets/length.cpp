// The report of preset `length` (its grid and question: cli/presets/length.cpp): accuracy and the largest attention
// weight against the number of keys per scaling, and which scalings fade, from each run's summary.json
// (Nakanishi 2025, Scalable-Softmax).
#include <cmath>

#include "report/preset_report.h"

namespace xgrad::report::presets::length {
using train::LengthEval;
namespace {

// A seed's largest attention weight "fades" between the trained and the longest length when it falls by more than
// tolerance("length_change") (and "rises" when it grows by more); within it, it "holds". The same for accuracy.
double change_margin() { return tolerance("length_change").absolute; }
// A run has learned the task when its accuracy at the trained length is at least this (else its lengths say little).
constexpr double kLearned = 0.9;
// The scaling the question is about.
constexpr const char* kScalable = "ssmax";

std::string f2(double v) { return number_or_dash(v, "{:.2f}"); }

// The run recorded evaluations at other numbers of pairs (summary.json's length_eval, read by load_run).
bool evaluated(const RunRecord& run) {
  return std::any_of(run.length_eval.begin(), run.length_eval.end(),
                     [](const LengthEval& e) { return e.setting == "n_pairs"; });
}

// One run's evaluations, by number of pairs.
struct RunLengths {
  nlohmann::json seed;  // seed_key
  std::map<std::size_t, LengthEval> by_pairs;
};

// The kept runs of `arm` that recorded length evaluations, one per seed: a seed's runs averaged first (as
// judge_finding does) at the numbers of pairs each of them evaluated.
std::vector<RunLengths> lengths_of(const Comparison& c, const ArmStats& arm) {
  std::map<nlohmann::json, std::vector<std::size_t>> seeds;
  for (std::size_t r : arm.kept)
    if (evaluated(c.runs[r])) seeds[seed_key(c.runs[r].config)].push_back(r);
  std::vector<RunLengths> out;
  for (const auto& seed : seeds) {
    RunLengths mean{seed.first, {}};
    const double n = static_cast<double>(seed.second.size());
    std::map<std::size_t, double> runs;  // runs of the seed evaluated at each number of pairs
    for (std::size_t r : seed.second)
      for (const LengthEval& e : c.runs[r].length_eval) {
        if (e.setting != "n_pairs") continue;
        const auto it = mean.by_pairs.emplace(e.value, e);
        for (double LengthEval::*f :
             {&LengthEval::loss, &LengthEval::accuracy, &LengthEval::max_prob_mean, &LengthEval::entropy_mean})
          it.first->second.*f = (it.second ? 0 : it.first->second.*f) + e.*f / n;
        ++runs[e.value];
      }
    for (const auto& point : runs)
      if (point.second != n) mean.by_pairs.erase(point.first);
    if (!mean.by_pairs.empty()) out.push_back(std::move(mean));
  }
  return out;
}

// One arm: a scaling at one d_k (and the other settings flags may add to the grid).
struct Curve {
  std::size_t d_k = 0;
  std::string scale;
  std::string extras;              // LineLabels::extras: the other settings in which the arms differ
  std::string label;               // the scaling and those extras
  std::size_t trained = 0;         // n_pairs of training
  std::vector<RunLengths> runs;    // kept runs with evaluations
  std::vector<std::size_t> pairs;  // evaluated in every run, increasing
  std::size_t n_diverged = 0;
  std::size_t learned = 0, measured = 0;  // runs evaluated at the trained length, and those that learned the task
};
using Curves = std::vector<Curve>;  // of one d_k (a figure), or of one d_k and extras (a group of findings)

// The arms' curves by d_k, in the arms' (report) order within one.
Curves curves_of(const Comparison& c) {
  const LineLabels labels(c, {"d_k", "scale"});
  Curves curves;
  for (const ArmStats& arm : c.arms) {
    Curve& curve = curves.emplace_back(Curve{arm.d_k(),
                                             arm.scale(),
                                             labels.extras(arm.settings),
                                             labels(arm.scale(), arm.settings),
                                             arm.settings.value("n_pairs", std::size_t{0}),
                                             lengths_of(c, arm),
                                             {},
                                             arm.diverged_steps.size(),
                                             0,
                                             0});
    if (!curve.runs.empty())
      for (const auto& entry : curve.runs.front().by_pairs) {
        const std::size_t pairs = entry.first;  // a structured binding cannot be captured in C++17 (Clang)
        if (std::all_of(curve.runs.begin(), curve.runs.end(),
                        [&](const RunLengths& r) { return r.by_pairs.count(pairs); }))
          curve.pairs.push_back(pairs);
      }
    for (const RunLengths& run : curve.runs)
      if (run.by_pairs.count(curve.trained))
        ++curve.measured, curve.learned += run.by_pairs.at(curve.trained).accuracy >= kLearned ? 1 : 0;
  }
  std::stable_sort(curves.begin(), curves.end(), [](const Curve& a, const Curve& b) { return a.d_k < b.d_k; });
  return curves;
}

std::string count_list(const std::vector<std::size_t>& values) {
  std::vector<std::string> items;
  for (std::size_t v : values) items.push_back(std::to_string(v));
  return report::join_and(items);
}

// "8 pairs, evaluated at 16 and 32 (2x and 4x)"
std::string lengths_text(const Curve& curve) {
  std::vector<std::string> ratios;
  for (std::size_t p : curve.pairs)
    ratios.push_back(curve.trained ? fmt::format("{:g}x", static_cast<double>(p) / curve.trained) : "?");
  return preset_text("length.lengths",
                     {{"trained", curve.trained},
                      {"evaluated", curve.pairs.empty() ? preset_text("length.no_lengths")
                                                        : count_list(curve.pairs) + " (" + join_and(ratios) + ")"}});
}

report::MeanSd at(const Curve& curve, std::size_t pairs, double LengthEval::*field) {
  std::vector<double> values;
  for (const RunLengths& run : curve.runs) values.push_back(run.by_pairs.at(pairs).*field);
  return report::mean_sd(values);
}

SummaryFigure figure(const Curves& panel, const std::string& stem, double LengthEval::*field) {
  std::set<std::size_t> trained;
  for (const Curve& curve : panel) trained.insert(curve.trained);
  const std::string caption =
      preset_text("length.caption", {{"trained", count_list({trained.begin(), trained.end()})},
                                     {"legend", trained.size() > 1 ? " (n_pairs in the legend)" : ""}});
  std::vector<LinePoint> points;
  for (const Curve& curve : panel) {
    points.push_back({curve.label, curve.scale, SummaryPoint{}});  // drawn empty when nothing was recorded
    for (std::size_t pairs : curve.pairs)
      points.push_back({curve.label, curve.scale,
                        mean_point(static_cast<double>(pairs), at(curve, pairs, field), curve.n_diverged)});
  }
  SummaryFigure f = lines_figure(fmt::format("length_{}_vs_keys_dk{}", stem, panel.front().d_k), "length." + stem,
                                 Axis::log, Axis::linear, points, {{"d_k", panel.front().d_k}, {"caption", caption}});
  for (const Curve& curve : panel)
    if (curve.pairs.empty()) f.notes.push_back(curve.label + ": " + preset_text("length.not_recorded"));
  return f;
}

// What every seed of a curve says about the change of `field` from the trained to the longest length: each run's
// value at the longest length against its own at the trained one (better: rises). `n` counts every run, so that one
// without both values leaves the change not decided.
struct Change {
  Verdict v;
  std::size_t n = 0;
  double from = kNoValue, to = kNoValue;  // means
  std::string not_measured;               // why n is 0
  std::size_t down() const { return v.seeds_worse; }
  // "falls in every seed", "holds in every seed", "rises in every seed", or "not decided (...)"
  std::string text(const std::string& falls, const std::string& holds, const std::string& rises) const {
    Tally seeds(v);
    seeds.not_decided = n - v.n_shared;  // a run without both values leaves the change not decided
    const std::string all = seeds.agreement();
    if (all == "none") return preset_text("length.not_measured", {{"why", not_measured}});
    if (all != "mixed")
      return preset_text("length.in_every_seed", {{"what", all == "worse" ? falls : all == "same" ? holds : rises}});
    return preset_text("length.change_undecided", seeds.fields({{"falls", falls}, {"holds", holds}, {"rises", rises}}));
  }
};

Change change_of(const Curve& curve, double LengthEval::*field) {
  const std::size_t first = curve.trained, last = curve.pairs.empty() ? 0 : curve.pairs.back();
  std::size_t beyond = last;  // beyond `last`, a length some seed was not evaluated at: no change is told to `last`
  for (const RunLengths& run : curve.runs) beyond = std::max(beyond, run.by_pairs.rbegin()->first);
  const char* why = curve.pairs.empty()                                          ? "length.not_recorded"
                    : beyond > last                                              ? "length.some_seeds_only"
                    : !std::count(curve.pairs.begin(), curve.pairs.end(), first) ? "length.not_evaluated_trained"
                    : last == first                                              ? "length.only_trained"
                                                                                 : nullptr;
  if (why)
    return {{},
            0,
            kNoValue,
            kNoValue,
            preset_text(why, {{"trained", first}, {"evaluated", count_list(curve.pairs)}, {"longest", beyond}})};
  std::map<nlohmann::json, double> longest, trained;
  for (std::size_t r = 0; r < curve.runs.size(); ++r) {
    const double a = curve.runs[r].by_pairs.at(first).*field, b = curve.runs[r].by_pairs.at(last).*field;
    if (std::isfinite(a) && std::isfinite(b)) longest[r] = b, trained[r] = a;
  }
  return {compare_values(longest, trained, Better::higher, tolerance("length_change")), curve.runs.size(),
          at(curve, first, field).mean, at(curve, last, field).mean, ""};
}

const Curve* curve_of(const Curves& panel, const std::string& scale) {
  const auto it = std::find_if(panel.rbegin(), panel.rend(), [&](const Curve& curve) { return curve.scale == scale; });
  return it == panel.rend() ? nullptr : &*it;
}

// `a` against `b` at their longest length in `field`, paired by seed (compare_values with the "probability"
// tolerance): larger, smaller or about equal in every common seed, else not decided; "—" when not compared.
std::string paired(const Curve* a, const Curve& b, double LengthEval::*field) {
  if (!a || a == &b || a->pairs.empty() || b.pairs.empty() || a->pairs.back() != b.pairs.back()) return "—";
  std::map<nlohmann::json, double> va, vb;
  for (const RunLengths& r : a->runs) va[r.seed] = r.by_pairs.at(a->pairs.back()).*field;
  for (const RunLengths& r : b.runs) vb[r.seed] = r.by_pairs.at(a->pairs.back()).*field;
  const Tolerance& tol = tolerance("probability");
  const Verdict v = compare_values(va, vb, Better::higher, tol);
  if (!v.paired) return "—";
  double sum_a = 0, sum_b = 0;
  for (const auto& [seed, x] : va)
    if (vb.count(seed)) sum_a += x, sum_b += vb.at(seed);
  return preset_text(
      "length.paired_" + outcome_key(v.outcome),
      Tally(v).fields({{"values", fmt::format("{} vs {}", f2(sum_a / v.n_shared), f2(sum_b / v.n_shared))},
                       {"tol", tol.absolute}}));
}

// Nakanishi 2025's claim at this scale: standard attention fades with more keys, Scalable-Softmax does not.
std::string claim_verdict(const Curve& reference, const Curve& scalable) {
  const Change ref = change_of(reference, &LengthEval::max_prob_mean);
  const Change ss = change_of(scalable, &LengthEval::max_prob_mean);
  // The claim is about attention that learned where to look: every seed of both must have learned the task.
  if (ref.n == 0 || ss.n == 0)
    return preset_text("length.not_measured", {{"why", ref.n == 0 ? ref.not_measured : ss.not_measured}});
  const bool learned = reference.learned == reference.measured && scalable.learned == scalable.measured;
  return preset_text(!learned                                ? "length.claim_not_learned"
                     : ref.down() == ref.n && ss.down() == 0 ? "length.claim_reproduced"
                     : ref.down() == 0                       ? "length.claim_no_fading"
                     : ss.down() == ss.n                     ? "length.claim_both_fade"
                                                             : "length.claim_undecided",
                     learned ? Fields{{"ref", ref.down()}, {"ref_n", ref.n}, {"ss", ss.down()}, {"ss_n", ss.n}}
                             : Fields{{"ref", reference.learned},
                                      {"ref_n", reference.measured},
                                      {"ss", scalable.learned},
                                      {"ss_n", scalable.measured}});
}

// One group of findings: curves of one d_k that differ only in scaling (`extras` names what else they share).
std::string findings(const Curves& panel, const std::string& extras) {
  std::string md =
      fmt::format("**d_k = {}{}.**\n\n", panel.front().d_k, extras.empty() ? "" : ", " + markdown_text(extras));
  // A row per scaling: each change, told seed by seed, and Scalable-Softmax against it at the longest length.
  report::Table t = preset_table("length.table_header");
  const Curve* scalable = curve_of(panel, kScalable);
  for (const Curve& curve : panel) {
    const Change acc = change_of(curve, &LengthEval::accuracy), weight = change_of(curve, &LengthEval::max_prob_mean);
    t.rows.push_back({curve.scale,
                      curve.measured ? fmt::format("{} of {}", curve.learned, curve.measured)
                                     : preset_text("length.not_measured_trained"),
                      f2(acc.from) + " → " + f2(acc.to), acc.text("falls", "holds", "rises"),
                      f2(weight.from) + " → " + f2(weight.to), weight.text("fades", "holds", "rises"),
                      paired(scalable, curve, &LengthEval::max_prob_mean),
                      paired(scalable, curve, &LengthEval::accuracy)});
  }
  md += t.markdown() + "\n";
  const Curve* reference = curve_of(panel, "sqrt_dk");
  if (!scalable) return md + preset_text("length.no_scalable", {{"scalable", kScalable}}) + "\n\n";
  if (reference) md += preset_text("length.claim", {{"verdict", claim_verdict(*reference, *scalable)}}) + "\n";
  return md + "\n";
}

std::vector<report::PresetSection> report(const report::PresetInput& in) {
  const Curves curves = curves_of(in.comparison);
  PresetSection accuracy = preset_section("length-accuracy"), facts = preset_section("length-findings");
  PresetSection weight = preset_section("length-max-prob", preset_text("length.weight_legend") + "\n");
  std::vector<std::string> lengths;  // what the runs were trained and evaluated at, each once
  for (const auto& group : group_by(curves, lengths_text)) lengths.push_back(group.first);
  for (const auto& [d_k, panel] : group_by(curves, [](const Curve& curve) { return curve.d_k; })) {
    accuracy.figures.push_back(figure(panel, "accuracy", &LengthEval::accuracy));
    weight.figures.push_back(figure(panel, "max_prob", &LengthEval::max_prob_mean));
    for (const auto& [extras, group] : group_by(panel, [](const Curve& curve) { return curve.extras; }))
      facts.markdown += findings(group, extras);
  }
  accuracy.markdown = preset_text(lengths.empty()       ? "length.no_run"
                                  : lengths.size() == 1 ? "length.trained_one"
                                                        : "length.trained_many",
                                  {{"lengths", fmt::format("{}", fmt::join(lengths, ", or at "))}}) +
                      " " + preset_text("length.positions") + "\n";
  std::vector<std::string> unevaluated;  // kept runs whose summary.json holds no evaluation by number of pairs
  for (const ArmStats& arm : in.comparison.arms)
    for (std::size_t r : arm.kept)
      if (in.comparison.runs[r].has_summary && !evaluated(in.comparison.runs[r]))
        unevaluated.push_back(markdown_text(in.comparison.runs[r].dir));
  if (!unevaluated.empty())
    facts.markdown = preset_text("length.unevaluated",
                                 {{"runs", counted(unevaluated.size(), "run")}, {"list", join_and(unevaluated)}}) +
                     "\n\n" + facts.markdown;
  facts.markdown = preset_text("length.findings_legend", {{"margin", change_margin()},
                                                          {"probability", tolerance("probability").absolute},
                                                          {"accuracy", kLearned}}) +
                   "\n\n" + facts.markdown;
  return {accuracy, weight, facts};
}

const Registration<PresetReport> length_registration{PresetReport{"length", 40, report}};

}  // namespace
}  // namespace xgrad::report::presets::length
