// The five sections of `xgrad explain`, each verdict decided from the measurements (thresholds stated in its text);
// a quantity compare also judges is judged by compare's rule and tolerance.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "report/claims.h"
#include "report/explain.h"
#include "report/explain_figures.h"
#include "report/stats.h"

namespace xgrad::report {

namespace {

constexpr double kSaturated = 0.5;    // a share of saturated queries from which "most queries are saturated"
constexpr double kMild = 0.1;         // a share below which saturation is mild
constexpr std::size_t kSlopeDks = 3;  // head sizes a slope needs: any two lie on a line, a third may fall off it
// A step back between the ends of up to this share of the change from the smallest d_k to the largest is noise: the
// saturated share of 8 queries (--batch-size 1) moves in steps of 12.5%, 50%, 75%, 50%, 100% over d_k 64 to 4096.
constexpr double kStepBack = 0.25;

// The verdict of explain.md's line `key` ("class | verdict | text"), its fields filled in.
SectionVerdict verdict(const std::string& key, const Fields& fields = {}) {
  const std::vector<std::string> parts = text_cells("explain", key, fields);
  return {parts.at(1), parts.at(0), parts.at(2), key, fields};
}

// The unscaled scaling ("" when not requested) and the proposed one (sqrt_dk if requested, else the first other).
struct Scales {
  std::string ref, prop;
  explicit Scales(const Explanation& e) {
    for (const auto& s : e.scales)
      if (is_reference_scale(s) && ref.empty()) ref = s;
    const bool sqrt_dk = std::find(e.scales.begin(), e.scales.end(), "sqrt_dk") != e.scales.end();
    for (const auto& s : e.scales)
      if (prop.empty() && s != ref) prop = sqrt_dk ? "sqrt_dk" : s;
  }
};

// Least-squares slope of log(score std) against log(d_k) over the arms of `scale`; NaN with fewer than kSlopeDks.
double log_log_slope(const Explanation& e, const std::string& scale) {
  std::vector<double> x, y;
  for (const auto d_k : e.d_ks)
    if (const auto* a = e.arm(d_k, scale); a && a->score_std > 0) {
      x.push_back(std::log(static_cast<double>(d_k)));
      y.push_back(std::log(a->score_std));
    }
  if (x.size() < kSlopeDks) return std::nan("");
  const double mx = mean_sd(x).mean, my = mean_sd(y).mean;
  double sxy = 0, sxx = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
  }
  return sxy / sxx;
}

// Whether `value` of the `ref` arms moves one way (up: grows) over the head sizes, as a claim that it grows with d_k
// says of every step, not only the ends: no value lies behind one at a smaller d_k by more than kStepBack of the
// change between the ends.
bool monotone(const Explanation& e, const std::string& ref, double ArmMeasurement::*value, bool up) {
  const auto at = [&](std::size_t d_k) { return (up ? 1 : -1) * (e.arm(d_k, ref)->*value); };  // growing, either way
  double best = at(e.d_ks.front());
  const double slack = kStepBack * std::abs(at(e.d_ks.back()) - best);
  for (const auto d_k : e.d_ks) {
    if (at(d_k) < best - slack) return false;
    best = std::max(best, at(d_k));
  }
  return true;
}

// "0.51", or "n/a" for a number that could not be computed.
std::string fixed(double v) { return std::isfinite(v) ? fmt::format("{:.2f}", v) : "n/a"; }

// The largest relative gap |measured / theory - 1| of `scale`'s score std over the head sizes.
double theory_gap(const Explanation& e, const std::string& scale) {
  double worst = 0;
  for (const auto d_k : e.d_ks) {
    const auto& a = *e.arm(d_k, scale);
    worst = std::max(worst, a.theory_std > 0 ? std::abs(a.score_std / a.theory_std - 1) : INFINITY);
  }
  return worst;
}

// Fields of the unscaled arm at the smallest and largest d_k (lo_, hi_), the proposed at the largest (prop_hi_).
Fields step_fields(const Explanation& e, const Scales& s) {
  Fields f{{"ref", scale_label_of(s.ref)}, {"prop", scale_label_of(s.prop)}};
  add_arm_fields(f, "lo_", *e.arm(e.d_ks.front(), s.ref));
  add_arm_fields(f, "hi_", *e.arm(e.d_ks.back(), s.ref));
  if (!s.prop.empty()) add_arm_fields(f, "prop_hi_", *e.arm(e.d_ks.back(), s.prop));
  return f;
}

// ---- 1. growth

SectionVerdict growth(const Explanation& e, const Scales& s, Fields f, ExplainSection& section) {
  std::string gaps;
  for (const auto& scale : e.scales)
    gaps += fmt::format("{}{} {}", gaps.empty() ? "" : ", ", scale_label_of(scale), percent_text(theory_gap(e, scale)));
  section.paragraphs.push_back(text("explain", "growth.paragraph", {{"gaps", gaps}}));
  if (s.ref.empty()) return verdict("growth.no_reference");
  const double slope = log_log_slope(e, s.ref), worst = theory_gap(e, s.ref);
  f["slope"] = fixed(slope);
  f["gap"] = percent_text(worst);
  f["numbers"] = text("explain", "growth.numbers", f);
  if (std::isnan(slope)) return verdict(e.d_ks.size() < kSlopeDks ? "few_d_k" : "no_slope", f);
  if (std::abs(slope - 0.5) <= 0.1 && worst <= 0.25) return verdict("growth.holds", f);
  return verdict(slope > 0.2 ? "growth.weaker" : "growth.fails", f);
}

// ---- 2. saturation

// The curve's value at `x` (log-linear interpolation between the grid's points; the ends are held).
double curve_at(const std::vector<double>& xs, const std::vector<double>& ys, double x) {
  if (xs.empty() || std::isnan(x)) return std::nan("");
  if (x <= xs.front()) return ys.front();
  for (std::size_t i = 1; i < xs.size(); ++i)
    if (x <= xs[i]) {
      const double t = std::log(x / xs[i - 1]) / std::log(xs[i] / xs[i - 1]);
      return ys[i - 1] + t * (ys[i] - ys[i - 1]);
    }
  return ys.back();
}

// How many arms' entropy lies on the curve at their std (within 0.15 nats or 15%), and the largest gap.
std::pair<std::size_t, double> on_curve(const Explanation& e) {
  std::size_t near = 0;
  double worst = 0;
  for (const auto& a : e.arms) {
    const double c = curve_at(e.curves.std, e.curves.entropy, a.score_std);
    const double gap = std::abs(a.entropy_mean - c);
    worst = std::max(worst, gap);
    near += gap <= std::max(0.15, 0.15 * c);
  }
  return {near, worst};
}

SectionVerdict saturation(const Explanation& e, const Scales& s, Fields f, ExplainSection& section) {
  const auto [near, worst] = on_curve(e);
  section.paragraphs.push_back(
      text("explain", "saturation.paragraph", {{"near", near}, {"arms", e.arms.size()}, {"worst", worst}}));
  if (s.ref.empty()) return verdict("no_reference");
  const auto& lo = *e.arm(e.d_ks.front(), s.ref);
  const auto& hi = *e.arm(e.d_ks.back(), s.ref);
  // Earned: peaks on the answer's key more often than chance, beyond two standard errors.
  const bool measured = !std::isnan(hi.earned_share);
  const bool earned = measured && hi.earned_share > hi.chance_share + 2 * hi.earned_se;
  f["two_se"] = percent_text(2 * hi.earned_se);
  section.paragraphs.push_back(text("explain",
                                    !measured ? "saturation.no_answer_paragraph"
                                    : earned  ? "saturation.earned_paragraph"
                                              : "saturation.unearned_paragraph",
                                    f));
  f["numbers"] = text("explain", "saturation.numbers", f);
  const bool grows = hi.saturated_share >= kSaturated && hi.saturated_share > lo.saturated_share + 0.2;
  const bool explained = near * 5 >= e.arms.size() * 4;  // four points in five on the curve
  if (!grows) return verdict("saturation.fails", f);
  f["quantity"] = "the saturated share", f["direction"] = "grow";
  if (!monotone(e, s.ref, &ArmMeasurement::saturated_share, true)) return verdict("not_monotone", f);
  if (earned) return verdict("saturation.earned", f);
  if (!explained) return verdict("saturation.off_curve", f);
  return verdict(measured ? "saturation.holds" : "saturation.holds_unmeasured", f);
}

// ---- 3. gradient

// `value` of each arm of `scale`, by d_k: one "seed" per head size, for compare's rule.
std::map<nlohmann::json, double> by_d_k(const Explanation& e, const std::string& scale, double ArmMeasurement::*value) {
  std::map<nlohmann::json, double> out;
  for (const auto d_k : e.d_ks)
    if (const auto* a = e.arm(d_k, scale)) out[d_k] = a->*value;
  return out;
}

// With --runs: the unscaled against the proposed score gradient per loss by (group, d_k), each pair in `list`.
Verdict training_gradient(const Explanation& e, const Scales& s, std::string& list) {
  std::map<nlohmann::json, double> ref, prop;
  const std::vector<TrainingPoint> none, &points = e.training ? e.training->points : none;
  for (const auto& p : points)
    for (const auto& q : points)
      if (p.scale == s.ref && q.scale == s.prop && q.d_k == p.d_k && q.group == p.group &&
          std::isfinite(p.score_grad_relative) && std::isfinite(q.score_grad_relative)) {
        ref[{p.group, p.d_k}] = p.score_grad_relative;
        prop[{p.group, p.d_k}] = q.score_grad_relative;
        list += fmt::format("{}{}, d_k {}: {:.3g} vs {:.3g}", list.empty() ? "" : "; ", p.group, p.d_k,
                            p.score_grad_relative, q.score_grad_relative);
      }
  return compare_values(ref, prop, Better::lower, tolerance("gradient"));
}

SectionVerdict gradient(const Explanation& e, const Scales& s, Fields f, ExplainSection& section) {
  if (s.ref.empty()) return verdict("no_reference");
  const auto& lo = *e.arm(e.d_ks.front(), s.ref);
  const auto& hi = *e.arm(e.d_ks.back(), s.ref);
  std::string numbers = text("explain", "gradient.numbers", f), list;
  std::size_t larger = 0;
  if (!s.prop.empty()) {  // the W_q gradient at step 0, as compare's more_gradient_step0 claim judges it
    const Verdict v =
        compare_values(by_d_k(e, s.ref, &ArmMeasurement::grad_norm_w_q),
                       by_d_k(e, s.prop, &ArmMeasurement::grad_norm_w_q), Better::higher, tolerance("gradient"));
    larger = v.seeds_better;
    f["larger"] = larger;
    f["n"] = v.n_shared;
    numbers += text("explain", "gradient.w_q", f);
  }
  const Verdict t = training_gradient(e, s, list);
  Fields g = f;
  g["smaller"] = t.seeds_better, g["n"] = t.n_shared, g["list"] = list;
  if (t.n_shared > 0) section.paragraphs.push_back(text("explain", "gradient.training", g));
  f["numbers"] = numbers;
  const bool jacobian_falls = hi.jacobian_norm_mean < lo.jacobian_norm_mean / 2;
  if (!jacobian_falls) return verdict("gradient.jacobian_flat", f);
  if (!(hi.score_grad_median < lo.score_grad_median / 2)) return verdict("gradient.score_grad_flat", f);
  // The middle of the Jacobian only: the score gradient also carries the batch's dLoss/dp, which on a small batch moves
  // by 40% between neighbouring head sizes where theory holds it flat (the scaled arms at --batch-size 4).
  f["quantity"] = "the mean Jacobian norm", f["direction"] = "fall";
  if (!monotone(e, s.ref, &ArmMeasurement::jacobian_norm_mean, false)) return verdict("not_monotone", f);
  if (larger == 0) return verdict("gradient.holds", f);
  return verdict(
      t.n_shared > 0 && t.seeds_better * 2 > t.n_shared ? "gradient.per_query_training" : "gradient.per_query", f);
}

// ---- 4. scaling

// One line on `scale`'s scores over the head sizes; its slope and largest saturated share.
std::string scaling_summary(const Explanation& e, const std::string& scale, double& slope, double& max_saturated) {
  double low = INFINITY, high = -INFINITY, entropy = INFINITY;
  max_saturated = -INFINITY;
  for (const auto d_k : e.d_ks) {
    const ArmMeasurement& a = *e.arm(d_k, scale);
    low = std::min(low, a.score_std), high = std::max(high, a.score_std), entropy = std::min(entropy, a.entropy_mean);
    max_saturated = std::max(max_saturated, a.saturated_share);
  }
  slope = log_log_slope(e, scale);
  return text("explain", "scaling.summary",
              {{"scale", scale_label_of(scale)},
               {"low", low},
               {"high", high},
               {"d_k_lo", e.d_ks.front()},
               {"d_k_hi", e.d_ks.back()},
               {"slope", fixed(slope)},
               {"saturated", percent_text(max_saturated)},
               {"entropy", entropy}});
}

SectionVerdict scaling(const Explanation& e, const Scales& s, Fields, ExplainSection& section) {
  double slope = 0, saturated = 0;
  std::vector<std::string> described;  // the claim is about 1/sqrt(d_k): another scaling is described, not judged
  std::copy_if(e.scales.begin(), e.scales.end(), std::back_inserter(described),
               [&](const auto& scale) { return scale != s.ref && scale != s.prop; });
  if (s.prop != "sqrt_dk" && !s.prop.empty()) described.push_back(s.prop);
  for (const auto& scale : described)
    section.paragraphs.push_back(
        text("explain", "scaling.paragraph", {{"summary", scaling_summary(e, scale, slope, saturated)}}));
  if (s.prop != "sqrt_dk") return verdict("scaling.other");
  const Fields f{{"numbers", scaling_summary(e, s.prop, slope, saturated)}};
  if (std::isnan(slope)) return verdict(e.d_ks.size() < kSlopeDks ? "few_d_k" : "no_slope", f);
  if (std::abs(slope) <= 0.1 && saturated < kMild) return verdict("scaling.holds", f);
  return verdict(std::abs(slope) <= 0.25 && saturated < kSaturated ? "scaling.roughly" : "scaling.fails", f);
}

// ---- 5. sizes

// The smallest d_k from which every arm of the proposed scaling ends lower than unscaled (0: none); `list` gets each.
std::size_t training_from(const Explanation& e, const std::string& prop, std::string& list) {
  std::vector<const TrainingPoint*> points;
  for (const auto& p : e.training->points)
    if (p.scale == prop && !p.versus_reference.empty()) points.push_back(&p);
  std::string label;
  for (const auto* p : points) {  // by label, then d_k (training_evidence's order)
    if (p->label != label) list += (list.empty() ? "" : "; ") + p->label + ":";
    list += fmt::format("{} d_k {} {}", p->label == label ? "," : "", p->d_k, p->versus_reference);
    label = p->label;
  }
  std::vector<std::size_t> d_ks;
  for (const auto* p : points) d_ks.push_back(p->d_k);
  std::sort(d_ks.begin(), d_ks.end());
  for (const auto d : d_ks)
    if (std::all_of(points.begin(), points.end(),
                    [&](const auto* p) { return p->d_k < d || p->versus_reference == "lower"; }))
      return d;
  return 0;
}

SectionVerdict sizes(const Explanation& e, const Scales& s, Fields f, ExplainSection& section) {
  if (e.training) section.figures.push_back("runs_vs_dk");
  if (s.ref.empty()) return verdict("no_reference");
  std::string shares;
  for (const auto d_k : e.d_ks)
    shares +=
        fmt::format("{}d_k {}: {}", shares.empty() ? "" : ", ", d_k, percent_text(e.arm(d_k, s.ref)->saturated_share));
  section.paragraphs.push_back(text("explain", "sizes.paragraph", {{"shares", shares}}));
  for (const auto& [key, share] : {std::pair<std::string, double>{"mild", kMild}, {"most", kSaturated}}) {
    std::size_t from = 0;  // the smallest d_k from which every unscaled saturated share reaches `share` (0: none)
    for (auto d_k = e.d_ks.rbegin(); d_k != e.d_ks.rend() && e.arm(*d_k, s.ref)->saturated_share >= share; ++d_k)
      from = *d_k;
    f[key] = from;
    f[key + "_from"] = text("explain", from ? "sizes.from" : "sizes.from_none", {{"d_k", from}});
  }
  f["numbers"] = text("explain", "sizes.numbers", f);
  // Mild: under a quarter of the queries saturated at the smallest d_k; grown: over half at the largest, and between.
  const bool ends_hold = e.arm(e.d_ks.front(), s.ref)->saturated_share < 0.25 &&
                         e.arm(e.d_ks.back(), s.ref)->saturated_share >= kSaturated;
  const bool init_holds = ends_hold && monotone(e, s.ref, &ArmMeasurement::saturated_share, true);
  f["quantity"] = "the saturated share", f["direction"] = "grow";
  if (!e.training) return verdict(init_holds ? "sizes.init_holds" : ends_hold ? "not_monotone" : "sizes.init_fails", f);
  std::string list;
  const std::size_t from = training_from(e, s.prop, list);
  f["from"] = from;
  f["list"] = list.empty() ? "no comparable arms" : list;
  f["loss_tolerance"] = fmt::format("{:g}%", 100 * tolerance("loss").relative);
  f["training"] = text("explain", "sizes.training", f);
  if (init_holds) return verdict(from ? "sizes.trains_better" : "sizes.init_only", f);
  return verdict(from ? "sizes.training_only" : "sizes.fails", f);
}

}  // namespace

