// One training run: model, data, optimizer, the step loop, and the files it writes.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "nn/model.h"
#include "train/config.h"

namespace xgrad::train {

/// What a run reports at its end (also written to summary.json).
struct RunSummary {
  std::size_t steps_done = 0;
  double chance_loss = 0;      // ln(n_values): the loss of a uniform guess over the answers
  double first_loss = 0;       // loss at step 0
  double final_loss = 0;       // mean loss over the last min(20, steps) steps
  double final_accuracy = 0;   // mean accuracy over the same window
  double mean_grad_norm_w_q = 0;  // mean over steps of the gradient norm of the query weights (all layers, L2)
  double mean_grad_norm_w_k = 0;  // same for the key weights
  double frac_zero_grad_w_q = 0;  // fraction of steps where the query weights' gradient was exactly zero
  double frac_zero_grad_w_k = 0;  // same for the key weights
  bool diverged = false;       // loss or gradient became NaN/Inf
  long diverged_step = -1;
  double wall_seconds = 0;
  nlohmann::json to_json() const;
  static RunSummary from_json(const nlohmann::json& j);
};

/// Trains one configuration and writes into config.out: config.json (resolved config and environment),
/// metrics.csv (header, then one row per step, flushed per row), summary.json. Creates the directory; refuses
/// (ConfigError) a directory that already holds a run unless config.overwrite.
/// Throws ConfigError for bad settings, std::runtime_error for I/O failures. A run that diverges stops at that step,
/// keeps every row written, and reports diverged = true (not an exception: divergence is a result).
///
/// metrics.csv columns: step, loss, accuracy, lr, grad_norm (global L2, before clipping), grad_norm/<param> for
/// every parameter, then per attention layer l and head h `attn/l<l>h<h>/<stat>` for every field of
/// nn::AttentionStats (queries: the positions that carry a target for the last layer, all positions for earlier
/// layers), then update_rms/<param> and grad_rms/<param> (RMS of the optimizer's update and of the gradient), then
/// eval_loss, then step_ms. Attention statistics and RMS columns are computed every log_every steps and on the last
/// step, eval_loss every eval_every steps; other rows hold nan there.
RunSummary train(const TrainConfig& config);

/// The model settings of `config` for `task` (vocabulary and positions come from the task).
nn::ModelConfig model_config(const TrainConfig& config, const data::Task& task);

/// Attention statistic names in metrics.csv column order (the `<stat>` of `attn/l<l>h<h>/<stat>`).
const std::vector<std::string>& attention_stat_names();

}  // namespace xgrad::train
