#include "report/markdown.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include <fmt/format.h>

#include "common/escape.h"
#include "common/registry.h"
#include "nn/scaling.h"
#include "report/claims.h"
#include "report/tables.h"

namespace xgrad::report {
using train::format_number;

namespace fs = std::filesystem;

namespace {

// Arms that differ only in scale mode, the reference (unscaled if present) against each of the others.
struct ScalePair {
  const ArmStats* ref;
  const ArmStats* other;
  std::string label;  // the shared settings, e.g. "d_k=64 adamw lr=0.003"
};

// `keys` without the scales' own settings (softcap_cap): a pair's shared label names those with each scale instead.
std::vector<std::string> without_own_scale_settings(const Comparison& c, std::vector<std::string> keys) {
  for (const ArmStats& arm : c.arms)
    for (const auto& own : own_settings(arm.settings, "scale"))
      keys.erase(std::remove(keys.begin(), keys.end(), own), keys.end());
  return keys;
}

std::vector<ScalePair> scale_pairs(const Comparison& c) {
  const auto extra = without_own_scale_settings(c, distinguishing_keys(c.arms));
  std::vector<ScalePair> pairs;
  for (const ScaleGroup& g : scale_groups(c.arms)) {
    const ArmStats& ref = c.arms[g.arms.front()];  // the unscaled reference when the group has one
    for (std::size_t i = 1; i < g.arms.size(); ++i)
      pairs.push_back({&ref, &c.arms[g.arms[i]], arm_label(ref, extra, {"scale"})});
  }
  return pairs;
}

// LR groups whose arms differ in nothing but scale (with its own settings) and lr are compared across scalings.
std::string lr_group_key(const Comparison& c, const LrGroup& g) {
  const nlohmann::json& settings = c.arms[g.arms.front()].settings;
  std::vector<std::string> keys = own_settings(settings, "scale");
  keys.push_back("scale");
  keys.push_back("lr");
  return key_without(settings, keys);
}

std::string sig(double v) { return std::isfinite(v) ? fmt::format("{:.3g}", v) : format_number(v); }

// "1e-06×": the near-zero fraction of GradientStats.
std::string near_zero_name() { return fmt::format("{:g} ×", train::kNearZeroGradFraction); }

// What solved() asks of every kept seed of an arm.
std::string solved_rule(const Comparison& c) {
  return fmt::format("final accuracy ≥ {:g} and final loss ≤ {:g} nats in every seed", c.accuracy_threshold,
                     kSolvedLoss);
}

// How many of its runs an arm has that reached a threshold, and when (mean and sd over those runs).
struct Reach {
  std::size_t reached, n;
  double step, sd;
};

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

std::string run_status(const RunRecord& run) {
  std::string s;
  if (run.diverged) s = fmt::format("diverged at step {}", run.diverged_step);
  if (run.incomplete) s += (s.empty() ? "" : "; ") + std::string("incomplete: ") + run.incomplete_reason;
  return s.empty() ? "complete" : s;
}

std::string shown_path(const std::string& dir, const std::string& out_dir) {
  std::error_code ec;
  const fs::path rel = fs::proximate(dir, out_dir, ec);
  return ec || rel.empty() ? dir : rel.string();
}

}  // namespace

std::vector<std::string> no_scaling_comparison_notes(const Comparison& c) {
  const std::vector<UnpairedScaleArm> unpaired = unpaired_scale_arms(c.arms);
  if (unpaired.empty()) return {};
  if (scale_pairs(c).empty()) {
    std::set<std::string> all;
    for (const auto& u : unpaired) all.insert(u.differs_in.begin(), u.differs_in.end());
    const std::vector<std::string> ordered = in_setting_order(c.arms, all);
    return {"no scaling comparison: no two arms differ only in scale; arms of different scales also differ in " +
            join(ordered, ", ")};
  }
  const auto extra = distinguishing_keys(c.arms);
  std::vector<std::string> out;
  for (const auto& u : unpaired)
    out.push_back(fmt::format("no scaling comparison for {}: every arm of another scale also differs from it in {}",
                              arm_label(c.arms[u.arm], extra), join(u.differs_in, ", ")));
  return out;
}

namespace {

// A verdict with nothing to say: a statistic neither arm has (no W_q columns), or a share of events none had.
bool says_nothing(const Verdict& v) {
  if (v.why_not == "a side has no value" && !std::isfinite(v.subject_value) && !std::isfinite(v.baseline_value))
    return true;
  return (v.statistic == "diverged" || v.statistic.rfind("frac_zero_grad_", 0) == 0) && v.subject_value == 0 &&
         v.baseline_value == 0;
}

// "d_k=64 adamw lr=0.003, unscaled vs sqrt_dk: ": the settings a pair shares, then its two arms.
std::string pair_head(const Comparison& c, const Verdict& v) {
  const ArmStats& b = c.arms[v.baseline];
  std::vector<std::string> extra = distinguishing_keys(c.arms), omit{c.axis};
  for (const auto& own : own_settings(b.settings, c.axis))
    extra.erase(std::remove(extra.begin(), extra.end(), own), extra.end());
  extra.erase(std::remove(extra.begin(), extra.end(), c.axis), extra.end());
  if (v.statistic == "lr_sensitivity") omit.push_back("lr");
  return fmt::format("{}, {} vs {}: ", arm_label(b, extra, omit), arm_name(c, b), arm_name(c, c.arms[v.subject]));
}

}  // namespace

StoryChecks story_checks(const Comparison& c) {
  StoryChecks checks;
  std::map<std::string, std::array<std::vector<std::string>, 3>> by_pair;  // holds, fails, undecided
  std::vector<std::string> order;
  for (const Verdict& v : judge(c, c.axis, baseline_of(c))) {
    if (says_nothing(v)) continue;
    const std::string head = pair_head(c, v);
    if (!by_pair.count(head)) order.push_back(head);
    const std::size_t kind = v.outcome == Outcome::better ? 0 : v.outcome == Outcome::not_decided ? 2 : 1;
    by_pair[head][kind].push_back(verdict_sentence(c, v));
  }
  for (const auto& head : order)
    for (std::size_t kind = 0; kind < 3; ++kind)
      if (!by_pair[head][kind].empty())
        (kind == 0   ? checks.holds
         : kind == 1 ? checks.fails
                     : checks.undecided)
            .push_back(head + join(by_pair[head][kind], "; ") + ".");
  return checks;
}

namespace {

// "0.67 / 0.34 / 0.13": one value per d_k.
std::string per_d_k(const std::vector<std::string>& values) { return join(values, " / "); }

std::string short_number(double v) { return std::isfinite(v) ? fmt::format("{:.2g}", v) : std::string("—"); }

}  // namespace

namespace {

// Ten findings at most, none dropped silently: lines give way in the order gradient counts per scaling, then
// saturation and score-gradient lines (from the last), then the final-loss lines of the last scalings; one line
// then says what was left out and where it is.
std::vector<FindingLine> at_most_ten(std::vector<FindingLine> lines,
                                     const std::vector<std::pair<std::size_t, std::string>>& scaling_lines,
                                     const std::vector<std::size_t>& gradient_lines,
                                     const std::vector<std::size_t>& saturation_lines) {
  constexpr std::size_t kMax = 10;
  if (lines.size() <= kMax) return lines;
  std::vector<bool> dropped(lines.size(), false);
  std::size_t kept = lines.size();
  bool gradients_out = false, saturation_out = false;
  std::vector<std::string> scalings_out;
  for (auto it = gradient_lines.rbegin(); it != gradient_lines.rend() && kept + 1 > kMax; ++it, --kept)
    dropped[*it] = gradients_out = true;
  for (auto it = saturation_lines.rbegin(); it != saturation_lines.rend() && kept + 1 > kMax; ++it, --kept)
    dropped[*it] = saturation_out = true;
  for (auto it = scaling_lines.rbegin(); it != scaling_lines.rend() && kept + 1 > kMax; ++it, --kept) {
    dropped[it->first] = true;
    scalings_out.insert(scalings_out.begin(), it->second);
  }
  std::vector<std::string> what;
  if (!scalings_out.empty())
    what.push_back("the final-loss counts of " + join(scalings_out, ", ") + " against unscaled");
  if (gradients_out) what.push_back("the W_q / W_k gradient counts per scaling");
  if (saturation_out) what.push_back("the step-0 saturation and per-query score gradient per scaling and d_k");
  std::vector<FindingLine> out;
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (!dropped[i]) out.push_back(std::move(lines[i]));
  const std::string where = !scalings_out.empty() || gradients_out
                                ? "in \"Where the usual story holds\" and \"Scale modes compared\""
                                : "in the summary figures";
  const FindingLine note{"To keep the findings to ten lines, " + join(what, "; ") + " are left out here: they are " +
                             where +
                             (saturation_out && where != "in the summary figures"
                                  ? " (saturation and score gradients: in the summary figures)"
                                  : "") +
                             ".",
                         !scalings_out.empty() || gradients_out ? "story" : "summary-figures"};
  out.insert(out.end() - 1, note);  // before the runs line, which stays last
  return out;
}

// How often the unscaled gradient is the larger, out of the comparisons where both sides have it.
struct GradientLarger {
  std::size_t larger = 0, n = 0;
  void add(double unscaled, double other) {
    if (!std::isfinite(unscaled) || !std::isfinite(other)) return;
    ++n;
    larger += unscaled > other ? 1 : 0;
  }
};

// How the comparisons of one scaling with unscaled came out, over its scale pairs.
struct ScalingVerdicts {
  std::size_t better = 0, equal = 0, worse = 0, no_loss = 0, all_diverged = 0, not_learned = 0, disagree = 0;
  std::size_t both_solved = 0;  // both arms solved the task (solved()): counted apart
  std::size_t paired = 0, unpaired = 0;
  // Unscaled W_q (W_k) gradient larger at step 0, before the loss threshold and as a mean over all steps.
  GradientLarger q_step0, q_before, q_all, k_step0, k_before, k_all;
  // The largest exactly-zero and near-zero W_q shares of steps over the pairs, unscaled and the other scaling.
  double zero_q_ref = kNoValue, zero_q_other = kNoValue, near_q_ref = kNoValue, near_q_other = kNoValue;
};

// `m` raised to `v` where v is finite.
void raise_to(double& m, double v) {
  if (std::isfinite(v)) m = std::isfinite(m) ? std::max(m, v) : v;
}

void count_gradients(const ArmStats& r, const ArmStats& o, ScalingVerdicts& v) {
  v.q_step0.add(r.stat("grad_norm_step0_w_q").mean, o.stat("grad_norm_step0_w_q").mean);
  v.q_before.add(r.stat("mean_grad_norm_before_loss_w_q").mean, o.stat("mean_grad_norm_before_loss_w_q").mean);
  v.q_all.add(r.stat("mean_grad_norm_w_q").mean, o.stat("mean_grad_norm_w_q").mean);
  v.k_step0.add(r.stat("grad_norm_step0_w_k").mean, o.stat("grad_norm_step0_w_k").mean);
  v.k_before.add(r.stat("mean_grad_norm_before_loss_w_k").mean, o.stat("mean_grad_norm_before_loss_w_k").mean);
  v.k_all.add(r.stat("mean_grad_norm_w_k").mean, o.stat("mean_grad_norm_w_k").mean);
  raise_to(v.zero_q_ref, r.stat("frac_zero_grad_w_q").mean);
  raise_to(v.zero_q_other, o.stat("frac_zero_grad_w_q").mean);
  raise_to(v.near_q_ref, r.stat("frac_near_zero_grad_w_q").mean);
  raise_to(v.near_q_other, o.stat("frac_near_zero_grad_w_q").mean);
}

// The findings line of the W_q / W_k gradients of one scaling against unscaled: at step 0, before the loss threshold
// and over all steps, with the shares of steps where the unscaled W_q gradient vanished.
std::string gradient_line(const std::string& s, const ScalingVerdicts& v) {
  const auto of = [](const GradientLarger& g) { return fmt::format("{} of {}", g.larger, g.n); };
  std::string text = fmt::format(
      "The unscaled W_q gradient norm is larger than with {} at step 0 in {} comparison{}, before the loss "
      "threshold in {} and as a mean over all steps in {} (a mean that grows with the steps a run keeps a non-zero "
      "loss)",
      s, of(v.q_step0), v.q_step0.n == 1 ? "" : "s", of(v.q_before), of(v.q_all));
  text += v.k_step0.n == v.k_before.n && v.k_before.n == v.k_all.n
              ? fmt::format("; the W_k gradient in {}, {} and {} of {}.", v.k_step0.larger, v.k_before.larger,
                            v.k_all.larger, v.k_all.n)
              : fmt::format("; the W_k gradient in {}, {} and {}.", of(v.k_step0), of(v.k_before), of(v.k_all));
  if (!std::isfinite(v.zero_q_ref) || !std::isfinite(v.zero_q_other)) return text;
  const bool near = std::isfinite(v.near_q_ref) && std::isfinite(v.near_q_other);
  if (v.zero_q_ref == 0 && v.zero_q_other == 0 && (!near || (v.near_q_ref == 0 && v.near_q_other == 0)))
    return text + fmt::format(" No step had an exactly-zero{} W_q gradient on either side.",
                              near ? fmt::format(" or near-zero (below {} step 0)", near_zero_name()) : "");
  text += fmt::format(" The unscaled W_q gradient is exactly zero on up to {} of steps ({}: up to {})",
                      format_percent(v.zero_q_ref), s, format_percent(v.zero_q_other));
  if (near)
    text += fmt::format(" and below {} its step-0 norm on up to {} ({}: up to {})", near_zero_name(),
                        format_percent(v.near_q_ref), s, format_percent(v.near_q_other));
  return text + ".";
}

std::string subject_name(const Comparison& c, const Verdict& v) { return arm_name(c, c.arms[v.subject]); }
std::string baseline_name(const Comparison& c, const Verdict& v) { return arm_name(c, c.arms[v.baseline]); }

// The trains_better verdicts of one subject value, counted; the gradients over the same pairs.
ScalingVerdicts count_verdicts(const Comparison& c, const std::vector<const Verdict*>& verdicts) {
  ScalingVerdicts v;
  for (const Verdict* x : verdicts) {
    (x->paired ? v.paired : v.unpaired) += 1;
    const std::string& why = x->why_not;
    if (why == "both solved the task")
      ++v.both_solved;
    else if (why == "every run of a side diverged")
      ++v.no_loss, ++v.all_diverged;
    else if (why == "a side has no finite final loss")
      ++v.no_loss;
    else if (why == "neither learned")
      ++v.not_learned;
    else if (x->outcome == Outcome::better)
      ++v.better;
    else if (x->outcome == Outcome::worse)
      ++v.worse;
    else if (x->outcome == Outcome::same)
      ++v.equal;
    else
      ++v.disagree;
    count_gradients(c.arms[x->baseline], c.arms[x->subject], v);
  }
  return v;
}

// "<subject> trains better than <baseline> in k of n comparisons (rule); as well in ...; worse in ...; not decided".
std::string verdict_line(const Comparison& c, const std::string& s, const std::string& baseline,
                         const ScalingVerdicts& v, std::size_t n) {
  const std::string rule = !v.unpaired ? "final loss lower by more than 2% in every seed both arms have"
                           : !v.paired ? "final loss lower by more than the larger seed sd or 2%"
                                       : "final loss lower by more than 2% in every seed both arms have, or where "
                                         "they share no seed by more than the larger seed sd or 2% of the mean";
  std::string text = fmt::format("{} trains better than {} in {} of {} comparison{} ({})", s, baseline, v.better, n,
                                 n == 1 ? "" : "s", rule);
  if (v.both_solved)
    text += fmt::format("; both solved the task in {} ({}), not counted either way", v.both_solved, solved_rule(c));
  if (v.equal) text += fmt::format("; as well in {}", v.equal);
  if (v.worse) text += fmt::format("; worse in {}", v.worse);
  const std::size_t undecided = v.no_loss + v.not_learned + v.disagree;
  if (undecided) {
    std::vector<std::string> why;
    if (v.no_loss)
      why.push_back(fmt::format("{} in {}",
                                v.all_diverged == v.no_loss ? "every run of a side diverged"
                                : v.all_diverged == 0       ? "a side has no finite final loss"
                                                            : "every run of a side diverged, or a side has no finite "
                                                              "final loss",
                                v.no_loss));
    if (v.not_learned) why.push_back(fmt::format("neither learned in {}", v.not_learned));
    if (v.disagree) why.push_back(fmt::format("seeds disagree in {}", v.disagree));
    text += fmt::format("; not decided in {} ({})", undecided, join(why, "; "));
  }
  return text + ".";
}

// Which lines may give way when there are more than ten: the per-scaling gradient counts first, then saturation
// and score gradients; a scaling's final-loss line only when even those cannot make room.
struct FindingRoles {
  std::vector<std::pair<std::size_t, std::string>> scaling_lines;  // index into the findings, scaling
  std::vector<std::size_t> gradient_lines, saturation_lines;
};

// Per scaling compared with unscaled: final loss and W_q / W_k gradient, counted over the scale pairs; or why there
// is no comparison.
void scaling_findings(const Comparison& c, std::vector<FindingLine>& out, FindingRoles& roles) {
  std::vector<std::string> scales;
  std::map<std::string, std::vector<const Verdict*>> of_subject;
  const std::vector<Verdict> verdicts = judge(c, c.axis, baseline_of(c));
  for (const Verdict& v : verdicts) {
    if (v.claim != "trains_better") continue;
    const std::string s = subject_name(c, v);
    if (!of_subject.count(s)) scales.push_back(s);
    of_subject[s].push_back(&v);
  }
  for (const auto& s : scales) {
    const ScalingVerdicts v = count_verdicts(c, of_subject[s]);
    out.push_back({verdict_line(c, s, baseline_name(c, *of_subject[s].front()), v, of_subject[s].size()), "story"});
    roles.scaling_lines.push_back({out.size() - 1, s});
    if (c.axis == "scale" && (v.q_all.n || v.k_all.n)) {
      out.push_back({gradient_line(s, v), "story"});
      roles.gradient_lines.push_back(out.size() - 1);
    }
  }
  if (!scales.empty()) return;
  std::set<std::string> modes;
  for (const ArmStats& arm : c.arms) modes.insert(arm.scale());
  const auto notes = no_scaling_comparison_notes(c);
  std::string text = modes.size() == 1
                         ? fmt::format("Every arm has scale mode {}: no scaling comparison.", *modes.begin())
                     : !notes.empty() ? notes.front() + "."
                                      : "No unscaled arm has a counterpart differing only in scale mode: no "
                                        "comparison with unscaled attention.";
  out.push_back({text, "story"});
}

// One scaling's cells of a saturation line, one per d_k: step-0 entropy, share of saturated queries, and the range
// of the arms' median score gradients relative to the loss before the threshold (ArmStats::score_grad_relative_*).
struct SaturationCells {
  std::vector<std::string> entropy, saturated, grad;
  bool any_entropy = false, any_saturated = false, any_grad = false;
};

SaturationCells saturation_cells(const Comparison& c, const std::vector<const ArmStats*>& group, const std::string& s,
                                 const std::vector<std::size_t>& d_ks) {
  SaturationCells cells;
  for (auto d : d_ks) {
    std::vector<double> entropy, saturated;
    double lo = kNoValue, hi = kNoValue;
    for (const ArmStats* armp : group) {
      const ArmStats& arm = *armp;
      if (arm.scale() != s || arm.d_k() != d) continue;
      for (auto i : arm.kept)
        if (c.stats[i]["first_measured_step"] == 0) {
          entropy.push_back(c.stats[i]["entropy_first"]);
          saturated.push_back(c.stats[i]["saturated_first"]);
        }
      const double m = arm.stat("score_grad_relative").median;
      if (std::isfinite(m)) {
        lo = std::isnan(lo) ? m : std::min(lo, m);
        hi = std::isnan(hi) ? m : std::max(hi, m);
      }
    }
    const MeanSd me = mean_sd(entropy), ms = mean_sd(saturated);
    cells.any_entropy = cells.any_entropy || me.n > 0;
    cells.any_saturated = cells.any_saturated || ms.n > 0;
    cells.any_grad = cells.any_grad || std::isfinite(lo);
    cells.entropy.push_back(me.n ? format_number(me.mean, 2) : "—");
    cells.saturated.push_back(ms.n ? format_percent(ms.mean) : "—");
    cells.grad.push_back(!std::isfinite(lo) ? "—"
                         : lo == hi         ? short_number(lo)
                                            : short_number(lo) + "–" + short_number(hi));
  }
  return cells;
}

// The saturation and score-gradient lines of one group of arms, per scaling (reference first) and d_k.
void group_saturation(const Comparison& c, const std::vector<const ArmStats*>& group, const std::string& prefix,
                      std::vector<FindingLine>& out, FindingRoles& roles) {
  std::vector<std::size_t> d_ks;
  std::vector<std::string> all_scales;
  for (const ArmStats* arm : group) {
    if (std::find(d_ks.begin(), d_ks.end(), arm->d_k()) == d_ks.end()) d_ks.push_back(arm->d_k());
    if (std::find(all_scales.begin(), all_scales.end(), arm->scale()) == all_scales.end())
      all_scales.push_back(arm->scale());
  }
  std::sort(d_ks.begin(), d_ks.end());
  std::vector<std::string> dk_text;
  for (auto d : d_ks) dk_text.push_back(std::to_string(d));
  const std::string at_d_k = fmt::format("at d_k = {}", per_d_k(dk_text));
  std::vector<std::string> entropy_parts, saturated_parts, grad_parts;
  bool any_saturated = false;
  for (const auto& s : all_scales) {
    const SaturationCells cells = saturation_cells(c, group, s, d_ks);
    any_saturated = any_saturated || cells.any_saturated;
    const std::string name = is_reference_scale(s) ? "unscaled" : s;
    if (cells.any_entropy) {
      entropy_parts.push_back(fmt::format("{} {}", name, per_d_k(cells.entropy)));
      saturated_parts.push_back(fmt::format("{} {}", name, per_d_k(cells.saturated)));
    }
    if (cells.any_grad) grad_parts.push_back(fmt::format("{} {}", name, per_d_k(cells.grad)));
  }
  if (!entropy_parts.empty()) {
    std::string text = prefix + fmt::format("Saturation at step 0, first layer: attention entropy {} nats {}",
                                            join(entropy_parts, " vs "), at_d_k);
    if (any_saturated) text += fmt::format("; queries with max weight > 0.99: {}", join(saturated_parts, " vs "));
    out.push_back({text + ".", "summary-figures"});
    roles.saturation_lines.push_back(out.size() - 1);
  }
  if (!grad_parts.empty()) {
    out.push_back({prefix + fmt::format("Median per-query score gradient relative to the loss, before the loss "
                                        "threshold (per run the median of ‖dLoss/d(score row)‖ / loss over the "
                                        "logged steps up to the step it reaches the threshold, or every step if it "
                                        "never does: a saturated softmax passes almost no gradient whatever its "
                                        "loss, while a run that solved the task has a small one only because its "
                                        "loss is small; a range spans the arms' optimizers and learning rates): "
                                        "{} {}.",
                                        join(grad_parts, " vs "), at_d_k),
                   "summary-figures"});
    roles.saturation_lines.push_back(out.size() - 1);
  }
}

// Saturation and the per-query gradient, per group of arms that agree on every other distinguishing setting (task,
// d_model, ...): a number pooled over tasks would appear nowhere below. Optimizer and learning rate do not split a
// group (the gradient line gives a range).
void saturation_findings(const Comparison& c, std::vector<FindingLine>& out, FindingRoles& roles) {
  const auto group_keys = distinguishing_keys(c.arms);
  std::vector<std::string> group_order;
  std::map<std::string, std::vector<const ArmStats*>> groups;
  for (const ArmStats& arm : c.arms) {
    std::string label;
    for (const auto& k : group_keys) label += (label.empty() ? "" : " ") + k + "=" + setting_text(arm.settings, k);
    if (!groups.count(label)) group_order.push_back(label);
    groups[label].push_back(&arm);
  }
  const std::size_t kMaxGroups = 3;  // two lines each: the ten-line budget keeps room for the other findings
  for (std::size_t gi = 0; gi < group_order.size() && gi < kMaxGroups; ++gi) {
    const std::string& group_label = group_order[gi];
    group_saturation(c, groups[group_label], group_label.empty() ? "" : group_label + ": ", out, roles);
  }
  if (group_order.size() > kMaxGroups)
    out.push_back({fmt::format("Saturation and the per-query gradient of {} more setting groups: in the summary "
                               "figures.",
                               group_order.size() - kMaxGroups),
                   "summary-figures"});
}

// LR sensitivity over shared learning rates, counted over the unscaled groups and their counterparts.
void lr_finding(const Comparison& c, std::vector<FindingLine>& out) {
  std::size_t lr_more = 0, lr_not = 0, lr_undecided = 0, lr_same = 0, lr_same_paired = 0;
  for (const LrGroup& gr : c.lr_groups) {
    if (!is_reference_scale(c.arms[gr.arms.front()].scale())) continue;
    for (const LrGroup& go : c.lr_groups) {
      if (&go == &gr || lr_group_key(c, go) != lr_group_key(c, gr)) continue;
      const LrComparison cmp = compare_lr_sensitivity(c, gr, go);
      if (!cmp.decided)
        ++lr_undecided;
      else if (cmp.about_same)
        ++lr_same, lr_same_paired += cmp.paired ? 1 : 0;
      else if (cmp.a_more_sensitive)
        ++lr_more;
      else
        ++lr_not;
    }
  }
  const std::size_t lr_n = lr_more + lr_not + lr_undecided + lr_same;
  if (lr_n)
    out.push_back({fmt::format("Unscaled is more sensitive to the learning rate in {} of {} comparison{} (over the "
                               "learning rates both scalings share){}{}.",
                               lr_more, lr_n, lr_n == 1 ? "" : "s",
                               lr_same ? fmt::format("; about the same ({}) in {}",
                                                     lr_same_paired == lr_same ? "within 2% of the objective in every "
                                                                                 "seed both have"
                                                     : lr_same_paired == 0
                                                         ? "within the seed sd or 2%"
                                                         : "within 2% of the objective in every seed both have, or "
                                                           "without a seed in common within the seed sd or 2%",
                                                     lr_same)
                                       : std::string(),
                               lr_undecided ? fmt::format("; not decided in {}", lr_undecided) : std::string()),
                   "story"});
}

// How many runs diverged or were cut short.
FindingLine runs_finding(const Comparison& c) {
  std::size_t diverged = 0, incomplete = 0;
  for (const auto& run : c.runs) {
    diverged += run.diverged ? 1 : 0;
    incomplete += run.incomplete ? 1 : 0;
  }
  std::string runs = diverged ? fmt::format(
                                    "{} of the {} runs diverged; they are left out of every statistic of their "
                                    "arm and counted in its diverged column",
                                    diverged, c.runs.size())
                              : fmt::format("None of the {} runs diverged", c.runs.size());
  if (incomplete) runs += fmt::format("; {} {} cut short (incomplete)", incomplete, incomplete == 1 ? "was" : "were");
  return {runs + ".", "runs-read"};
}

}  // namespace

std::vector<FindingLine> findings(const Comparison& c) {
  std::vector<FindingLine> out;
  if (c.runs.empty()) return out;
  FindingRoles roles;
  scaling_findings(c, out, roles);
  saturation_findings(c, out, roles);
  lr_finding(c, out);
  out.push_back(runs_finding(c));
  return at_most_ten(std::move(out), roles.scaling_lines, roles.gradient_lines, roles.saturation_lines);
}

std::vector<std::string> duplicate_seed_warnings(const Comparison& c, const std::string& relative_to,
                                                 bool for_markdown) {
  std::vector<std::string> out;
  const auto extra = distinguishing_keys(c.arms);
  const auto name = [&](const std::string& text) { return for_markdown ? markdown_name(text) : escape_name(text); };
  for (const ArmStats& arm : c.arms)
    for (const auto& group : arm.duplicate_seeds) {
      std::vector<std::string> dirs;
      for (auto i : group)
        dirs.push_back(name(relative_to.empty() ? c.runs[i].dir : shown_path(c.runs[i].dir, relative_to)));
      const nlohmann::json& config = c.runs[group.front()].config;
      out.push_back(fmt::format(
          "arm {}: seed {} (data_seed {}) is in {} runs: {}; all count in the arm's means and sd (so the sd "
          "understates the spread over seeds), the seeds column counts it once",
          name(arm_label(arm, extra)), name(setting_text(config, "seed")), name(setting_text(config, "data_seed")),
          group.size(), join(dirs, ", ")));
    }
  return out;
}

namespace {

// A relative path as a link target: every byte but letters, digits and -._~/ percent-encoded (RFC 3986), so that a
// space or parenthesis in a directory name cannot end the link.
std::string url_path(const std::string& path) {
  std::string out;
  for (const unsigned char ch : path)
    out += std::isalnum(ch) || std::string_view("-._~/").find(static_cast<char>(ch)) != std::string_view::npos
               ? std::string(1, static_cast<char>(ch))
               : fmt::format("%{:02X}", ch);
  return out;
}

// A figure in report.md: its image plots/<name>.png (alt text `title`), the links to its SVG and script. The title
// (data: an optimizer's name, a setting's value) cannot end the alt text or start a link of its own, and the name is
// a link target whatever it holds.
std::string figure_image(const std::string& title, const std::string& name) {
  std::string alt;
  for (const char ch : title) {
    if (ch == '[' || ch == ']' || ch == '\\') alt += '\\';
    alt += ch;
  }
  const std::string target = "plots/" + url_path(name);
  return fmt::format("![{}]({}.png)\n\n([SVG]({}.svg), script {}.gp)\n\n", markdown_escape(alt), target, target,
                     target);
}

// "0.208 ± 0.048" (sd bars) or "7.1e-07 [5.2e-14, 4.2e-06]" (min-max bars).
std::string point_text(const SummaryPoint& p, bool theory, bool sd) {
  if (!std::isfinite(p.y)) return p.n_diverged ? "diverged" : "—";
  std::string out = sig(p.y);
  if (!theory && std::isfinite(p.lo) && std::isfinite(p.hi) && p.lo != p.hi)
    out += sd ? " ± " + sig(p.hi - p.y) : " [" + sig(p.lo) + ", " + sig(p.hi) + "]";
  if (!theory && p.n_diverged) out += fmt::format(" ({} diverged)", p.n_diverged);
  return out;
}

// One figure: its heading, image (when drawn), caption, the numbers as a table (unless the figure says not to) and
// its notes, so a reader has the numbers even without gnuplot.
std::string figure_markdown(const SummaryFigure& f, const ReportContext& ctx) {
  std::string md = "### " + markdown_escape(f.title) + "\n\n";
  const bool drawn = std::any_of(ctx.plots.summary_drawn.begin(), ctx.plots.summary_drawn.end(),
                                 [&](const PlotFigure& p) { return p.name == f.name; });
  if (drawn) md += figure_image(f.title, f.name);
  md += f.caption + ".\n\n";
  if (!f.tabulate) {
    for (const auto& note : f.notes) md += "- Note: " + note + ".\n";
    return md + (f.notes.empty() ? "" : "\n");
  }
  std::vector<double> xs;
  for (const SummaryLine& line : f.lines)
    for (const SummaryPoint& p : line.points)
      if (std::find(xs.begin(), xs.end(), p.x) == xs.end()) xs.push_back(p.x);
  std::sort(xs.begin(), xs.end());
  Table t;
  t.header = {f.name.find("_vs_lr") != std::string::npos    ? "line \\ lr"
              : f.name.find("_vs_d_k") != std::string::npos ? "line \\ d_k"
                                                            : "line \\ " + f.x_label};
  for (double x : xs) t.header.push_back(fmt::format("{:g}", x));
  for (const SummaryLine& line : f.lines) {
    std::vector<std::string> row{line.label};
    for (double x : xs) {
      const auto it =
          std::find_if(line.points.begin(), line.points.end(), [&](const SummaryPoint& p) { return p.x == x; });
      row.push_back(it == line.points.end() ? "" : point_text(*it, line.theory, f.error_bar_sd));
    }
    t.rows.push_back(std::move(row));
  }
  md += t.markdown() + "\n";
  for (const auto& note : f.notes) md += "- Note: " + note + ".\n";
  if (!f.notes.empty()) md += "\n";
  return md;
}

// The summary figures: each one's image (when drawn), caption and numbers, so the findings that link here have
// their details even without gnuplot.
std::string summary_section(const ReportContext& ctx) {
  std::string md = "<a id=\"summary-figures\"></a>\n\n## Summary figures\n\n";
  if (ctx.summary.empty()) {
    md += "These runs have a single d_k and no arms that differ only in learning rate: no summary figure.\n\n";
    return md;
  }
  for (const SummaryFigure& f : ctx.summary) md += figure_markdown(f, ctx);
  return md;
}

}  // namespace

namespace {

// The counts of runs and the sweeps' notes.
std::string runs_summary(const Comparison& c, const ReportContext& ctx) {
  std::string md;
  std::size_t n_complete = 0, n_diverged = 0, n_incomplete = 0;
  for (const auto& run : c.runs) {
    n_incomplete += run.incomplete ? 1 : 0;
    n_diverged += run.diverged ? 1 : 0;
    n_complete += run.incomplete ? 0 : 1;
  }
  md += fmt::format("{} runs in {} arms ({} complete, {} incomplete, {} diverged).\n\n", c.runs.size(), c.arms.size(),
                    n_complete, n_incomplete, n_diverged);
  for (const Note& note : ctx.sweep_notes) {
    md += "**Note:** " + markdown_escape(note.text) + ".\n\n";
    if (note.items.empty()) continue;
    md += fmt::format("<details><summary>list ({})</summary>\n\n", note.items.size());
    for (const std::string& item : note.items) md += "- " + markdown_text(item) + "\n";  // paths: inert text
    md += "\n</details>\n\n";
  }
  if (!ctx.explain_page.empty())
    md += "The argument for 1/sqrt(d_k), step by step, measured on this experiment's model and runs: [" +
          markdown_escape(ctx.explain_page) + "](" + url_path(ctx.explain_page) + ").\n\n";

  return md;
}

// The preset's own sections, first.
std::string preset_part(const ReportContext& ctx) {
  std::string md;
  if (!ctx.preset.name.empty())
    md += "Preset: `" + ctx.preset.name + "`" + (ctx.preset.quick ? " (its --quick grid)" : "") +
          (!ctx.preset_sections.empty() ? "; its sections come first, then the usual report.\n\n"
           : ctx.preset_note.empty()    ? "; it has no sections of its own: the usual report.\n\n"
                                        : ".\n\n");
  if (!ctx.preset_note.empty()) md += "**Note:** " + markdown_escape(ctx.preset_note) + ".\n\n";
  for (const PresetSection& section : ctx.preset_sections) {
    md += "<a id=\"" + section.anchor + "\"></a>\n\n## " + section.title + "\n\n";
    for (const SummaryFigure& f : section.figures) md += figure_markdown(f, ctx);
    md += section.markdown;
    if (!section.markdown.empty() && section.markdown.back() != '\n') md += "\n";
    md += "\n";
  }

  return md;
}

std::string findings_section(const Comparison& c) {
  std::string md = "## Findings\n\n";
  for (const FindingLine& f : findings(c)) md += "- " + markdown_escape(f.text) + " [→ details](#" + f.anchor + ")\n";
  return md + "\n";
}

// What the table's columns and the sentences' verdicts mean.
std::string how_to_read(const Comparison& c) {
  std::string md;
  md +=
      "## How to read this\n\n"
      "An *arm* is a set of runs whose config.json agree on everything but the seed (seed, data_seed, the output "
      "directory and logging settings are ignored); the table aggregates each arm over its seeds. *final loss* is "
      "the mean training loss over the last 20 steps of a run (as in summary.json), shown as mean ± sample standard "
      "deviation over seeds; *final acc* likewise. Both leave out diverged runs, which the *diverged* column "
      "counts with the step they stopped at. A run *diverged* when its loss or gradient became NaN or Inf, or "
      "when its loss stayed finite but blew up: its final loss is more than " +
      fmt::format("{:g}", train::kDivergedLossFactor) +
      " times its step-0 loss (its step is then the first whose loss passed that). *step loss≤x* / *step acc≥y* is the "
      "first step at which the mean "
      "over the last " +
      std::to_string(c.window) +
      " steps reaches the threshold, averaged over the seeds that reached it; \"(k/n)\" says only k of n seeds "
      "did and \"never\" that none did. *mean loss (AUC)* is the mean loss over all steps: the area under the "
      "loss curve divided by its length, so runs of equal length compare. *W_q / W_k grad =0* is the fraction "
      "of steps at which the gradient of every layer's query (key) weights was exactly zero — what a fully "
      "saturated softmax passes back in float; *W_q / W_k grad <" +
      fmt::format("{:g}", train::kNearZeroGradFraction) + "·step 0* the fraction at which its norm was below " +
      fmt::format("{:g}", train::kNearZeroGradFraction) +
      " times the norm at the run's first step (or exactly zero): a gradient that has all but vanished, which "
      "the exactly-zero count reads as 0%. Both are counted, like the mean gradient norms and as in summary.json, "
      "over the steps whose loss and gradient norm were finite (a step skipped under --on-nan skip has no "
      "gradient). Every statistic of an arm leaves out its diverged runs alike (counted in *diverged*), so no "
      "number or sentence is decided by a run that blew up; only the LR sensitivity counts a diverged run, as "
      "its initial loss. *LR sensitivity* (Wortsman et al. 2023, \"Small-scale proxies for "
      "large-scale Transformer training instabilities\", sec. 3.2) is, over arms that differ only in learning "
      "rate, the mean over learning rates of min(final loss, initial loss) — a diverged run counts as its "
      "initial loss — minus the lowest of those values; 0 means every learning rate tried did as well as the "
      "best; two scalings that share seeds are compared seed by seed, each seed's sensitivity over its own runs "
      "(more sensitive when higher by more than 2% of the seed's objective in every seed, about the same when "
      "within that in every seed, otherwise not decided), and without a seed in common two sensitivities count as "
      "about the same when they differ by less than the larger seed sd of the objective or 2% of it; a comparison "
      "is not decided when either scaling ended below the chance loss "
      "(a uniform guess) by more than that at no learning rate: a curve flat at chance is not insensitive. Incomplete "
      "runs (cut short) are plotted but left out of an arm's numbers unless the arm has no "
      "complete run. Gradient norms are measured before the optimizer step; AdamW normalises its updates, so "
      "there a smaller gradient does not by itself mean a smaller update. Every sentence below is generated from these "
      "numbers. Which of two arms trains better is decided "
      "seed by seed where they share seeds: better (worse) when its final loss is lower (higher) by more than 2% "
      "in every seed both have, as well when within 2% in every one, and otherwise not decided (the seeds "
      "disagree) — a mean ± sd is never the verdict; arms without a seed in common are compared by their means, "
      "equal within the larger seed standard deviation or 2% of the loss. Where neither arm learned (mean final "
      "loss not below the chance loss by more than the seed sd or 2%) which trains better is not decided.\n\n";

  return md;
}

// The table of arms, the summary figures, duplicate seeds and the LR sensitivity table.
std::string results_section(const Comparison& c, const ReportContext& ctx) {
  std::string md;
  md += "## Results by arm\n\n" + arm_table(c).markdown() + "\n";
  md += summary_section(ctx);
  const auto duplicates = duplicate_seed_warnings(c, ctx.out_dir, true);
  if (!duplicates.empty()) {
    md +=
        "**Duplicate seeds.** Runs of one arm with the same seed and data_seed are the same run twice, not two "
        "seeds:\n\n";
    for (const auto& d : duplicates) md += "- " + markdown_escape(d) + "\n";
    md += "\n";
  }
  const Table lr = lr_table(c);
  if (!lr.rows.empty())
    md += "<a id=\"lr-sensitivity\"></a>\n\n### Learning-rate sensitivity\n\n" + lr.markdown() + "\n";

  return md;
}

std::string scale_modes_section(const Comparison& c) {
  const auto unpaired = no_scaling_comparison_notes(c);
  if (unpaired.empty()) return "";
  std::string md = "<a id=\"scale-modes\"></a>\n\n## Arms without a comparison\n\n";
  for (const auto& s : unpaired) md += "- " + markdown_escape(s) + ".\n";
  return md + "\n";
}

// Where the usual story holds and where it does not, check by check.
// Per claim and subject, how many comparisons came out better, worse, the same and not decided.
Table claims_table(const Comparison& c, const std::vector<Verdict>& verdicts) {
  Table t;
  t.header = {"claim", c.axis, "better", "worse", "same", "not decided"};
  std::map<std::pair<std::string, std::string>, std::array<std::size_t, 4>> counts;
  std::vector<std::pair<std::string, std::string>> order;
  for (const Verdict& v : verdicts) {
    if (says_nothing(v)) continue;
    const std::pair<std::string, std::string> key{claim_label(v), arm_name(c, c.arms[v.subject])};
    if (!counts.count(key)) order.push_back(key), counts[key] = {0, 0, 0, 0};
    counts[key][static_cast<std::size_t>(v.outcome)] += 1;
  }
  for (const auto& key : order) {
    std::vector<std::string> row{key.first, key.second};
    for (std::size_t n : counts[key]) row.push_back(std::to_string(n));
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::string story_section(const Comparison& c) {
  const std::string baseline = baseline_of(c);
  const bool usual_story = c.axis == "scale" && is_reference_scale(baseline);
  std::string md = "<a id=\"story\"></a>\n\n## Claims against " +
                   (baseline.empty() ? std::string("each other") : markdown_name(baseline)) + "\n\n";
  if (usual_story)
    md +=
        "The usual story: without 1/sqrt(d_k), scores grow with d_k, the softmax saturates, W_q and W_k get little "
        "gradient, and training is worse and more sensitive to the learning rate. It holds where a scaling is "
        "better than unscaled.\n\n";
  const std::vector<Verdict> verdicts = judge(c, c.axis, baseline);
  const Table table = claims_table(c, verdicts);
  if (table.rows.empty())
    md += "No two arms differ only in " + markdown_name(c.axis) + ", so no claim is judged here.\n\n";
  else
    md += "Comparisons of arms that differ only in " + markdown_name(c.axis) + ", counted by verdict:\n\n" +
          table.markdown() + "\n";
  const StoryChecks checks = story_checks(c);
  if (!table.rows.empty()) {
    md += "<details><summary>Every verdict, per comparison</summary>\n\n";
    for (const auto* list : {&checks.fails, &checks.holds, &checks.undecided})
      for (const auto& line : *list) md += "- " + markdown_escape(line) + "\n";
    md += "\n</details>\n\n";
  }
  bool single_seed = false;
  for (const ArmStats& arm : c.arms) single_seed = single_seed || arm.n_seeds < 2;
  if (single_seed)
    md += "Some arms have a single seed: their numbers carry no spread, and a difference may be seed noise.\n\n";
  return md;
}

std::string plots_section(const ReportContext& ctx) {
  std::string md;
  md += "## Plots\n\n";
  if (!ctx.plots_requested) md += "Plots were not requested (--plots false).\n\n";
  if (!ctx.plots.note.empty()) md += "Note: " + ctx.plots.note + "\n\n";
  for (const auto& fig : ctx.plots.drawn)
    md += fmt::format("### {}\n\n{}.\n\n", fig.name, fig.caption) + figure_image(fig.name, fig.name);

  return md;
}

std::string thresholds_section(const Comparison& c, const ReportContext& ctx) {
  std::string md;
  md += "## Thresholds and definitions used\n\n";
  std::set<std::string> thresholds;
  for (const ArmStats& arm : c.arms) {
    const auto chance = arm.settings.find("chance_loss");
    thresholds.insert(ctx.loss_threshold_option >= 0
                          ? format_number(arm.loss_threshold)
                          : fmt::format("{} (half the chance loss {} of task {})", format_number(arm.loss_threshold),
                                        chance != arm.settings.end() && chance->is_number()
                                            ? format_number(chance->get<double>())
                                            : std::string("unknown"),
                                        setting_text(arm.settings, "task")));
  }
  md += "- loss threshold: " + join(std::vector<std::string>(thresholds.begin(), thresholds.end()), ", ") +
        (ctx.loss_threshold_option >= 0 ? " (given)" : "") + "\n";
  md += fmt::format("- accuracy threshold: {:g}\n", c.accuracy_threshold);
  md += fmt::format("- steps-to-threshold window: trailing mean over {} step{}\n", c.window, c.window == 1 ? "" : "s");
  md +=
      "- seeds: the distinct (seed, data_seed) pairs among an arm's runs; runs of one arm sharing a pair are all "
      "kept in its numbers and listed under *Duplicate seeds*\n";
  md +=
      "- steps to a threshold, unscaled vs another mode: the story holds when a smaller share of the unscaled runs "
      "reaches the threshold, or when every run of both arms reaches it and the unscaled mean step is later by "
      "more than the tolerance: the larger of 10% of the later mean step and the larger seed standard deviation "
      "of the step (at least 1 step). A smaller difference is reported as about the same, and equal shares below "
      "all runs are not decided\n";
  const auto pairs = scale_pairs(c);
  if (std::any_of(pairs.begin(), pairs.end(),
                  [&](const ScalePair& p) { return solved(*p.ref, c) && solved(*p.other, c); }))
    md += "- solved the task: " + solved_rule(c) +
          " (kept runs); where both arms of a comparison solved it, the final loss decides nothing and the "
          "comparison is counted apart\n";
  md += "- final loss / accuracy: mean over the last min(20, steps) steps of a run\n";
  md += "- entropy and score std: first attention layer, mean over its heads (queries as measured by the trainer)\n\n";

  return md;
}

// Every run read, its arm and status, and the directories that could not be read.
std::string runs_read_section(const Comparison& c, const ReportContext& ctx) {
  std::string md;
  md += "<a id=\"runs-read\"></a>\n\n## Runs read\n\n";
  Table runs;
  runs.header = {"run", "arm", "seed", "steps", "status"};
  const auto extra = distinguishing_keys(c.arms);
  std::map<std::size_t, const ArmStats*> arm_of_run;
  for (const ArmStats& arm : c.arms)
    for (auto i : arm.runs) arm_of_run[i] = &arm;
  for (std::size_t i = 0; i < c.runs.size(); ++i) {
    const RunRecord& run = c.runs[i];
    runs.rows.push_back({markdown_name(shown_path(run.dir, ctx.out_dir)), arm_label(*arm_of_run[i], extra),
                         setting_text(run.config, "seed"), fmt::format("{}/{}", run.series.size(), run.steps_planned),
                         run_status(run)});
  }
  md += runs.markdown() + "\n";
  if (!ctx.skipped.empty()) {
    md += "Skipped (unreadable):\n\n";
    for (const auto& s : ctx.skipped) md += "- " + markdown_text(s) + "\n";  // paths and names: inert text
    md += "\n";
  }
  return md;
}

}  // namespace

std::string Note::line() const {
  constexpr std::size_t kShown = 5;
  std::string listed;
  for (std::size_t i = 0; i < items.size() && i < kShown; ++i) listed += (i ? ", " : ": ") + items[i];
  if (items.size() > kShown) listed += fmt::format(" and {} more", items.size() - kShown);
  return text + listed;
}

std::string report_markdown(const Comparison& c, const ReportContext& ctx) {
  return "# xgrad compare: attention scaling report\n\n" + runs_summary(c, ctx) + preset_part(ctx) +
         findings_section(c) + how_to_read(c) + results_section(c, ctx) + scale_modes_section(c) + story_section(c) +
         plots_section(ctx) + thresholds_section(c, ctx) + runs_read_section(c, ctx);
}

}  // namespace xgrad::report
