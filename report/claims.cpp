#include "report/claims.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "common/escape.h"
#include "common/registry.h"
#include "nn/scaling.h"
#include "report/tables.h"
#include "report/text.h"
#include "train/run_files.h"

namespace xgrad::report {

double Tolerance::between(double a, double b) const {
  return std::max(absolute, relative * std::max(std::fabs(a), std::fabs(b)));
}

const std::vector<Tolerance>& tolerances() {
  static const std::vector<Tolerance> table = [] {
    std::vector<Tolerance> all{{"loss", 0.02, 0, true},
                               {"steps", 0.10, 1, true},
                               {"gradient", 0.02, 0, false},
                               {"entropy", 0.02, 0, false},
                               {"share", 0, 0, false},
                               {"probability", 0, 0.02, false},
                               {"length_change", 0, 0.05, false},
                               {"logit_growth", 1.0 / 3, 0, false}};
    for (Tolerance& t : all) t.reason = text_template("glossary", "tolerance " + t.name);
    return all;
  }();
  return table;
}

const Tolerance& tolerance(const std::string& name) {
  for (const Tolerance& t : tolerances())
    if (t.name == name) return t;
  throw std::out_of_range("no tolerance is named '" + name + "'");
}

const std::vector<Claim>& claims() {
  static const std::vector<Claim> table = [] {
    std::vector<Claim> all{
        {"trains_better", "final_loss", Better::lower, "loss"},
        {"starts_less_saturated", "entropy_first", Better::higher, "entropy"},
        {"more_gradient_step0_{w}", "grad_norm_step0_{w}", Better::higher, "gradient"},
        {"more_gradient_before_loss_{w}", "mean_grad_norm_before_loss_{w}", Better::higher, "gradient"},
        {"more_gradient_{w}", "mean_grad_norm_{w}", Better::higher, "gradient"},
        {"fewer_zero_gradients_{w}", "frac_zero_grad_{w}", Better::lower, "share"},
        {"reaches_loss_sooner", "step_to_loss", Better::lower, "steps", true},
        {"reaches_accuracy_sooner", "step_to_accuracy", Better::lower, "steps", true},
        {"diverges_less", "diverged", Better::lower, "share", false, false},
        {"less_lr_sensitive", "lr_sensitivity", Better::lower, "loss"}};
    for (Claim& claim : all) claim.label = text_template("claims", "label " + claim.id);
    return all;
  }();
  return table;
}

std::string outcome_name(Outcome o) {
  static const char* const names[]{"better", "worse", "same", "not decided"};
  return names[static_cast<int>(o)];
}

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

bool over_used_runs(const std::string& statistic) {
  for (const Statistic& s : statistics())
    for (const auto& w : attention_weights())
      if (statistic_name(s.name, w) == statistic) return s.over_used_runs;
  return false;
}

// The mean of `values`, +inf when one is (a threshold never reached); by mean_sd, whose sums do not overflow.
double mean_of(const std::vector<double>& values) {
  return std::count(values.begin(), values.end(), kNever) ? kNever : mean_sd(values).mean;
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
  // Runs all cut short end where they stopped, not where training would have.
  if (s.only_incomplete() || b.only_incomplete()) return "cut_short";
  if (statistic != "final_loss") return "";
  if (s.kept.empty() || b.kept.empty()) return "all_diverged";
  if (s.stat("final_loss").n == 0 || b.stat("final_loss").n == 0) return "no_final_loss";
  // Two losses near zero differ by more than 2% for no reason worth a verdict.
  if (solved(s, c) && solved(b, c)) return "both_solved";
  if (!s.learned() && !b.learned()) return "neither_learned";
  return "";
}

// `claim` seed by seed on per-seed values `s` against `b` (unless !claim.by_seed), the sides' means beside.
Verdict judge_seeds(const Claim& claim, const std::string& statistic, const std::map<nlohmann::json, double>& s,
                    const std::map<nlohmann::json, double>& b, double subject_mean, double baseline_mean) {
  // By seed, the shared seeds are counted even where not decided.
  Verdict v = claim.by_seed ? compare_values(s, b, claim.better, tolerance(claim.tolerance)) : Verdict{};
  v.statistic = statistic;
  v.subject_value = subject_mean;
  v.baseline_value = baseline_mean;
  return v;
}

}  // namespace

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
  for (const auto& [seed, v] : values) mean[seed] = mean_of(v);
  return mean;
}

