#include "report/claims.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

#include <fmt/args.h>
#include <fmt/format.h>

#include "common/escape.h"
#include "common/registry.h"
#include "nn/scaling.h"
#include "report/tables.h"
#include "report/web_assets.h"
#include "train/run_files.h"

namespace xgrad::report {

double Tolerance::between(double a, double b) const {
  return std::max(absolute, relative * std::max(std::fabs(a), std::fabs(b)));
}

const std::vector<Tolerance>& tolerances() {
  static const std::vector<Tolerance> table{
      {"loss", 0.02, 0, true,
       "a loss 2% apart is within what the batch order alone moves it; one seed has no spread to tell"},
      {"steps", 0.10, 1, true,
       "the first step a noisy training curve crosses a threshold moves by several percent with the batch order"},
      {"gradient", 0.02, 0, false,
       "a mean of equal gradient norms over other steps differs in its last bits; 2% is no result"},
      {"entropy", 0.02, 0, false, "attention entropies 2% apart describe the same spread of weights"},
      {"share", 0, 0, false, "a share of steps or runs counts whole events: any difference is one"},
      {"probability", 0, 0.02, false,
       "accuracies and attention weights (0 to 1) 0.02 apart are one or two answers in a hundred: no result"},
      {"length_change", 0, 0.05, false,
       "an accuracy or attention weight that moves by 0.05 between two lengths has changed beyond the eval batches' "
       "noise"},
      {"logit_growth", 1.0 / 3, 0, false,
       "a largest attention logit within a factor of 1.5 of its start moves with the batches; beyond it, it grew"}};
  return table;
}

const Tolerance& tolerance(const std::string& name) {
  for (const Tolerance& t : tolerances())
    if (t.name == name) return t;
  throw std::out_of_range("no tolerance is named '" + name + "'");
}

const std::vector<Claim>& claims() {
  static const std::vector<Claim> table{
      {"trains_better", "trains better (final loss)", "final_loss", Better::lower, "loss"},
      {"starts_less_saturated", "starts less saturated (entropy at the start)", "entropy_first", Better::higher,
       "entropy"},
      {"more_gradient_step0_{w}", "more {w} gradient at step 0", "grad_norm_step0_{w}", Better::higher, "gradient"},
      {"more_gradient_before_loss_{w}", "more {w} gradient before the loss threshold", "mean_grad_norm_before_loss_{w}",
       Better::higher, "gradient"},
      {"more_gradient_{w}", "more {w} gradient over all steps", "mean_grad_norm_{w}", Better::higher, "gradient"},
      {"fewer_zero_gradients_{w}", "fewer exactly-zero {w} gradients", "frac_zero_grad_{w}", Better::lower, "share"},
      {"reaches_loss_sooner", "reaches the loss threshold sooner", "step_to_loss", Better::lower, "steps", true},
      {"reaches_accuracy_sooner", "reaches the accuracy threshold sooner", "step_to_accuracy", Better::lower, "steps",
       true},
      {"diverges_less", "diverges less often", "diverged", Better::lower, "share", false, false},
      {"less_lr_sensitive", "less sensitive to the learning rate", "lr_sensitivity", Better::lower, "loss"}};
  return table;
}

std::string outcome_name(Outcome o) {
  switch (o) {
    case Outcome::better:
      return "better";
    case Outcome::worse:
      return "worse";
    case Outcome::same:
      return "same";
    default:
      return "not decided";
  }
}

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

bool over_used_runs(const std::string& statistic) {
  for (const Statistic& s : statistics())
    for (const auto& w : attention_weights())
      if (statistic_name(s.name, w) == statistic) return s.over_used_runs;
  return false;
}

// The statistic per (seed, data_seed) of an arm's runs: several runs of one pair count as their mean; a run without
// a value is left out, or counts as kNever with never_is_worst.
std::map<nlohmann::json, double> per_seed(const Comparison& c, const ArmStats& arm, const Claim& claim,
                                          const std::string& statistic) {
  std::map<nlohmann::json, std::vector<double>> values;
  for (auto i : over_used_runs(statistic) ? arm.used : arm.kept) {
    double v = c.stats[i][statistic];
    if (!std::isfinite(v)) {
      if (!claim.never_is_worst) continue;
      v = kNever;
    }
    values[seed_key(c.runs[i].config)].push_back(v);
  }
  std::map<nlohmann::json, double> mean;
  for (const auto& [seed, v] : values) {
    double sum = 0;
    for (double x : v) sum += x;
    mean[seed] = sum / static_cast<double>(v.size());
  }
  return mean;
}

// The subject's value against the baseline's: better, worse or the same within `tol` (never reached is the worst).
Outcome order(double subject, double baseline, double tol, Better better) {
  if (std::isinf(subject) && std::isinf(baseline)) return Outcome::same;
  const double d = subject - baseline;  // +inf or -inf when one side never reached: no tolerance covers it
  if (std::isfinite(d) && std::fabs(d) <= tol) return Outcome::same;
  return (d < 0) == (better == Better::lower) ? Outcome::better : Outcome::worse;
}

// Why a claim cannot be decided for these arms whatever the numbers, or "".
std::string undecidable(const Comparison& c, const std::string& statistic, const ArmStats& s, const ArmStats& b) {
  // A side whose every run was cut short ends where it stopped, not where training would have: nothing to judge.
  if (s.only_incomplete() || b.only_incomplete()) return "a side has only runs cut short";
  if (statistic != "final_loss") return "";
  if (s.kept.empty() || b.kept.empty()) return "every run of a side diverged";
  if (s.stat("final_loss").n == 0 || b.stat("final_loss").n == 0) return "a side has no finite final loss";
  // Two losses near zero differ by more than 2% for no reason worth a verdict.
  if (solved(s, c) && solved(b, c)) return "both solved the task";
  if (!s.learned() && !b.learned()) return "neither learned";
  return "";
}

Verdict judge_pair(const Comparison& c, const Claim& claim, const std::string& w, const ArmPair& p) {
  const ArmStats& s = c.arms[p.subject];
  const ArmStats& b = c.arms[p.baseline];
  Verdict v;
  v.claim = statistic_name(claim.id, w);
  v.w = w;
  v.statistic = statistic_name(claim.statistic, w);
  v.subject = p.subject;
  v.baseline = p.baseline;
  v.subject_value = s.stat(v.statistic).mean;
  v.baseline_value = b.stat(v.statistic).mean;
  const Tolerance& tol = tolerance(claim.tolerance);
  const auto ss = per_seed(c, s, claim, v.statistic), bs = per_seed(c, b, claim, v.statistic);
  if (claim.by_seed) {  // counts the shared seeds even where not decided
    const Verdict by_seed = compare_values(ss, bs, claim.better, tol);
    v.outcome = by_seed.outcome;
    v.paired = by_seed.paired;
    v.n_shared = by_seed.n_shared;
    v.seeds_better = by_seed.seeds_better;
    v.seeds_worse = by_seed.seeds_worse;
    v.seeds_same = by_seed.seeds_same;
    if (v.paired) v.why_not = by_seed.why_not;
  }
  const std::string why_not = undecidable(c, v.statistic, s, b);
  if (!why_not.empty() || ss.empty() || bs.empty()) {
    v.outcome = Outcome::not_decided;
    v.why_not = why_not.empty() ? "a side has no value" : why_not;
    return v;
  }
  if (v.paired) return v;
  const MeanSd& sm = s.stat(v.statistic);
  const MeanSd& bm = b.stat(v.statistic);
  const double share_s = static_cast<double>(sm.n) / static_cast<double>(s.kept.size());
  const double share_b = static_cast<double>(bm.n) / static_cast<double>(b.kept.size());
  if (claim.never_is_worst && share_s != share_b) {  // reached in a larger share of seeds: better
    v.outcome = share_s > share_b ? Outcome::better : Outcome::worse;
    return v;
  }
  v.tolerance = tol.between(sm.mean, bm.mean);
  if (tol.seed_sd)
    for (double sd : {sm.sd, bm.sd})
      if (std::isfinite(sd)) v.tolerance = std::max(v.tolerance, sd);
  v.outcome = order(sm.mean, bm.mean, v.tolerance, claim.better);
  if (!std::isfinite(sm.mean) || !std::isfinite(bm.mean))
    v.outcome = Outcome::not_decided, v.why_not = "neither reaches it";
  return v;
}

// `axis` and the settings of the entry it names: what a pair of arms may differ in.
std::string key_without_axis(const nlohmann::json& settings, const std::string& axis, bool with_lr) {
  std::vector<std::string> keys = own_settings(settings, axis);
  keys.push_back(axis);
  if (with_lr) keys.push_back("lr");
  return key_without(settings, keys);
}

// Items (arms, or the first arms of lr groups with with_lr) that agree on every setting but `axis` (and, with_lr, the
// learning rate) form a group; in each, the one holding `baseline` against each other, or without one every two,
// the earlier as the baseline.
std::vector<ArmPair> pairs_of(const Comparison& c, const std::vector<std::size_t>& arms, const std::string& axis,
                              const std::string& baseline, bool with_lr) {
  std::map<std::string, std::vector<std::size_t>> groups;
  std::vector<std::string> order_of_groups;
  for (const std::size_t a : arms) {
    const std::string key = key_without_axis(c.arms[a].settings, axis, with_lr);
    if (!groups.count(key)) order_of_groups.push_back(key);
    groups[key].push_back(a);
  }
  std::vector<ArmPair> pairs;
  for (const auto& key : order_of_groups) {
    const auto& g = groups[key];
    const auto base = std::find_if(g.begin(), g.end(),
                                   [&](std::size_t a) { return setting_text(c.arms[a].settings, axis) == baseline; });
    for (std::size_t i = 0; i < g.size(); ++i)
      for (std::size_t j = i + 1; j < g.size(); ++j) {
        if (base != g.end() && g[i] != *base && g[j] != *base) continue;
        const bool j_is_base = base != g.end() && g[j] == *base;
        pairs.push_back(j_is_base ? ArmPair{g[i], g[j]} : ArmPair{g[j], g[i]});
      }
  }
  return pairs;
}

void lr_verdicts(const Comparison& c, const std::string& axis, const std::string& baseline, std::vector<Verdict>& out) {
  std::vector<std::size_t> firsts;
  for (const LrGroup& g : c.lr_groups) firsts.push_back(g.arms.front());
  const auto group_of = [&](std::size_t arm) -> const LrGroup& {
    return *std::find_if(c.lr_groups.begin(), c.lr_groups.end(),
                         [&](const LrGroup& g) { return g.arms.front() == arm; });
  };
  for (const ArmPair& p : pairs_of(c, firsts, axis, baseline, true)) {
    const LrGroup& gs = group_of(p.subject);
    const LrGroup& gb = group_of(p.baseline);
    const LrComparison cmp = compare_lr_sensitivity(c, gs, gb);
    Verdict v;
    v.claim = "less_lr_sensitive";
    v.statistic = "lr_sensitivity";
    v.subject = gs.arms.front();
    v.baseline = gb.arms.front();
    v.subject_value = cmp.sensitivity_a;
    v.baseline_value = cmp.sensitivity_b;
    v.paired = cmp.paired;
    v.n_shared = cmp.n_shared;
    v.seeds_better = cmp.seeds_b_more;
    v.seeds_worse = cmp.seeds_a_more;
    v.seeds_same = cmp.seeds_same;
    v.tolerance = cmp.tolerance;
    v.why_not = cmp.reason;
    v.outcome = !cmp.decided           ? Outcome::not_decided
                : cmp.about_same       ? Outcome::same
                : cmp.a_more_sensitive ? Outcome::worse
                                       : Outcome::better;
    out.push_back(v);
  }
}

}  // namespace

