// A training run's checkpoint: what `xgrad train --resume` needs to continue exactly where the run stopped, as a
// safetensors file (nn/checkpoint.h), and the matching cut of metrics.csv.
//
// Tensors (float32):
//   model.<name>                   every parameter and buffer, <name> as state_dict() gives it
//   ("blocks.0.attn.w_q.weight") optim.m.<name>, optim.v.<name> AdamW's first and second moment estimates
//   optim.momentum_buffer.<name>   SGD's and Muon's momentum buffer (Muon: also m and v, for its AdamW group)
//   grad.<name>                    only in checkpoint-nonfinite.safetensors: the gradients of the failing step
// Metadata (strings):
//   format = "xgrad-run/1"; step = steps completed (the next step to run); optimizer = its registered name; optim.step
//   = AdamW's step count t; nonfinite = "true" | "false"; config = the run's config.json settings (JSON text);
//   progress.* = the running sums summary.json is computed from (doubles as C99 hex floats, exact).
// There is no data position or generator state to save: training batch i is a pure function of (data_seed, i) and
// held-out batch j of (data_seed, j), so the step alone says where the data stream continues; the weights are drawn
// from `seed` once, at construction, and training itself draws no random numbers.
#pragma once

#include <deque>
#include <string>

#include "nn/checkpoint.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "train/config.h"
#include "train/run_files.h"

namespace xgrad::train {

/// Running sums over the steps done so far, from which RunSummary is computed at the end.
struct RunProgress {
  std::size_t step = 0;                             // steps done (including skipped ones): the next step to run
  double first_loss = 0;                            // loss at step 0
  GradientStats gradients;                          // over the finite steps so far
  std::size_t skipped_steps = 0;                    // non-finite steps skipped under --on-nan skip
  std::size_t consecutive_skips = 0;                // non-finite steps skipped since the last finite one
  std::deque<double> recent_loss, recent_accuracy;  // the last kRecent finite steps, oldest first
  double wall_seconds = 0;                          // training time of earlier sessions of this run
  static constexpr std::size_t kRecent = 20;
};

/// The checkpoint of a run after progress.step steps. With `nonfinite`, metadata nonfinite = "true" and the current
/// gradients are included as grad.<name>.
nn::Checkpoint make_run_checkpoint(const TrainConfig& config, const nn::AttentionModel& model,
                                   const nn::Optimizer& optimizer, const RunProgress& progress, bool nonfinite);

/// Loads `checkpoint` (read from `path`) into the model, the optimizer and `progress`. Throws nn::CheckpointError
/// naming the path and the tensor or metadata entry that is missing, malformed or of the wrong shape; throws
/// ConfigError naming the path and both counts when an optimizer that counts its updates (AdamW) holds a count other
/// than the steps taken minus those skipped.
void restore_run_checkpoint(const nn::Checkpoint& checkpoint, const std::string& path, const TrainConfig& config,
                            nn::AttentionModel& model, nn::Optimizer& optimizer, RunProgress& progress);

/// Replaces the model's weights with the tensors of `checkpoint` (read from `path`): model.<name> if the file has
/// any tensor starting with "model.", else <name> (a file of bare parameter names); other tensors are ignored.
/// Throws nn::CheckpointError naming the tensor for one the model lacks, one the file lacks, or a shape mismatch.
void load_model_weights(const nn::Checkpoint& checkpoint, const std::string& path, nn::AttentionModel& model);

/// The first `rows` data rows of metrics.csv at `path` (with the header, which must list `columns`), as text and
/// as numbers. Throws std::runtime_error naming the file if the header differs or fewer rows are complete.
struct MetricsPrefix {
  std::string text;                       // header line and the rows, each ending in '\n'
  std::vector<std::vector<double>> rows;  // the same rows parsed
  std::vector<std::vector<bool>> empty;   // per row, per cell: left empty (not measured that step)
};
MetricsPrefix read_metrics_prefix(const std::string& path, const std::vector<std::string>& columns, std::size_t rows);

}  // namespace xgrad::train