Verdict judge_finding(const Comparison& c, const Claim& claim, const ArmStats& subject, const ArmStats* baseline,
                      double threshold) {
  const auto s = per_seed(c, subject, claim, claim.statistic);
  auto b = baseline ? per_seed(c, *baseline, claim, claim.statistic) : s;
  if (!baseline)
    for (auto& seed_value : b) seed_value.second = threshold;
  return judge_seeds(claim, claim.statistic, s, b, subject.stat(claim.statistic).mean,
                     baseline ? baseline->stat(claim.statistic).mean : threshold);
}

namespace {

Verdict judge_pair(const Comparison& c, const Claim& claim, const std::string& w, const ArmPair& p) {
  const ArmStats& s = c.arms[p.subject];
  const ArmStats& b = c.arms[p.baseline];
  const std::string statistic = statistic_name(claim.statistic, w);
  const Tolerance& tol = tolerance(claim.tolerance);
  const auto ss = per_seed(c, s, claim, statistic), bs = per_seed(c, b, claim, statistic);
  Verdict v = judge_seeds(claim, statistic, ss, bs, s.stat(statistic).mean, b.stat(statistic).mean);
  if (!v.paired) v.why_not.clear();
  v.claim = statistic_name(claim.id, w);
  v.w = w;
  v.subject = p.subject;
  v.baseline = p.baseline;
  const std::string why_not = undecidable(c, v.statistic, s, b);
  if (!why_not.empty() || ss.empty() || bs.empty()) {
    v.outcome = Outcome::not_decided;
    v.why_not = why_not.empty() ? "no_value" : why_not;
    return v;
  }
  if (v.paired) {  // decided in the seeds both have: their values, not means that include other seeds
    std::vector<double> shared_s, shared_b;
    for (const auto& [seed, x] : ss)
      if (bs.count(seed)) shared_s.push_back(x), shared_b.push_back(bs.at(seed));
    v.subject_value = mean_of(shared_s);
    v.baseline_value = mean_of(shared_b);
    return v;
  }
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
  if (!std::isfinite(sm.mean) || !std::isfinite(bm.mean)) v.outcome = Outcome::not_decided, v.why_not = "never_reached";
  return v;
}

// `axis` and the settings of the entry it names: what a pair of arms may differ in.
std::string key_without_axis(const nlohmann::json& settings, const std::string& axis, bool with_lr) {
  std::vector<std::string> keys = own_settings(settings, axis);
  keys.push_back(axis);
  if (with_lr) keys.push_back("lr");
  return key_without(settings, keys);
}

// Arms (with_lr: lr groups' first arms) that agree on all but `axis` (and lr), grouped in order of appearance.
std::vector<std::vector<std::size_t>> groups_of(const Comparison& c, const std::vector<std::size_t>& arms,
                                                const std::string& axis, bool with_lr) {
  auto groups = group_indices(arms.size(),
                              [&](std::size_t i) { return key_without_axis(c.arms[arms[i]].settings, axis, with_lr); });
  for (auto& group : groups)
    for (auto& i : group) i = arms[i];
  return groups;
}

// As arm_pairs, over groups_of.
std::vector<ArmPair> pairs_of(const Comparison& c, const std::vector<std::size_t>& arms, const std::string& axis,
                              const std::string& baseline, bool with_lr) {
  std::vector<ArmPair> pairs;
  for (const auto& g : groups_of(c, arms, axis, with_lr)) {
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

// "0.01, 0.1": the learning rates of an lr group.
std::string lrs_of(const Comparison& c, const LrGroup& g) {
  std::string s;
  for (auto i : g.arms) s += (s.empty() ? "" : ", ") + setting_text(c.arms[i].settings, "lr");
  return s;
}

// Why two lr groups' sensitivities over their `shared` lrs cannot be compared (lr_verdict in claims.h), or "".
std::string lr_undecidable(const Comparison& c, const LrGroup& s, const LrGroup& b,
                           const std::vector<std::pair<const ArmStats*, const ArmStats*>>& shared, Verdict& v) {
  if (shared.size() < 2) {
    v.why_fields = {{"subject_lrs", lrs_of(c, s)}, {"baseline_lrs", lrs_of(c, b)}};
    return "few_lrs";
  }
  bool learned_s = false, learned_b = false;
  for (const auto& [x, y] : shared) {
    if (!x->diverged_steps.empty() && !y->diverged_steps.empty())
      v.why_items.push_back({{"lr", x->lr()},
                             {"subject_n", x->diverged_steps.size()},
                             {"subject_of", x->used.size()},
                             {"baseline_n", y->diverged_steps.size()},
                             {"baseline_of", y->used.size()}});
    learned_s = learned_s || x->learned();
    learned_b = learned_b || y->learned();
  }
  v.why_fields = {{"subject", arm_name(c, *shared.front().first)},
                  {"baseline", arm_name(c, *shared.front().second)},
                  {"side", arm_name(c, *(learned_s ? shared.front().second : shared.front().first))}};
  return !v.why_items.empty()       ? "both_diverged"
         : !learned_s && !learned_b ? "neither_learned_lr"
         : !learned_s || !learned_b ? "never_learned"
                                    : "";
}

void lr_verdicts(const Comparison& c, const std::string& axis, const std::string& baseline, std::vector<Verdict>& out) {
  std::vector<std::size_t> firsts;
  for (const LrGroup& g : c.lr_groups) firsts.push_back(g.arms.front());
  const auto group_of = [&](std::size_t arm) -> const LrGroup& {
    return *std::find_if(c.lr_groups.begin(), c.lr_groups.end(),
                         [&](const LrGroup& g) { return g.arms.front() == arm; });
  };
  for (const ArmPair& p : pairs_of(c, firsts, axis, baseline, true))
    out.push_back(lr_verdict(c, group_of(p.subject), group_of(p.baseline)));
}

// What two arms of other `axis` values differ in besides it and its entries' settings; else what only one has.
std::vector<std::string> differing_besides(const ArmStats& a, const ArmStats& b, const std::string& axis) {
  std::vector<std::string> axis_keys = own_settings(a.settings, axis), keys;
  for (const auto& k : own_settings(b.settings, axis)) axis_keys.push_back(k);
  axis_keys.push_back(axis);
  const auto of_axis = [&](const std::string& k) {
    return k == "chance_loss" || std::find(axis_keys.begin(), axis_keys.end(), k) != axis_keys.end();
  };
  for (const auto& k : settings_differing(a.settings, b.settings))
    if (!of_axis(k)) keys.push_back(k);
  const bool only_one_has = keys.empty();
  for (const auto* pair : {&a, &b})
    for (const auto& item : pair->settings.items())
      if (only_one_has && !of_axis(item.key()) && !(pair == &a ? b : a).settings.contains(item.key()))
        keys.push_back(item.key());
  // Nothing a table shows differs: the derived chance_loss does (a config.json edited by hand).
  if (keys.empty() &&
      a.settings.value("chance_loss", nlohmann::json()) != b.settings.value("chance_loss", nlohmann::json()))
    keys.push_back("chance_loss");
  return keys;
}

// A statistic's value as its sentence shows it: a step ("step 37", "never"), a share ("12.5%"), else 3 digits.
std::string value_text(const Claim& claim, double v) {
  if (claim.tolerance == "steps") return std::isfinite(v) ? fmt::format("step {:.0f}", v) : "never";
  if (claim.tolerance == "share") return format_percent(v);
  return std::isfinite(v) ? fmt::format("{:.3g}", v) : train::format_number(v);
}

// How the verdict was reached: over the shared seeds, or by the means.
std::string how_text(const Verdict& v) {
  const Fields f{{"n", std::to_string(v.n_shared)},
                 {"better", std::to_string(v.seeds_better)},
                 {"worse", std::to_string(v.seeds_worse)},
                 {"same", std::to_string(v.seeds_same)},
                 {"tolerance", train::format_number(v.tolerance)}};
  if (!claim_of(v).by_seed) return text("claims", "how.shares");
  if (v.paired)
    return text("claims",
                v.outcome == Outcome::not_decided ? "how.split"
                : v.n_shared == 1                 ? "how.one_seed"
                                                  : "how.every_seed",
                f);
  return text("claims", std::isfinite(v.tolerance) ? "how.means_tolerance" : "how.means", f);
}

}  // namespace

// Per seed with every shared lr: each side's sensitivity, and the largest objective its tolerance is a share of.
Verdict lr_verdict(const Comparison& c, const LrGroup& gs, const LrGroup& gb) {
  static const Claim objective{"", "lr_objective", Better::lower, "loss"};
  std::vector<std::pair<const ArmStats*, const ArmStats*>> shared;
  std::vector<double> mean_s, mean_b;
  std::map<nlohmann::json, std::vector<double>> seeds_s, seeds_b;
  double tol = 0;  // without a shared seed: the objectives' largest seed sd, at least 2% of their largest mean
  const auto add = [&](const ArmStats& arm, std::vector<double>& means, auto& seeds) {
    const MeanSd& m = arm.stat("lr_objective");
    means.push_back(m.mean);
    tol = std::max({tol, std::isfinite(m.sd) ? m.sd : 0.0, tolerance("loss").between(m.mean, 0)});
    for (const auto& [seed, v] : per_seed(c, arm, objective, "lr_objective")) seeds[seed].push_back(v);
  };
  for (auto is : gs.arms)
    for (auto ib : gb.arms) {
      const ArmStats &x = c.arms[is], &y = c.arms[ib];
      if (x.lr() != y.lr()) continue;
      shared.push_back({&x, &y});
      add(x, mean_s, seeds_s);
      add(y, mean_b, seeds_b);
    }
  std::map<nlohmann::json, double> sens_s, sens_b, magnitude;
  for (const auto& [seed, vs] : seeds_s) {
    const auto it = seeds_b.find(seed);
    if (vs.size() != shared.size() || it == seeds_b.end() || it->second.size() != shared.size()) continue;
    sens_s[seed] = lr_sensitivity(vs);
    sens_b[seed] = lr_sensitivity(it->second);
    for (const double o : vs) magnitude[seed] = std::max(magnitude[seed], std::fabs(o));
    for (const double o : it->second) magnitude[seed] = std::max(magnitude[seed], std::fabs(o));
  }
  Verdict v = compare_values(sens_s, sens_b, Better::lower, tolerance("loss"), magnitude);
  v.claim = "less_lr_sensitive";
  v.statistic = "lr_sensitivity";
  v.subject = gs.arms.front();
  v.baseline = gb.arms.front();
  v.subject_value = std::isnan(gs.sensitivity) ? kNoValue : lr_sensitivity(mean_s);  // every run diverged
  v.baseline_value = std::isnan(gb.sensitivity) ? kNoValue : lr_sensitivity(mean_b);
  v.why_not = lr_undecidable(c, gs, gb, shared, v);
  if (v.why_not.empty() && !(std::isfinite(v.subject_value) && std::isfinite(v.baseline_value))) v.why_not = "no_value";
  v.tolerance = tol;
  if (!v.why_not.empty())
    v.outcome = Outcome::not_decided;
  else if (!v.paired)
    v.outcome = order(v.subject_value, v.baseline_value, tol, Better::lower);
  else if (v.outcome == Outcome::not_decided)
    v.why_not = "seeds_disagree";
  return v;
}

nlohmann::json seed_key(const nlohmann::json& config) {
  return nlohmann::json::array({config.value("seed", nlohmann::json()), config.value("data_seed", nlohmann::json())});
}

Verdict compare_values(const std::map<nlohmann::json, double>& subject,
                       const std::map<nlohmann::json, double>& baseline, Better better, const Tolerance& tol,
                       const std::map<nlohmann::json, double>& magnitude) {
  Verdict v;
  bool never = true;  // neither side reaches the threshold in any shared seed
  for (const auto& [seed, x] : subject) {
    const auto it = baseline.find(seed);
    if (it == baseline.end()) continue;
    ++v.n_shared;
    never = never && std::isinf(x) && std::isinf(it->second);
    const auto m = magnitude.find(seed);
    const double t = m == magnitude.end() ? tol.between(x, it->second) : tol.between(m->second, 0);
    const Outcome o = order(x, it->second, t, better);
    (o == Outcome::better ? v.seeds_better : o == Outcome::worse ? v.seeds_worse : v.seeds_same) += 1;
  }
  v.paired = v.n_shared > 0;
  v.outcome = !v.paired                      ? Outcome::not_decided
              : v.seeds_better == v.n_shared ? Outcome::better
              : v.seeds_worse == v.n_shared  ? Outcome::worse
              : v.seeds_same == v.n_shared   ? Outcome::same
                                             : Outcome::not_decided;
  if (!v.paired)
    v.why_not = "no_shared_seed";
  else if (never)
    v.outcome = Outcome::not_decided, v.why_not = "never_reached";
  else if (v.outcome == Outcome::not_decided)
    v.why_not = "seeds_disagree";
  return v;
}

std::vector<std::size_t> all_arms(const Comparison& c) {
  std::vector<std::size_t> arms(c.arms.size());
  for (std::size_t a = 0; a < arms.size(); ++a) arms[a] = a;
  return arms;
}

std::vector<ArmPair> arm_pairs(const Comparison& c, const std::string& axis, const std::string& baseline) {
  return pairs_of(c, all_arms(c), axis, baseline, false);
}

std::vector<std::vector<std::size_t>> arm_groups(const Comparison& c, const std::string& axis) {
  return groups_of(c, all_arms(c), axis, false);
}

std::vector<UnpairedArm> unpaired_arms(const Comparison& c, const std::string& axis) {
  std::vector<UnpairedArm> out;
  for (const auto& g : arm_groups(c, axis)) {
    if (g.size() > 1) continue;
    const ArmStats& arm = c.arms[g.front()];
    std::vector<std::vector<std::string>> nearest;  // of the arms of another value, those differing in the fewest
    for (const ArmStats& other : c.arms) {
      if (setting_text(other.settings, axis) == setting_text(arm.settings, axis)) continue;
      std::vector<std::string> keys = differing_besides(arm, other, axis);
      if (!nearest.empty() && keys.size() > nearest.front().size()) continue;
      if (!nearest.empty() && keys.size() < nearest.front().size()) nearest.clear();
      nearest.push_back(std::move(keys));
    }
    if (nearest.empty()) continue;  // every arm holds this value: nothing to compare it with
    std::set<std::string> keys;
    for (const auto& n : nearest) keys.insert(n.begin(), n.end());
    std::vector<std::string> ordered = in_setting_order(c.arms, keys);
    if (ordered.size() < keys.size()) ordered.assign(keys.begin(), keys.end());  // chance_loss is in no table's order
    out.push_back({g.front(), ordered});
  }
  return out;
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
  if (c.axis != "scale") return c.axis + "=" + setting_text(arm.settings, c.axis);
  return is_reference_scale(arm.scale()) ? "unscaled" : scale_label(arm);
}

std::string baseline_of(const Comparison& c) {
  if (!c.baseline.empty() || c.axis != "scale") return c.baseline;
  for (const nn::ScalingEntry* e : Registry<nn::ScalingEntry>::instance().entries())
    if (e->is_reference) return e->name;
  return "";
}

std::string why_not_text(const Verdict& v) {
  if (v.why_not.empty()) return "";
  Fields f = v.why_fields;
  std::string items;  // "0.1 (sqrt_dk in 1 of 2 runs, unscaled in 2 of 2); 1 (...)"
  for (Fields item : v.why_items) {
    item.insert(v.why_fields.begin(), v.why_fields.end());
    items += (items.empty() ? "" : "; ") + text("claims", "why.diverged_at", item);
  }
  f["lrs"] = items;
  return text("claims", "why." + v.why_not, f);
}

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
  return text("claims", id + ", " + outcome,
              {{"subject", escape_name(arm_name(c, c.arms[v.subject]))},
               {"baseline", escape_name(arm_name(c, c.arms[v.baseline]))},
               {"subject_value", value_text(claim, v.subject_value)},
               {"baseline_value", value_text(claim, v.baseline_value)},
               {"how", how_text(v)},
               {"why_not", why_not_text(v)},
               {"w", v.w == "w_q"   ? std::string("W_q")
                     : v.w == "w_k" ? std::string("W_k")
                                    : v.w}});
}

}  // namespace xgrad::report