nlohmann::json seed_key(const nlohmann::json& config) {
  return nlohmann::json::array({config.value("seed", nlohmann::json()), config.value("data_seed", nlohmann::json())});
}

Verdict compare_values(const std::map<nlohmann::json, double>& subject,
                       const std::map<nlohmann::json, double>& baseline, Better better, const Tolerance& tol) {
  Verdict v;
  bool never = true;  // neither side reaches the threshold in any shared seed
  for (const auto& [seed, x] : subject) {
    const auto it = baseline.find(seed);
    if (it == baseline.end()) continue;
    ++v.n_shared;
    never = never && std::isinf(x) && std::isinf(it->second);
    const Outcome o = order(x, it->second, tol.between(x, it->second), better);
    (o == Outcome::better ? v.seeds_better : o == Outcome::worse ? v.seeds_worse : v.seeds_same) += 1;
  }
  v.paired = v.n_shared > 0;
  v.outcome = !v.paired                      ? Outcome::not_decided
              : v.seeds_better == v.n_shared ? Outcome::better
              : v.seeds_worse == v.n_shared  ? Outcome::worse
              : v.seeds_same == v.n_shared   ? Outcome::same
                                             : Outcome::not_decided;
  if (!v.paired)
    v.why_not = "no seed in common";
  else if (never)
    v.outcome = Outcome::not_decided, v.why_not = "neither reaches it";
  else if (v.outcome == Outcome::not_decided)
    v.why_not = "the seeds disagree";
  return v;
}

