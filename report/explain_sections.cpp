// The five sections of `xgrad explain`, each verdict decided from the measurements. The thresholds are stated in
// each verdict's text, so a reader can disagree with them on the numbers shown.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "report/explain.h"
#include "report/explain_figures.h"
#include "report/stats.h"

namespace xgrad::report {

namespace {

constexpr double kSaturated = 0.5;  // a share of saturated queries from which "most queries are saturated"
constexpr double kMild = 0.1;       // a share below which saturation is mild

SectionVerdict holds(std::string text) { return {"holds", "holds", std::move(text)}; }
SectionVerdict fails(std::string text) { return {"does not hold", "fails", std::move(text)}; }
SectionVerdict partly(std::string verdict, std::string text) { return {std::move(verdict), "partly", std::move(text)}; }

std::string pct(double share) { return std::isnan(share) ? "n/a" : fmt::format("{:.1f}%", 100 * share); }

// The unscaled arm's name, or "" when none was requested.
std::string reference_scale(const Explanation& e) {
  for (const auto& s : e.scales)
    if (is_reference_scale(s)) return s;
  return "";
}

// The scaling the argument proposes (sqrt_dk) when requested, else the first scaling that is not the reference.
std::string proposed_scale(const Explanation& e) {
  const std::string ref = reference_scale(e);
  if (std::find(e.scales.begin(), e.scales.end(), "sqrt_dk") != e.scales.end()) return "sqrt_dk";
  for (const auto& s : e.scales)
    if (s != ref) return s;
  return "";
}

// Least-squares slope of log(y) against log(d_k) over the arms of `scale`; NaN with fewer than two d_ks.
double log_log_slope(const Explanation& e, const std::string& scale, double ArmMeasurement::*field) {
  std::vector<double> x, y;
  for (const auto d_k : e.d_ks)
    if (const auto* a = e.arm(d_k, scale); a && a->*field > 0) {
      x.push_back(std::log(static_cast<double>(d_k)));
      y.push_back(std::log(a->*field));
    }
  if (x.size() < 2) return std::nan("");
  const double mx = mean_sd(x).mean, my = mean_sd(y).mean;
  double sxy = 0, sxx = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
  }
  return sxy / sxx;
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

const ArmMeasurement& first_arm(const Explanation& e, const std::string& scale) {
  return *e.arm(e.d_ks.front(), scale);
}
const ArmMeasurement& last_arm(const Explanation& e, const std::string& scale) { return *e.arm(e.d_ks.back(), scale); }

// A section with its text and figures; the verdict and paragraphs are for the caller.
ExplainSection section(std::string id, int number, std::string title, std::string claim,
                       std::vector<std::string> figures) {
  ExplainSection s;
  s.id = std::move(id);
  s.number = number;
  s.title = std::move(title);
  s.claim = std::move(claim);
  s.figures = std::move(figures);
  return s;
}

// ---- 1. growth

ExplainSection growth_section(const Explanation& e) {
  ExplainSection s =
      section("growth", 1, "q·k grows with d_k",
              "A dot product of d_k-dimensional q and k is a sum of d_k products, so with independent components "
              "its standard deviation is sqrt(d_k)·std(q)·std(k): it grows like sqrt(d_k).",
              {"score_hist", "score_std_vs_dk"});
  const std::string ref = reference_scale(e);
  std::string gaps;
  for (const auto& scale : e.scales)
    gaps += fmt::format("{}{} {}", gaps.empty() ? "" : ", ", scale_label_of(scale), pct(theory_gap(e, scale)));
  s.paragraphs.push_back(
      "Measured on one batch of the task's inputs at initialisation, every visible score of the first layer's "
      "queries that may attend to two or more keys (metrics.csv and report.md count only the queries that carry a "
      "target, so their step-0 numbers differ). The "
      "largest gap between the measured score std and the theory's sqrt(d_k)·std(q)·std(k)·multiplier over the "
      "head sizes, per scaling: " +
      gaps + ".");
  if (ref.empty()) {
    s.verdict = partly("not measured",
                       "the unscaled arm was not requested (--scale without none): there is no raw q·k "
                       "to measure; the theory line alone is drawn.");
    return s;
  }
  const double slope = log_log_slope(e, ref, &ArmMeasurement::score_std), worst = theory_gap(e, ref);
  const auto& lo = first_arm(e, ref);
  const auto& hi = last_arm(e, ref);
  const std::string nums = fmt::format(
      "unscaled score std {:.3g} at d_k {} and {:.3g} at d_k {}; log-log slope {} (theory 0.5); measured within "
      "{} of theory",
      lo.score_std, lo.d_k, hi.score_std, hi.d_k, fixed(slope), pct(worst));
  if (std::isnan(slope))
    s.verdict = partly("not decided", nums + ": a score std of 0 has no logarithm, so no slope.");
  else if (std::abs(slope - 0.5) <= 0.1 && worst <= 0.25)
    s.verdict = holds(nums + " (holds: slope within 0.1 of 0.5 and theory within 25%).");
  else if (slope > 0.2)
    s.verdict = partly("holds more weakly", nums +
                                                " (the slope is not within 0.1 of 0.5, or theory is off by more "
                                                "than 25%: the components are not independent or not of zero mean).");
  else
    s.verdict = fails(nums + ": the scores do not grow with d_k.");
  return s;
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

// How many arms' mean entropy lies on the curve of normal scores of their std (within 0.15 nats or 15%).
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

// "not earned": the saturated queries' peaks fall on the answer's key no more often than chance, within two
// cluster-robust standard errors (ArmMeasurement::earned_se). Empty when nothing was measured.
std::string earned_sentence(const ArmMeasurement& a, bool& earned) {
  earned = false;
  if (std::isnan(a.earned_share)) return "";
  earned = a.earned_share > a.chance_share + 2 * a.earned_se;
  return fmt::format(
      "Of the {} saturated queries whose answer sits at one key (d_k {}, {}), {} put their peak on that key; chance "
      "gives {}, give or take {} (two standard errors, with the queries grouped by head and token: {} groups, each "
      "sharing its q): {}.",
      a.n_answerable_saturated, a.d_k, scale_label_of(a.scale), pct(a.earned_share), pct(a.chance_share),
      pct(2 * a.earned_se), a.n_earned_clusters,
      earned ? "the peaks fall on the answer more often than chance (at initialisation this is built into the "
               "weights and embeddings, not learned)"
             : "the peak is not earned, it comes from the magnitude");
}

ExplainSection saturation_section(const Explanation& e) {
  ExplainSection s =
      section("saturation", 2, "Large scores saturate softmax",
              "Softmax exponentiates, so large scores give one weight near 1 and the rest near 0, and that peak "
              "comes from the scores' magnitude, not from any confidence the model has earned.",
              {"sorted_weights", "heatmap", "entropy_vs_std", "max_prob_vs_std", "earned_vs_dk"});
  const auto [near, worst] = on_curve(e);
  s.paragraphs.push_back(fmt::format(
      "The line is softmax over the same numbers of keys applied to normal scores of the given std (Monte Carlo); {} "
      "of {} measured points lie on it (within 0.15 nats or 15%; the largest gap is {:.2f} nats), so the scores' "
      "spread alone predicts how peaked attention is.",
      near, e.arms.size(), worst));
  const std::string ref = reference_scale(e);
  if (ref.empty()) {
    s.verdict = partly("not measured", "the unscaled arm was not requested (--scale without none).");
    return s;
  }
  const auto& lo = first_arm(e, ref);
  const auto& hi = last_arm(e, ref);
  bool earned = false;
  const std::string earned_text = earned_sentence(hi, earned);
  if (!earned_text.empty())
    s.paragraphs.push_back(earned_text);
  else
    s.paragraphs.push_back(
        "The task names no key its answer needs (Task::answer_positions), so whether a peak is "
        "earned is not measured.");
  const std::string nums = fmt::format(
      "unscaled: {} of queries saturated (largest weight > 0.99) at d_k {}, {} at d_k {}; mean largest weight {:.2f} "
      "→ {:.2f}",
      pct(lo.saturated_share), lo.d_k, pct(hi.saturated_share), hi.d_k, lo.max_prob_mean, hi.max_prob_mean);
  const bool grows = hi.saturated_share >= kSaturated && hi.saturated_share > lo.saturated_share + 0.2;
  const bool explained = near * 5 >= e.arms.size() * 4;  // four points in five on the curve
  if (grows && explained && !earned)
    s.verdict = holds(nums + "; the points lie on the softmax curve" +
                      (earned_text.empty() ? " (whether the peaks fall on the answer is not measured: see below)."
                                           : " and the peaks fall on the answer no more often than chance."));
  else if (grows)
    s.verdict = partly(earned ? "holds, but some peaks are earned" : "holds, off the curve",
                       nums + (earned ? "; the peaks fall on the answer more often than chance."
                                      : "; fewer than four in five points lie on the softmax curve."));
  else
    s.verdict = fails(nums + ": saturation does not take over most queries (50%) as d_k grows.");
  return s;
}

// ---- 3. gradient

// At how many d_k the unscaled W_q gradient is larger than the proposed scaling's, with the largest d_k's numbers.
std::string w_q_comparison(const Explanation& e, const std::string& ref, const std::string& prop, std::size_t& larger) {
  larger = 0;
  std::size_t n = 0;
  for (const auto d_k : e.d_ks) {
    const auto *a = e.arm(d_k, ref), *b = e.arm(d_k, prop);
    n += a && b;
    larger += a && b && a->grad_norm_w_q > b->grad_norm_w_q;
  }
  const auto& hi = last_arm(e, ref);
  const auto& hp = last_arm(e, prop);
  return fmt::format(
      "the W_q gradient norm at step 0 is larger unscaled than under {} at {} of {} head sizes (d_k {}: {:.3g} vs "
      "{:.3g}; W_k {:.3g} vs {:.3g})",
      scale_label_of(prop), larger, n, hi.d_k, hi.grad_norm_w_q, hp.grad_norm_w_q, hi.grad_norm_w_k, hp.grad_norm_w_k);
}

// During training (--runs): at how many d_k the unscaled score gradient relative to the loss is below the scaled one.
std::string training_gradient(const Explanation& e, const std::string& ref, const std::string& prop,
                              std::size_t& smaller, std::size_t& n) {
  smaller = n = 0;
  if (!e.training) return "";
  std::string list;
  for (const auto& p : e.training->points) {
    if (p.scale != ref) continue;
    for (const auto& q : e.training->points)
      if (q.scale == prop && q.d_k == p.d_k && q.group == p.group && std::isfinite(p.score_grad_relative) &&
          std::isfinite(q.score_grad_relative)) {
        ++n;
        smaller += p.score_grad_relative < q.score_grad_relative;
        list += fmt::format("{}{}, d_k {}: {:.3g} vs {:.3g}", list.empty() ? "" : "; ", p.group, p.d_k,
                            p.score_grad_relative, q.score_grad_relative);
      }
  }
  if (n == 0) return "";
  return fmt::format(
      "During training (--runs), the median per-query score gradient relative to the loss is smaller "
      "unscaled than under {} in {} of {} comparisons ({}).",
      scale_label_of(prop), smaller, n, list);
}

ExplainSection gradient_section(const Explanation& e) {
  ExplainSection s =
      section("gradient", 3, "Saturated softmax passes little gradient",
              "A saturated softmax has a Jacobian diag(p) − ppᵀ near zero, so almost no gradient flows back "
              "through the scores and attention stops learning where it looks.",
              {"jacobian_vs_std", "score_grad_vs_dk", "w_grad_vs_dk"});
  const std::string ref = reference_scale(e), prop = proposed_scale(e);
  if (ref.empty()) {
    s.verdict = partly("not measured", "the unscaled arm was not requested (--scale without none).");
    return s;
  }
  const auto& lo = first_arm(e, ref);
  const auto& hi = last_arm(e, ref);
  const bool per_query =
      hi.jacobian_norm_mean < lo.jacobian_norm_mean / 2 && hi.score_grad_median < lo.score_grad_median / 2;
  std::string nums = fmt::format(
      "unscaled, d_k {} → {}: mean Jacobian norm {:.3f} → {:.3f}, median per-query score gradient ‖dLoss/ds‖ {:.3g} "
      "→ {:.3g}",
      lo.d_k, hi.d_k, lo.jacobian_norm_mean, hi.jacobian_norm_mean, lo.score_grad_median, hi.score_grad_median);
  std::size_t larger = 0, smaller = 0, n_training = 0;
  if (!prop.empty()) nums += "; " + w_q_comparison(e, ref, prop, larger);
  const std::string training = training_gradient(e, ref, prop, smaller, n_training);
  if (!training.empty()) s.paragraphs.push_back(training);
  if (!per_query)
    s.verdict = fails(nums + ": " +
                      (hi.jacobian_norm_mean < lo.jacobian_norm_mean / 2 ? "the median per-query score gradient"
                                                                         : "the mean Jacobian norm") +
                      " does not fall by half or more from the smallest d_k to the largest (the rule: both must).");
  else if (larger > 0)
    s.verdict = partly(
        n_training > 0 && smaller * 2 > n_training ? "holds per query and during training" : "holds only per query",
        nums +
            ": the per-query gradient vanishes, but at initialisation the weights that make the "
            "scores get a larger gradient unscaled, not a smaller one (dLoss/dW_q sums over every "
            "query, and unscaled lacks the 1/sqrt(d_k) factor of ds/dq).");
  else
    s.verdict = holds(nums + ".");
  return s;
}

// ---- 4. scaling

std::string scaling_summary(const Explanation& e, const std::string& scale, double& slope, double& max_saturated) {
  slope = log_log_slope(e, scale, &ArmMeasurement::score_std);
  double lo = INFINITY, hi = 0, entropy = INFINITY;
  max_saturated = 0;
  for (const auto d_k : e.d_ks) {
    const auto& a = *e.arm(d_k, scale);
    lo = std::min(lo, a.score_std);
    hi = std::max(hi, a.score_std);
    max_saturated = std::max(max_saturated, a.saturated_share);
    entropy = std::min(entropy, a.entropy_mean);
  }
  return fmt::format(
      "{}: score std between {:.3g} and {:.3g} over d_k {} to {} (log-log slope {}), at most {} of queries "
      "saturated, mean entropy at least {:.2f} nats",
      scale_label_of(scale), lo, hi, e.d_ks.front(), e.d_ks.back(), fixed(slope), pct(max_saturated), entropy);
}

ExplainSection scaling_section(const Explanation& e) {
  ExplainSection s =
      section("scaling", 4, "1/sqrt(d_k) undoes the growth",
              "Dividing q·k by sqrt(d_k) undoes its growth, so scores keep one spread and softmax stays in its "
              "useful range at every d_k.",
              {"score_std_vs_dk", "entropy_vs_std", "saturated_vs_dk"});
  const std::string ref = reference_scale(e), prop = proposed_scale(e);
  double slope_unused = 0, saturated_unused = 0;
  for (const auto& scale : e.scales) {
    if (scale == ref || scale == prop) continue;
    double slope = 0, saturated = 0;
    s.paragraphs.push_back(scaling_summary(e, scale, slope, saturated) + ".");
  }
  if (prop != "sqrt_dk") {  // the claim is about 1/sqrt(d_k): another scaling is described above, not judged
    if (!prop.empty()) s.paragraphs.push_back(scaling_summary(e, prop, slope_unused, saturated_unused) + ".");
    s.verdict = partly("not measured", "--scale without sqrt_dk: the claim is about 1/sqrt(d_k).");
    return s;
  }
  double slope = 0, saturated = 0;
  const std::string nums = scaling_summary(e, prop, slope, saturated);
  if (std::isnan(slope))
    s.verdict = partly("not decided", nums + ": a score std of 0 has no logarithm, so no slope.");
  else if (std::abs(slope) <= 0.1 && saturated < kMild)
    s.verdict = holds(nums + " (holds: slope within 0.1 of 0 and fewer than 10% saturated).");
  else if (std::abs(slope) <= 0.25 && saturated < kSaturated)
    s.verdict = partly("holds roughly", nums + " (slope not within 0.1 of 0, or 10% or more saturated).");
  else
    s.verdict = fails(nums + ".");
  return s;
}

// ---- 5. sizes

// The smallest d_k whose unscaled saturated share reaches `share`, or 0.
std::size_t first_d_k_above(const Explanation& e, const std::string& ref, double share) {
  for (const auto d_k : e.d_ks)
    if (e.arm(d_k, ref)->saturated_share >= share) return d_k;
  return 0;
}

// The smallest d_k from which the proposed scaling ends with a lower final loss than unscaled in every arm at that
// d_k and every larger one (0: none), over the training evidence. `list` gets each arm's outcomes by d_k.
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
  for (const auto d : d_ks) {
    bool all_lower = true;
    for (const auto* p : points) all_lower = all_lower && (p->d_k < d || p->versus_reference == "lower");
    if (all_lower) return d;
  }
  return 0;
}

SectionVerdict sizes_verdict(const Explanation& e, const std::string& nums, bool init_holds) {
  if (!e.training)
    return init_holds ? holds(nums + " (at initialisation; give --runs for training)")
                      : fails(nums +
                              ": at initialisation the problem does not grow from mild (under a quarter of the "
                              "queries saturated at the smallest d_k) to most queries (half at the largest).");
  std::string list;
  const std::size_t from = training_from(e, proposed_scale(e), list);
  const std::string training = fmt::format(
      "; in training, {}'s final loss against unscaled (lower by more than 2% in "
      "every seed, higher, same, both solved, or not decided), {}",
      scale_label_of(proposed_scale(e)), list.empty() ? "no comparable arms" : list);
  if (init_holds && from)
    return holds(fmt::format("{}{}: the scaling trains better from d_k {} on.", nums, training, from));
  if (init_holds) return partly("holds at initialisation only", nums + training + ".");
  if (from) return partly("holds only during training", nums + training + ".");
  return fails(nums + training + ".");
}

ExplainSection sizes_section(const Explanation& e) {
  ExplainSection s =
      section("sizes", 5, "Mild at small d_k, growing with it",
              "The problem is mild at small d_k and grows with it, so the scaling is what keeps attention "
              "well-behaved across the whole range of model sizes.",
              {"saturated_vs_dk", "score_grad_vs_dk"});
  if (e.training) s.figures.push_back("runs_vs_dk");
  const std::string ref = reference_scale(e);
  if (ref.empty()) {
    s.verdict = partly("not measured", "the unscaled arm was not requested (--scale without none).");
    return s;
  }
  std::string shares;
  for (const auto d_k : e.d_ks)
    shares += fmt::format("{}d_k {}: {}", shares.empty() ? "" : ", ", d_k, pct(e.arm(d_k, ref)->saturated_share));
  const std::size_t mild_ends = first_d_k_above(e, ref, kMild), most = first_d_k_above(e, ref, kSaturated);
  s.paragraphs.push_back("Unscaled saturated share by head size: " + shares + ".");
  const std::string nums = fmt::format(
      "unscaled, {} of queries saturated at d_k {} and {} at d_k {}; 10% from d_k {}, half from d_k {} (the rule: "
      "under a quarter at the smallest d_k, over half at the largest)",
      pct(first_arm(e, ref).saturated_share), e.d_ks.front(), pct(last_arm(e, ref).saturated_share), e.d_ks.back(),
      mild_ends ? std::to_string(mild_ends) : "none given", most ? std::to_string(most) : "none given");
  // Mild: under a quarter of the queries saturated at the smallest d_k; grown: over half at the largest.
  const bool init_holds = first_arm(e, ref).saturated_share < 0.25 && last_arm(e, ref).saturated_share >= kSaturated;
  s.verdict = sizes_verdict(e, nums, init_holds);
  return s;
}

}  // namespace

std::vector<ExplainSection> explain_sections(const Explanation& e) {
  std::vector<ExplainSection> sections{growth_section(e), saturation_section(e), gradient_section(e),
                                       scaling_section(e), sizes_section(e)};
  if (e.d_ks.size() < 2)  // every step compares head sizes
    for (auto& s : sections)
      s.verdict = partly("not decided", fmt::format("one head size (d_k {}): each step of the argument compares head "
                                                    "sizes; give two or more with --d-k.",
                                                    e.d_ks.front()));
  return sections;
}

}  // namespace xgrad::report
