// The numbers of `xgrad compare`: per-run statistics, arms (runs that differ only in seed) and LR sensitivity.
#pragma once

#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/runs.h"

namespace xgrad::report {

constexpr double kNoValue = std::numeric_limits<double>::quiet_NaN();

/// Mean, sample sd (n - 1; 0 for one value), median and range of the finite values, n of them; NaN when none.
struct MeanSd {
  double mean = kNoValue;
  double sd = kNoValue;
  std::size_t n = 0;
  double median = kNoValue, min = kNoValue, max = kNoValue;
};
MeanSd mean_sd(const std::vector<double>& values);

/// The attention weights a statistic named with "{w}" is declared once for: "mean_grad_norm_{w}" is two.
inline const std::vector<std::string>& attention_weights() {
  static const std::vector<std::string> weights{"w_q", "w_k"};
  return weights;
}

/// The indices 0 to n - 1 in groups of equal key(i), the groups in order of first appearance, each in index order.
template <class Key>
std::vector<std::vector<std::size_t>> group_indices(std::size_t n, Key key) {
  std::map<decltype(key(0)), std::size_t> group_of;
  std::vector<std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < n; ++i) {
    const auto found = group_of.emplace(key(i), groups.size());
    if (found.second) groups.emplace_back();
    groups[found.first->second].push_back(i);
  }
  return groups;
}

struct RunStats;

/// A run, its arm's thresholds and the statistics declared before: what one run's statistic is computed from.
struct RunContext {
  const RunRecord& run;
  double loss_threshold = kNoValue;
  double accuracy_threshold = kNoValue;
  std::size_t window = 1;  // rows of the trailing mean of steps-to-threshold
  const RunStats& so_far;
};

/// One per-run statistic, declared once: its name (key of RunStats, ArmStats::stats), definition and computation.
struct Statistic {
  std::string name;  // "final_loss"; with "{w}", one statistic per attention_weights() entry
  std::function<double(const RunContext&, const std::string& w)> of_run;  // NaN: the run has no value
  bool over_used_runs = false;   // diverged runs count (the lr objective counts one as its initial loss)
  std::string description = {};  // its definition with its unit: report/text/glossary.md's line `name`
};

/// Every statistic, in the order they are computed. Adding a statistic is one entry here (and its test).
const std::vector<Statistic>& statistics();

/// ("mean_grad_norm_{w}", "w_q") -> "mean_grad_norm_w_q": a "{w}" statistic's name for one attention weight.
std::string statistic_name(const std::string& declared, const std::string& w);

/// What one run measured, by statistic name (statistics()); losses in nats, steps as metrics.csv's step column.
struct RunStats {
  std::map<std::string, double> values;  // every declared statistic; NaN where the run has none
  /// The value of the statistic `name`. Throws std::out_of_range naming it when no statistic has that name.
  double operator[](const std::string& name) const;
};

/// Statistics of one run (`window` >= 1 rows of trailing mean); non-finite values are skipped, never thrown on.
RunStats run_stats(const RunRecord& run, double loss_threshold, double accuracy_threshold, std::size_t window);

/// Runs whose settings agree on everything but the seed, aggregated over the kept (not diverged) runs: no number is
/// decided by a run that blew up, but the lr objective (Wortsman et al. 2023), which counts it as its initial loss.
struct ArmStats {
  nlohmann::json settings;        // arm_settings() of its runs' config.json
  std::vector<std::size_t> runs;  // indices into Comparison::runs
  std::vector<std::size_t> used;  // the complete runs, or all if none is complete
  std::vector<std::size_t> kept;  // the used runs that did not diverge: the runs every statistic below is over
  std::size_t n_incomplete = 0;   // runs of `runs` that are incomplete
  std::size_t n_seeds = 0;        // distinct (seed, data_seed) pairs among the used runs
  std::vector<std::vector<std::size_t>> duplicate_seeds;  // used runs sharing a (seed, data_seed): all aggregated
  double loss_threshold = kNoValue;
  std::map<std::string, MeanSd> stats;  // every statistic() over the kept runs (over_used_runs: the used runs)
  bool measured_from_step_0 = true;     // every kept run measured attention at step 0
  std::vector<long> diverged_steps;     // one per used run that diverged