std::vector<ExplainSection> explain_sections(const Explanation& e) {
  const Scales s(e);
  using Decide = SectionVerdict (*)(const Explanation&, const Scales&, Fields, ExplainSection&);
  const std::vector<std::tuple<std::string, std::vector<std::string>, Decide>> steps{
      {"growth", {"score_hist", "score_std_vs_dk"}, growth},
      {"saturation", {"sorted_weights", "heatmap", "entropy_vs_std", "max_prob_vs_std", "earned_vs_dk"}, saturation},
      {"gradient", {"jacobian_vs_std", "score_grad_vs_dk", "w_grad_vs_dk"}, gradient},
      {"scaling", {"score_std_vs_dk", "entropy_vs_std", "saturated_vs_dk"}, scaling},
      {"sizes", {"saturated_vs_dk", "score_grad_vs_dk"}, sizes}};
  std::vector<ExplainSection> sections;
  for (const auto& [id, figures, decide] : steps) {
    ExplainSection& x = sections.emplace_back();
    x.id = id;
    x.number = static_cast<int>(sections.size());
    x.title = text("explain", id + ".title");
    x.claim = text("explain", id + ".claim");
    x.figures = figures;
    x.verdict = decide(e, s, s.ref.empty() ? Fields{} : step_fields(e, s), x);
    if (e.d_ks.size() < 2) x.verdict = verdict("one_d_k", {{"d_k", e.d_ks.front()}});  // every step compares d_ks
  }
  return sections;
}

}  // namespace xgrad::report
