// The claims of `xgrad compare` as data: one table declares each claim (the statistic it compares between two arms,
// which direction is better, the named tolerance within which two values are equal), and judge() computes one
// verdict per claim and pair of arms, as values that report.md, report.html, the terminal and explain render.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/stats.h"

namespace xgrad::report {

/// Two values within a tolerance count as equal. One per kind of claim, used wherever that kind is judged; the
/// report's glossary lists each with its reason.
struct Tolerance {
  std::string name;      // "loss"
  double relative = 0;   // a fraction of the larger magnitude of the two values
  double absolute = 0;   // the least tolerance, in the values' unit
  bool seed_sd = false;  // between means without a shared seed: at least the larger seed sd as well
  std::string reason;    // why this size
  /// The tolerance between values `a` and `b`: max(absolute, relative * max(|a|, |b|)).
  double between(double a, double b) const;
};

/// Every tolerance, by name: "loss", "steps", "gradient", "entropy", "share", "probability",
/// "length_change", "logit_growth".
const std::vector<Tolerance>& tolerances();
/// The tolerance named `name`. Throws std::out_of_range naming it when there is none.
const Tolerance& tolerance(const std::string& name);

/// Which value of a statistic is the better one.
enum class Better { lower, higher };

/// One claim about a subject arm against a baseline arm that differs from it only in the compared setting.
struct Claim {
  std::string id;         // "trains_better"; with "{w}", one claim per attention weight (as statistics())
  std::string label;      // what it says of the subject, as a table row: "trains better (final loss)"
  std::string statistic;  // a statistics() name, "diverged", or "lr_sensitivity" (over arms differing in lr)
  Better better = Better::lower;
  std::string tolerance;        // a tolerances() name
  bool never_is_worst = false;  // a run without a value (a threshold never reached) counts as the worst value
  bool by_seed = true;          // false: by the arms' means even where they share seeds (a share of runs: one
                                // diverged seed in two is a share of 1/2, not a disagreement between seeds)
};

/// Every claim, in report order.
const std::vector<Claim>& claims();

/// How a subject compares with its baseline on one claim: the subject is better, worse, as good (within the
/// tolerance), or it is not decided (the seeds disagree, a side has no value, neither learned, both solved).
enum class Outcome { better, worse, same, not_decided };

/// "better", "worse", "same", "not decided".
std::string outcome_name(Outcome o);

/// One claim judged for one pair of arms. Where the arms share seeds ((seed, data_seed) pairs among their kept
/// runs), seed by seed: better when the subject is better by more than the tolerance in every shared seed, worse
/// likewise, same when within it in every one, otherwise not decided. Without a shared seed, by the arms' means.
struct Verdict {
  std::string claim;        // Claim::id, "{w}" expanded: "more_gradient_step0_w_q"
  std::string statistic;    // the statistic compared, "{w}" expanded
  std::string w;            // the attention weight of a "{w}" claim ("w_q"), else ""
  std::size_t subject = 0;  // index into Comparison::arms (for lr_sensitivity: the first arm of its lr group)
  std::size_t baseline = 0;
  Outcome outcome = Outcome::not_decided;
  double subject_value = kNoValue, baseline_value = kNoValue;  // the arms' means (the sensitivities for lr)
  bool paired = false;                                         // decided seed by seed
  std::size_t n_shared = 0, seeds_better = 0, seeds_worse = 0, seeds_same = 0;
  double tolerance = kNoValue;  // without a shared seed: the tolerance of the means
  std::string why_not;          // when not decided, why: "the seeds disagree", "neither learned", ...
};

/// A run's seed as the key of per-seed values: its (seed, data_seed) pair from config.json.
nlohmann::json seed_key(const nlohmann::json& config);

/// The one seed-by-seed rule: `subject`'s and `baseline`'s values (by seed_key) compared in every seed both have.
/// Fills the verdict's outcome, n_shared, seeds_better/worse/same, paired (a seed in common) and why_not: better
/// when the subject is better by more than `tol` in every shared seed, worse likewise, same when within it in
/// every one, otherwise not decided ("the seeds disagree"; "no seed in common" without one). An infinite value
/// is a threshold never reached, the worst; both infinite in every seed is "neither reaches it".
Verdict compare_values(const std::map<nlohmann::json, double>& subject,
                       const std::map<nlohmann::json, double>& baseline, Better better, const Tolerance& tol);

/// The pairs of arms compare judges: arms identical in every setting but `axis` (and the settings of the entry it
/// names, softcap_cap for softcap; and seed), the arm whose `axis` value is `baseline` against each other arm of its
/// group; in a group without that value, every two arms, the earlier (in Comparison::arms order) as the baseline.
struct ArmPair {
  std::size_t subject = 0, baseline = 0;
};
std::vector<ArmPair> arm_pairs(const Comparison& c, const std::string& axis, const std::string& baseline);

/// Every claim for every pair of arm_pairs(c, axis, baseline), and the lr_sensitivity claim for every two lr groups
/// that differ only in `axis`. `axis`: an arm setting ("scale", "attention", "optimizer", ...); `baseline`: one of
/// its values ("none" for the scale).
std::vector<Verdict> judge(const Comparison& c, const std::string& axis, const std::string& baseline);

/// The name of an arm in verdicts: its value of `c.axis` ("unscaled" for the reference scaling; a scaling with its own
/// settings, "softcap (softcap_cap=30)").
std::string arm_name(const Comparison& c, const ArmStats& arm);

/// The value of `c.axis` the verdicts judge against: c.baseline, or for the scale the reference scaling's name.
std::string baseline_of(const Comparison& c);

/// The claim a verdict judges. Throws std::out_of_range when v.claim names none.
const Claim& claim_of(const Verdict& v);

/// The claim's label with its attention weight: "more W_q gradient at step 0".
std::string claim_label(const Verdict& v);

/// The sentence of a verdict: its claim's and outcome's template in report/text/claims.md, its fields filled in
/// (plain text; names escaped for a terminal by escape_name).
std::string verdict_sentence(const Comparison& c, const Verdict& v);

}  // namespace xgrad::report
