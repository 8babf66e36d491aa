// Finding and reading run directories for `xgrad compare`: only the few series compare needs are held in memory.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/run_files.h"

namespace xgrad::report {

/// The per-step series of one run, one entry per metrics.csv row; NaN where the CSV holds nan or lacks the column.
struct RunSeries {
  std::vector<double> step;
  std::vector<double> loss;
  std::vector<double> accuracy;
  std::vector<double> grad_norm;      // every parameter's gradient together (0 without the column): a finite step?
  std::vector<double> grad_norm_w_q;  // L2 norm over every layer's attn.w_q.weight gradient
  std::vector<double> grad_norm_w_k;  // same for attn.w_k.weight
  std::vector<double> entropy;        // attn/l0h*/entropy_mean, mean over the first layer's heads (nan: not measured)
  std::vector<double> score_std;      // attn/l0h*/score_std, mean over the first layer's heads
  std::vector<double> score_grad_median;  // attn/l0h*/score_grad_median (over queries of ‖dLoss/d(score row)‖)
  std::vector<double> saturated;          // attn/l0h*/frac_max_prob_gt_0.99, mean over the first layer's heads
  std::vector<double> max_logit;  // attn/l*h*/max_logit (earlier runs: score_max_abs), the largest over layers, heads
  std::vector<double> eval_loss;  // eval_loss: the loss on held-out batches (nan between evaluations)
  std::size_t size() const { return step.size(); }
};

/// One run directory as compare sees it.
struct RunRecord {
  std::string dir;
  nlohmann::json config;     // config.json in its canonical form (canonical_config_json; any release)
  bool has_summary = false;  // summary.json present and readable
  bool diverged = false;     // summary.json's; else a nan/inf loss or grad_norm row, or loss_blew_up of the final loss
  long diverged_step = -1;   // that row's step; for a blow-up, the first step whose loss passed that factor
  bool incomplete = false;   // no summary.json (or still running), rows dropped (load_run), fewer rows than steps
  std::string incomplete_reason;          // why, for the report ("" when complete)
  std::size_t steps_planned = 0;          // config "steps"
  bool has_w_q = false, has_w_k = false;  // metrics.csv has grad_norm/...attn.w_q.weight (resp. w_k) columns
  train::GradientStats gradients;         // over the finite rows of metrics.csv, as the trainer counts them
  RunSeries series;
  // metrics.csv has no max_logit column: series.max_logit is its score_max_abs (report.html notes such runs)
  bool max_logit_from_score_max_abs = false;
  std::vector<train::LengthEval> length_eval;  // summary.json's evaluations at other lengths (preset length)
};

/// How far find_run_dirs looks below a directory: runs lie 2 levels below a sweep, 4 in a directory of sweeps; 10,000
/// entries list in well under a second, while `xgrad compare /` stops at once, naming the bound.
struct RunSearch {
  bool include_unlisted = false;    // also read the run directories below a sweep that its sweep.json does not list
  std::size_t max_depth = 4;        // levels below the input
  std::size_t max_entries = 10000;  // files and directories listed, besides a sweep's own (a run and a config a point)
};

/// The run directories of the inputs, sorted, each once; those below a sweep it does not list; search_cut: that search
/// stopped at max_entries; refused: why sweep.json entries do not read as points.
struct FoundRuns {
  std::vector<std::string> dirs, unlisted, refused;
  bool search_cut = false;
};

/// Of each input: itself if a run directory, the runs its sweep.json lists, else those found below it within `search`.
/// Throws std::invalid_argument naming an input of no run, over the bound (unless a sweep), or not a directory.
FoundRuns find_run_dirs(const std::vector<std::string>& inputs, const RunSearch& search = {},
                        const std::string& command = "compare");

/// Reads `dir`'s config.json, metrics.csv and summary.json (if present). A row cut short or not the trainer's (its step
/// not above the last, a negative loss, a NaN summary.json denies) and those after it are dropped, the run incomplete.
/// Throws std::runtime_error naming the file for invalid or refused config.json, or a metrics.csv with no loss column.
RunRecord load_run(const std::string& dir);

}  // namespace xgrad::report