std::vector<ArmPair> arm_pairs(const Comparison& c, const std::string& axis, const std::string& baseline) {
  std::vector<std::size_t> arms(c.arms.size());
  for (std::size_t a = 0; a < arms.size(); ++a) arms[a] = a;
  return pairs_of(c, arms, axis, baseline, false);
}

std::vector<Verdict> judge(const Comparison& c, const std::string& axis, const std::string& baseline) {
  std::vector<Verdict> out;
  const auto pairs = arm_pairs(c, axis, baseline);
  for (const Claim& claim : claims()) {
    if (claim.statistic == "lr_sensitivity") continue;
    const bool per_weight = claim.id.find("{w}") != std::string::npos;
    for (const ArmPair& p : pairs)
      for (const auto& w : per_weight ? attention_weights() : std::vector<std::string>{""})
        out.push_back(judge_pair(c, claim, w, p));
  }
  lr_verdicts(c, axis, baseline, out);
  return out;
}

std::string arm_name(const Comparison& c, const ArmStats& arm) {
  if (c.axis != "scale") return setting_text(arm.settings, c.axis);
  return is_reference_scale(arm.scale()) ? "unscaled" : scale_label(arm);
}

std::string baseline_of(const Comparison& c) {
  if (!c.baseline.empty() || c.axis != "scale") return c.baseline;
  for (const nn::ScalingEntry* e : Registry<nn::ScalingEntry>::instance().entries())
    if (e->is_reference) return e->name;
  return "";
}

