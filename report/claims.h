// The claims of `xgrad compare` as data (statistic, better direction, tolerance), and judge(): one verdict per claim
// and pair of arms, as values that report.md, report.html, the terminal and explain render.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/stats.h"
#include "report/text.h"

namespace xgrad::report {

/// Two values within a tolerance count as equal: one per kind of claim, wherever that kind is judged.
struct Tolerance {
  std::string name;         // "loss"
  double relative = 0;      // a fraction of the larger magnitude of the two values
  double absolute = 0;      // the least tolerance, in the values' unit
  bool seed_sd = false;     // between means without a shared seed: at least the larger seed sd as well
  std::string reason = {};  // why this size: report/text/glossary.md's "tolerance <name>"
  /// max(absolute, relative * max(|a|, |b|)).
  double between(double a, double b) const;
};

/// Every tolerance: "loss", "steps", "gradient", "entropy", "share", "probability", "length_change", "logit_growth".
const std::vector<Tolerance>& tolerances();
/// The tolerance named `name`. Throws std::out_of_range naming it when there is none.
const Tolerance& tolerance(const std::string& name);

/// Which value of a statistic is the better one.
enum class Better { lower, higher };

/// One claim about a subject arm against a baseline arm that differs from it only in the compared setting.
struct Claim {
  std::string id;         // "trains_better"; with "{w}", one claim per attention weight (as statistics())
  std::string statistic;  // a statistics() name, "diverged", or "lr_sensitivity" (over arms differing in lr)
  Better better = Better::lower;
  std::string tolerance;        // a tolerances() name
  bool never_is_worst = false;  // a run without a value (a threshold never reached) counts as the worst value
  bool by_seed = true;          // false: by the means (a share of runs: 1 of 2 diverged is no seed disagreement)
  std::string label = {};       // what it says of the subject, as a table row: report/text/claims.md's "label <id>"
};

/// Every claim, in report order.
const std::vector<Claim>& claims();

/// How a subject compares with its baseline on one claim (same: within the tolerance).
enum class Outcome { better, worse, same, not_decided };

/// "better", "worse", "same", "not decided".
std::string outcome_name(Outcome o);

/// One claim judged for one pair of arms: seed by seed (compare_values) where they share seeds, else by the means.
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
  double tolerance = kNoValue;         // without a shared seed: the tolerance of the means
  std::string why_not;                 // when not decided: a "why." key of report/text/claims.md ("both_solved")
  Fields why_fields = {};              // the numbers and names its sentence names ("side": the arm that never learned)
  std::vector<Fields> why_items = {};  // "both_diverged": per lr where both did, "lr", "subject_n", "subject_of", ...
};

/// A run's seed as the key of per-seed values: its (seed, data_seed) pair from config.json.
nlohmann::json seed_key(const nlohmann::json& config);

/// The one seed-by-seed rule over the seeds both sides have: better (worse, same) when so beyond `tol` in every one,
/// else not decided ("seeds_disagree", "no_shared_seed"); infinity is a threshold never reached, the worst. A seed's
/// tolerance is tol.between its two values, or its `magnitude` where given (differences of larger quantities).
Verdict compare_values(const std::map<nlohmann::json, double>& subject,
                       const std::map<nlohmann::json, double>& baseline, Better better, const Tolerance& tol,
                       const std::map<nlohmann::json, double>& magnitude = {});

/// Groups of arms identical but in `axis`, its entry's own settings (softcap_cap) and seed, in Comparison::arms' order.
std::vector<std::vector<std::size_t>> arm_groups(const Comparison& c, const std::string& axis);

/// An arm alone in its group (arm_groups) while other values of `axis` exist: no claim judges it. `differs_in`: what
/// the nearest arms of another value differ from it in (or settings only one has), in distinguishing_keys' order.
struct UnpairedArm {
  std::size_t arm = 0;
  std::vector<std::string> differs_in;
};
std::vector<UnpairedArm> unpaired_arms(const Comparison& c, const std::string& axis);

/// In each group of arm_groups, the arm holding `baseline` against each other; without one, every two, the earlier
/// as the baseline.
struct ArmPair {
  std::size_t subject = 0, baseline = 0;
};
std::vector<ArmPair> arm_pairs(const Comparison& c, const std::string& axis, const std::string& baseline);

/// `statistic` per seed of `arm`'s runs, a seed's runs averaged; a run without a value left out (or never_is_worst).
std::map<nlohmann::json, double> per_seed(const Comparison& c, const ArmStats& arm, const Claim& claim,
                                          const std::string& statistic);

/// `claim` judged on `subject`'s runs against `baseline`'s, or against `threshold` in each of the subject's seeds when
/// `baseline` is null: compare_values seed by seed (unless !claim.by_seed), the sides' means in subject_value and
/// baseline_value. judge adds to it what makes a claim undecidable and the means' rule without a shared seed.
Verdict judge_finding(const Comparison& c, const Claim& claim, const ArmStats& subject, const ArmStats* baseline,
                      double threshold = kNoValue);

/// Every claim for every pair of arm_pairs(c, axis, baseline), and lr_sensitivity for lr groups differing in `axis`.
std::vector<Verdict> judge(const Comparison& c, const std::string& axis, const std::string& baseline);

/// lr_sensitivity of two lr groups over their shared lrs (Wortsman et al. 2023, 3.2), seed by seed where seeds have
/// every shared lr, else by the means. Not decided with "few_lrs", "both_diverged" at one lr (both objectives are
/// initial losses), or a side that learned at none ("never_learned": a flat objective near chance looks insensitive).
Verdict lr_verdict(const Comparison& c, const LrGroup& subject, const LrGroup& baseline);

/// An arm in verdicts: "unscaled", "softcap (softcap_cap=30)", or off the scale axis "causal=true".
std::string arm_name(const Comparison& c, const ArmStats& arm);

/// The value of `c.axis` the verdicts judge against: c.baseline, or for the scale the reference scaling's name.
std::string baseline_of(const Comparison& c);

/// Why the verdict is not decided, as a sentence; "" when decided.
std::string why_not_text(const Verdict& v);

/// The claim a verdict judges. Throws std::out_of_range when v.claim names none.
const Claim& claim_of(const Verdict& v);

/// The claim's label with its attention weight: "more W_q gradient at step 0".
std::string claim_label(const Verdict& v);

/// The sentence of a verdict from report/text/claims.md (plain text; names through escape_name).
std::string verdict_sentence(const Comparison& c, const Verdict& v);

}  // namespace xgrad::report