  /// The statistic `name` over the arm's runs (a threshold's: those that reached it). Throws std::out_of_range.
  const MeanSd& stat(const std::string& name) const;

  /// The mean final loss is clearly below the chance loss (else the initial loss). False with no kept run.
  bool learned() const;

  std::size_t d_k() const;
  std::string scale() const;
  std::string optimizer() const;
  double lr() const;
  bool only_incomplete() const { return n_incomplete == runs.size(); }
};

/// True when `scale` names the registered scaling marked is_reference: the unscaled baseline of the report.
bool is_reference_scale(const std::string& scale);

/// Arms that differ only in learning rate (and seed), with their LR sensitivity (Wortsman et al. 2023, sec. 3.2).
struct LrGroup {
  std::vector<std::size_t> arms;  // indices into Comparison::arms, by increasing lr
  double sensitivity = kNoValue;  // none when every run of the group diverged
  std::size_t best_arm = 0;       // the arm with the lowest lr objective
};

struct Comparison {
  std::vector<RunRecord> runs;
  std::vector<RunStats> stats;  // one per run
  std::vector<ArmStats> arms;   // by d_k, scale (none first), optimizer, lr
  std::vector<LrGroup> lr_groups;
  double accuracy_threshold = 0.9;
  std::size_t window = 1;
  std::string axis = "scale";  // the setting the claims compare arms in (compare --compare)
  std::string baseline;        // the value of `axis` the others are judged against; "" for the reference scaling
};

/// config.json's settings of role arm, and "inputs": "name hash8, ...", so that runs on other bytes are other arms.
nlohmann::json arm_settings(const nlohmann::json& config);

/// `settings` with `keys` removed, serialised: arms with equal results compare equal but for those keys.
std::string key_without(const nlohmann::json& settings, const std::vector<std::string>& keys);

/// Groups, aggregates and finds LR groups. loss_threshold < 0: half the arm's chance_loss; window 0 is taken as 1.
Comparison analyse_runs(std::vector<RunRecord> runs, double loss_threshold, double accuracy_threshold,
                        std::size_t window);

/// The attention logit past which logits count as grown large: QK-Clip's tau (Kimi Team 2025, arXiv 2507.20534).
constexpr double kLargeLogit = 100;

/// The final loss (nats) at or below which a run at the accuracy threshold has solved the task: p(answer) >= 0.99.
constexpr double kSolvedLoss = 0.01;

/// Every kept run (at least one) ends at the accuracy threshold and kSolvedLoss: then final losses decide nothing.
bool solved(const ArmStats& arm, const Comparison& c);

/// Median of the finite values (mean of the middle two for an even count); NaN when none is finite.
double median(std::vector<double> values);

/// Mean minus minimum of `objective` over learning rates (Wortsman et al. 2023, 3.2); NaN under 2 finite entries.
double lr_sensitivity(const std::vector<double>& objective);

/// The settings beyond d_k, scale, optimizer and lr that differ between arms, most important first (task, d_model):
/// no label may present arms of two tasks as differing in scale only. A derived default (d_ff) held by all is left out.
std::vector<std::string> distinguishing_keys(const std::vector<ArmStats>& arms);

/// The settings (distinguishing_keys' order, d_k, scale, optimizer and lr included) that differ between the arms.
std::vector<std::string> settings_differing(const nlohmann::json& a, const nlohmann::json& b);
std::vector<std::string> settings_differing(const std::vector<const nlohmann::json*>& settings);

/// `keys` in the order distinguishing_keys and settings_differing list settings of `arms`.
std::vector<std::string> in_setting_order(const std::vector<ArmStats>& arms, const std::set<std::string>& keys);

/// The keys of `settings` only the entry its `component` names declares (softcap_cap for softcap); for an unknown
/// entry, the keys no declaration knows when every other component is known (nothing else can read them).
std::vector<std::string> own_settings(const nlohmann::json& settings, const std::string& component);

/// "softcap (softcap_cap=30)": the arm's scale with the settings of its own (own_settings), or the scale alone.
std::string scale_label(const ArmStats& arm);

/// "0.003", "true", "kv_recall": a setting as a table cell; "\u2013" (an en dash) for a setting the run does not read.
std::string setting_text(const nlohmann::json& settings, const std::string& key);

}  // namespace xgrad::report
