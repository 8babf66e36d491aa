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
#include "report/text.h"

namespace xgrad::report {

/// Two values within a tolerance count as equal. One per kind of claim, used wherever that kind is judged; the
/// report's glossary lists each with its reason.
struct Tolerance {
  std::string name;         // "loss"
  double relative = 0;      // a fraction of the larger magnitude of the two values
  double absolute = 0;      // the least tolerance, in the values' unit
  bool seed_sd = false;     // between means without a shared seed: at least the larger seed sd as well
  std::string reason = {};  // why this size: report/text/glossary.md's "tolerance <name>"
  /// The tolerance between values `a` and `b`: max(absolute, relative * max(|a|, |b|)).
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
  bool by_seed = true;          // false: by the arms' means even where they share seeds (a share of runs: one
                                // diverged seed in two is a share of 1/2, not a disagreement between seeds)
  std::string label = {};       // what it says of the subject, as a table row: report/text/claims.md's "label <id>"
};

/// Every claim, in report order.
const std::vector<Claim>& claims();

/// How a subject compares with its baseline on one claim (same: within the tolerance).
enum class Outcome { better, worse, same, not_decided };

/// "better", "worse", "same", "not decided".
std::string outcome_name(Outcome o);

/// One claim judged for one pair of arms: seed by seed (compare_values) where they share seeds among their kept
/// runs, otherwise by the arms' means.
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
  std::string why_not;                 // when not decided, why: a key of report/text/claims.md's "why." lines
                                       // ("seeds_disagree", "neither_learned", "both_solved", ...)
  Fields why_fields = {};              // the numbers and names its sentence names ("side": the arm that never learned)
  std::vector<Fields> why_items = {};  // "both_diverged": per learning rate where both did, "lr" and of each side
                                       // the runs that diverged and those used ("subject_n", "subject_of", ...)
};

/// A run's seed as the key of per-seed values: its (seed, data_seed) pair from config.json.
nlohmann::json seed_key(const nlohmann::json& config);

/// The one seed-by-seed rule, over the seeds (seed_key) both sides have: better when the subject is better by more
/// than `tol` in every one, worse likewise, same when within it in every one, otherwise not decided (why_not
/// "seeds_disagree", "no_shared_seed"). Fills outcome, n_shared, seeds_better/worse/same, paired and why_not. An
/// infinite value is a threshold never reached, the worst ("never_reached" when both are in every seed). A seed's
/// tolerance is tol.between its two values, or its `magnitude` where given (differences of larger quantities).
Verdict compare_values(const std::map<nlohmann::json, double>& subject,
                       const std::map<nlohmann::json, double>& baseline, Better better, const Tolerance& tol,
                       const std::map<nlohmann::json, double>& magnitude = {});

/// The arms identical in every setting but `axis`, the settings of the entry it names (softcap_cap for softcap) and
/// seed, as groups of indices into Comparison::arms, in its order (the unscaled reference first).
std::vector<std::vector<std::size_t>> arm_groups(const Comparison& c, const std::string& axis);

/// An arm alone in its group (arm_groups) while arms of another value of `axis` exist: no claim judges it.
/// `differs_in`: the settings besides `axis` in which the nearest arms of another value (those differing in the
/// fewest settings; settings only one of two arms has where nothing else differs) differ from it, in
/// distinguishing_keys' order.
struct UnpairedArm {
  std::size_t arm = 0;
  std::vector<std::string> differs_in;
};
std::vector<UnpairedArm> unpaired_arms(const Comparison& c, const std::string& axis);

/// The pairs of arms compare judges: in each group of arm_groups, the arm whose `axis` value is `baseline` against
/// each other arm; in a group without that value, every two arms, the earlier as the baseline.
struct ArmPair {
  std::size_t subject = 0, baseline = 0;
};
std::vector<ArmPair> arm_pairs(const Comparison& c, const std::string& axis, const std::string& baseline);

/// Every claim for every pair of arm_pairs(c, axis, baseline), and the lr_sensitivity claim for every two lr groups
/// that differ only in `axis` (an arm setting: "scale", "optimizer", ...; `baseline` one of its values).
std::vector<Verdict> judge(const Comparison& c, const std::string& axis, const std::string& baseline);

/// The lr_sensitivity claim for two lr groups, over the learning rates both hold: the sensitivities of the arms' mean
/// lr objectives there (Wortsman et al. 2023, sec. 3.2). Not decided with fewer than two shared lrs ("few_lrs"), when
/// both diverged at one ("both_diverged": both objectives are initial losses there), or when a side learned at none
/// ("never_learned", "neither_learned_lr": a flat objective near chance reads as insensitive). Otherwise seed by seed
/// over the seeds with a run of both at every shared lr, each within tolerance("loss") of its largest objective;
/// without such a seed, by the means, within the objectives' largest seed sd and tolerance("loss") of their largest.
Verdict lr_verdict(const Comparison& c, const LrGroup& subject, const LrGroup& baseline);

/// The name of an arm in verdicts: its scaling ("unscaled" for the reference scaling; with its own settings,
/// "softcap (softcap_cap=30)"), or for another axis the setting and its value ("causal=true", "lr=0.01").
std::string arm_name(const Comparison& c, const ArmStats& arm);

/// The value of `c.axis` the verdicts judge against: c.baseline, or for the scale the reference scaling's name.
std::string baseline_of(const Comparison& c);

/// Why the verdict is not decided, as a sentence (its why_not line in report/text/claims.md); "" when decided.
std::string why_not_text(const Verdict& v);

/// The claim a verdict judges. Throws std::out_of_range when v.claim names none.
const Claim& claim_of(const Verdict& v);

/// The claim's label with its attention weight: "more W_q gradient at step 0".
std::string claim_label(const Verdict& v);

/// The sentence of a verdict from report/text/claims.md (plain text; names through escape_name).
std::string verdict_sentence(const Comparison& c, const Verdict& v);

}  // namespace xgrad::report