namespace {

// report/text/claims.md's templates by "claim, outcome" (the claim's id without "_{w}").
const std::map<std::string, std::string>& claim_templates() {
  static const std::map<std::string, std::string> templates = [] {
    std::map<std::string, std::string> out;
    const std::string text = web_assets::kClaimsMd;
    std::size_t at = 0;
    while (at < text.size()) {
      const std::size_t end = std::min(text.find('\n', at), text.size());
      const std::string line = text.substr(at, end - at);
      at = end + 1;
      const std::size_t colon = line.find(": ");
      if (line.rfind("- ", 0) == 0 && colon != std::string::npos)
        out[line.substr(2, colon - 2)] = line.substr(colon + 2);
    }
    return out;
  }();
  return templates;
}

// A statistic's value as its sentence shows it: a step ("step 37", "never"), a share ("12.5%"), else 3 digits.
std::string value_text(const Claim& claim, double v) {
  if (claim.tolerance == "steps") return std::isfinite(v) ? fmt::format("step {:.0f}", v) : "never";
  if (claim.tolerance == "share") return format_percent(v);
  return std::isfinite(v) ? fmt::format("{:.3g}", v) : train::format_number(v);
}

// How the verdict was reached: over the shared seeds, or by the means.
std::string how_text(const Verdict& v) {
  if (!claim_of(v).by_seed) return "by the shares of runs";
  if (v.paired && v.outcome != Outcome::not_decided)
    return v.n_shared == 1 ? "in the 1 seed both have" : fmt::format("in each of the {} seeds both have", v.n_shared);
  if (v.paired)
    return fmt::format("better in {}, worse in {}, within the tolerance in {} of the {} seeds both have",
                       v.seeds_better, v.seeds_worse, v.seeds_same, v.n_shared);
  return "by the means, no seed in common" +
         (std::isfinite(v.tolerance) ? ": tolerance " + train::format_number(v.tolerance) : std::string());
}

}  // namespace

const Claim& claim_of(const Verdict& v) {
  for (const Claim& claim : claims())
    if (statistic_name(claim.id, v.w) == v.claim) return claim;
  throw std::out_of_range("no claim is named '" + v.claim + "'");
}

std::string claim_label(const Verdict& v) {
  std::string label = claim_of(v).label;
  if (const auto at = label.find("{w}"); at != std::string::npos) label.replace(at, 3, v.w == "w_q" ? "W_q" : "W_k");
  return label;
}

std::string verdict_sentence(const Comparison& c, const Verdict& v) {
  const Claim& claim = claim_of(v);
  std::string id = claim.id;
  if (const auto at = id.find("_{w}"); at != std::string::npos) id.erase(at);
  std::string outcome = outcome_name(v.outcome);
  std::replace(outcome.begin(), outcome.end(), ' ', '_');
  const auto it = claim_templates().find(id + ", " + outcome);
  if (it == claim_templates().end())
    throw std::out_of_range("report/text/claims.md has no line '" + id + ", " + outcome + "'");
  fmt::dynamic_format_arg_store<fmt::format_context> args;
  args.push_back(fmt::arg("subject", escape_name(arm_name(c, c.arms[v.subject]))));
  args.push_back(fmt::arg("baseline", escape_name(arm_name(c, c.arms[v.baseline]))));
  args.push_back(fmt::arg("subject_value", value_text(claim, v.subject_value)));
  args.push_back(fmt::arg("baseline_value", value_text(claim, v.baseline_value)));
  args.push_back(fmt::arg("how", how_text(v)));
  args.push_back(fmt::arg("why_not", v.why_not));
  args.push_back(fmt::arg("w", v.w == "w_q" ? std::string("W_q") : v.w == "w_k" ? std::string("W_k") : v.w));
  return fmt::vformat(it->second, args);
}

}  // namespace xgrad::report
