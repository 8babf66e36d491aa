// The files of a run directory, defined once for the trainer that writes them and for the report and the sweep that
// read them: their names, summary.json (RunSummary) and the columns of metrics.csv. config.json's contents are
// TrainConfig's (train/config.h), the checkpoint's run_checkpoint.h's, the row format of metrics.csv metrics_log.h's.
#pragma once

#include <cstddef>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/attention_stats_fields.h"

namespace xgrad::train {

inline constexpr const char* kConfigFile = "config.json";
inline constexpr const char* kMetricsFile = "metrics.csv";
inline constexpr const char* kSummaryFile = "summary.json";
/// The run's checkpoint (contents: train/run_checkpoint.h), and the state before a run's first non-finite step.
inline constexpr const char* kCheckpointFile = "checkpoint.safetensors";
inline constexpr const char* kNonfiniteCheckpointFile = "checkpoint-nonfinite.safetensors";

/// The largest summary.json any reader, and config.json compare (which keeps every run's), reads: the trainer writes
/// 1.4 kB and 1.7 kB (a --preset length run, four length_eval entries of 230 bytes). 128 KiB, 90 times that, holds
/// 500 length evaluations. Parsed JSON takes up to 30 times its size in memory, and parse_json time quadratic in the
/// members of one object (nlohmann::json's callback parser: 0.3 s for 103 KiB, an object of 11,000 empty objects).
inline constexpr std::size_t kMaxRunJsonBytes = std::size_t(128) << 10;

/// The files that make a directory hold a run: config.json, metrics.csv, summary.json and both checkpoints.
const std::vector<std::string>& run_file_names();

/// True for a step whose update was applied: its loss and its global gradient norm (metrics.csv's loss and
/// grad_norm) are finite. Under --on-nan skip the other steps are skipped; under --on-nan stop the run ends at one.
bool is_finite_step(double loss, double grad_norm);

/// Divergence without a NaN: a run whose loss stays finite but ends far above where it started has blown up as
/// surely as one whose loss became Inf (plain SGD at a large learning rate drives the loss to 1e14 in 60 steps with
/// every value finite). The factor is wide on purpose: a run that merely failed to learn ends near its step-0 loss.
inline constexpr double kDivergedLossFactor = 10;

/// The one definition of "diverged" for a run whose loss stayed finite: its final loss (the mean over its last
/// min(20, rows) finite losses, as summary.json's final_loss) is above kDivergedLossFactor times its step-0 loss.
/// Losses in nats. False when either is NaN (a run with a non-finite loss is diverged by is_finite_step instead), and
/// when the step-0 loss is 0 (a first batch without targets sets no scale).
/// compare treats such a run exactly as one that diverged with a NaN (report/runs.h: RunRecord::diverged).
bool loss_blew_up(double first_loss, double final_loss);

/// The near-zero threshold of GradientStats: a finite step's query (key) weights' gradient counts as near zero when
/// its norm is below this fraction of the norm at the run's first finite step (step 0 unless that was skipped), or
/// exactly zero. A saturated softmax passes back a gradient that is tiny (1e-12 and below) long before it is exactly
/// zero in float; the exactly-zero count alone reads as 0% for such a run.
inline constexpr double kNearZeroGradFraction = 1e-6;

/// The gradient statistics of the query and key weights, defined once: the trainer accumulates them for
/// summary.json and compare recomputes them from metrics.csv, both with add(). They count finite steps only
/// (is_finite_step): a step skipped under --on-nan skip, or the step a run diverged at, has no gradient the
/// optimizer used.
struct GradientStats {
  std::size_t finite_steps = 0;
  std::size_t zero_grad_w_q = 0;  // finite steps whose query weights' gradient (every layer) was exactly zero
  std::size_t zero_grad_w_k = 0;  // same for the key weights
  double sum_grad_norm_w_q = 0;   // sum over finite steps of the query weights' gradient norm
  double sum_grad_norm_w_k = 0;
  // The query (key) weights' gradient norm at the first finite step: the reference of near_zero_grad_*. NaN before
  // the first finite step, and in the statistics of a run resumed from a checkpoint written without it.
  double first_grad_norm_w_q = std::numeric_limits<double>::quiet_NaN();
  double first_grad_norm_w_k = std::numeric_limits<double>::quiet_NaN();
  std::size_t near_zero_grad_w_q = 0;  // finite steps whose query weights' gradient norm was exactly zero or below
                                       // kNearZeroGradFraction × first_grad_norm_w_q
  std::size_t near_zero_grad_w_k = 0;  // same for the key weights
  /// Counts the step if is_finite_step(loss, grad_norm); otherwise does nothing. norm_w_q, norm_w_k: the L2 norm of
  /// the gradient of every layer's attn.w_q.weight (attn.w_k.weight) together, before clipping.
  void add(double loss, double grad_norm, double norm_w_q, double norm_w_k);
  /// Fraction of finite steps whose query (key) weights' gradient was exactly zero, in [0, 1]; NaN with no finite
  /// step.
  double frac_zero_grad_w_q() const;
  double frac_zero_grad_w_k() const;
  /// Fraction of finite steps whose query (key) weights' gradient was near zero (near_zero_grad_*), in [0, 1]; NaN
  /// with no finite step or without the first step's norm.
  double frac_near_zero_grad_w_q() const;
  double frac_near_zero_grad_w_k() const;
  /// Mean over finite steps of the query (key) weights' gradient norm; NaN with no finite step.
  double mean_grad_norm_w_q() const;
  double mean_grad_norm_w_k() const;
};

/// One evaluation of the trained model at another length than training (--eval-seq-len, --eval-n-pairs): the task
/// with one setting changed, the model's positional embeddings taken per Task::trained_positions, over
/// --eval-batches held-out batches of --batch-size sequences. summary.json: one object per evaluation under
/// "length_eval", in the order given (--eval-seq-len's values, then --eval-n-pairs's).
struct LengthEval {
  std::string setting;      ///< the task setting evaluated at another value: "seq_len" or "n_pairs"
  std::size_t value = 0;    ///< its value in this evaluation
  std::size_t seq_len = 0;  ///< T of the evaluated sequences
  double loss = 0;          ///< mean cross-entropy over the positions that carry a target, nats
  double accuracy = 0;      ///< share of those positions whose arg-max prediction is the target
  /// The last attention layer, at the queries that carry a target, mean over its heads: the largest attention
  /// weight (mean over queries; in (0, 1], 1/n for uniform attention over n keys) and the attention entropy (nats).
  double max_prob_mean = 0;
  double entropy_mean = 0;
  nlohmann::json to_json() const;
  /// Throws std::invalid_argument naming the key, for one missing, a value of the wrong type, and a number out of its
  /// range (loss, entropy_mean: finite, >= 0; accuracy, max_prob_mean: 0 to 1).
  static LengthEval from_json(const nlohmann::json& j);
};

/// What a run reports at its end: summary.json. A run that was stopped or killed has none.
struct RunSummary {
  std::size_t steps_done = 0;
  double chance_loss = 0;         // ln(n_values): the loss of a uniform guess over the answers
  double first_loss = 0;          // loss at step 0
  double final_loss = 0;          // mean loss over the last min(20, steps) finite steps (nan if the run diverged)
  double final_accuracy = 0;      // mean accuracy over the same window
  double mean_grad_norm_w_q = 0;  // GradientStats::mean_grad_norm_w_q: over finite steps
  double mean_grad_norm_w_k = 0;
  double frac_zero_grad_w_q = 0;  // GradientStats::frac_zero_grad_w_q: fraction of finite steps
  double frac_zero_grad_w_k = 0;
  double frac_near_zero_grad_w_q = 0;  // GradientStats::frac_near_zero_grad_w_q: fraction of finite steps
  double frac_near_zero_grad_w_k = 0;
  bool diverged = false;  // loss or gradient became NaN/Inf (and the run stopped there)
  long diverged_step = -1;
  std::size_t skipped_steps = 0;        // non-finite steps skipped under --on-nan skip
  double wall_seconds = 0;              // training time, summed over the sessions of a resumed run
  std::vector<LengthEval> length_eval;  // evaluations at other lengths (summary.json key only when there are any)
  int stop_signal = 0;  // the signal that interrupted the run (request_stop), 0 if it ran to its end; not
                        // written to summary.json, which an interrupted run does not write
  /// The summary.json object; NaN numbers become null (JSON has no NaN).
  nlohmann::json to_json() const;
  /// Reads to_json's object back (null numbers as NaN). Keys added after the first release (frac_zero_grad_*,
  /// skipped_steps) default to 0, frac_near_zero_grad_* (added later still) to NaN: unknown, length_eval to none.
  /// Throws std::invalid_argument naming the key, for one missing or a value of the wrong type (as
  /// LengthEval::from_json, an entry's prefixed "length_eval[i]: "), and for two length_eval entries of one setting
  /// and value.
  static RunSummary from_json(const nlohmann::json& j);
  /// from_json of `dir`/summary.json, read within kMaxRunJsonBytes. Throws ConfigError as read_json_file
  /// (train/json_file.h), and std::runtime_error naming the file for text that is not JSON and as from_json.
  static RunSummary read(const std::filesystem::path& dir);
};

/// The columns of metrics.csv, in order: step, loss, accuracy, lr, z_loss, grad_norm (global L2, before clipping),
/// grad_norm/<param> for every parameter (named_parameters() order), attn/l<l>h<h>/<stat> for every attention
/// layer l, head h and attention statistic, update_rms/<param>, grad_rms/<param>, scalar/<param>[/<index>] for the
/// scaling's learned scalars (none for most scalings), eval_loss, step_ms. The trainer's
/// table of what it writes to each is train/step_metrics.cpp.
namespace metrics_columns {

inline constexpr const char* kStep = "step";
inline constexpr const char* kLoss = "loss";
inline constexpr const char* kAccuracy = "accuracy";
inline constexpr const char* kLr = "lr";
inline constexpr const char* kZLoss = "z_loss";
inline constexpr const char* kGradNorm = "grad_norm";
inline constexpr const char* kEvalLoss = "eval_loss";
inline constexpr const char* kStepMs = "step_ms";

/// "grad_norm/<parameter>": the L2 norm of that parameter's gradient, before clipping.
std::string grad_norm(const std::string& parameter);
/// "update_rms/<parameter>": the RMS of the change the optimizer step made to the parameter.
std::string update_rms(const std::string& parameter);
/// "grad_rms/<parameter>": the RMS of the parameter's gradient, before clipping.
std::string grad_rms(const std::string& parameter);
/// "scalar/<parameter>" for a parameter of one element, "scalar/<parameter>/<index>" for element `index` of a larger
/// one: its value after the step's update, for the learned scalars a scaling names (nn::ScalingEntry::scalars).
std::string scalar(const std::string& parameter, std::size_t index, std::size_t numel);

/// The metrics.csv releases that added columns, in order; 0 is the first. A run begun under an earlier release is
/// resumed without the columns added after it (StepMetrics::keep_columns_of).
inline constexpr int kFirstRelease = 0;
inline constexpr int kZLossAdded = 1;
inline constexpr int kQkSpectralNormAdded = 2;
inline constexpr int kScalarsAdded = 3;
inline constexpr int kMaxLogitAdded = 4;
inline constexpr int kNewestRelease = kMaxLogitAdded;

/// One attention statistic: its column name, the nn::AttentionStats field written there, and the metrics.csv
/// release that added it (kFirstRelease ... kNewestRelease).
struct AttentionStatColumn {
  const char* name;
  double nn::AttentionStats::*field;
  int added_in = kFirstRelease;
};
/// Every attention statistic metrics.csv holds, in column order. Among them qk_spectral_norm, beside the largest
/// score score_max_abs: c · ||W_q,h W_k,h^T||_2, the spectral norm of the head's score matrix times the scaling's
/// constant multiplier c (1/sqrt(d_k) under sqrt_dk; 1 under none), from the weights the step's forward pass used
/// (nn::AttentionLayer::qk_spectral_norms), by power iteration to a relative change below 1e-7 or 100 iterations.
/// Zhai et al. 2023's attention entropy bound is in terms of this scaled norm.
const std::vector<AttentionStatColumn>& attention_stats();
/// The column name of an AttentionStats field ("entropy_mean" for &AttentionStats::entropy_mean). Throws
/// std::invalid_argument for a field that is not written.
std::string attention_stat_name(double nn::AttentionStats::*field);
/// "attn/l<layer>h<head>/<stat>".
std::string attention(std::size_t layer, std::size_t head, const std::string& stat);
/// True for attn/l<layer>h<any head>/<stat>.
bool is_attention(const std::string& column, std::size_t layer, const std::string& stat);

/// The query and key projection weights (every layer's attn.w_q.weight, attn.w_k.weight): summary.json's
/// *_grad_w_q / *_grad_w_k and compare's gradient columns combine their gradient norms.
bool is_query_weight(const std::string& parameter);
bool is_key_weight(const std::string& parameter);
/// The parameter of a grad_norm/<parameter> column, or "" for another column.
std::string grad_norm_parameter(const std::string& column);

}  // namespace metrics_columns

}  // namespace xgrad::train
