// One training run: model, data, optimizer, the step loop, and the files it writes.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

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
  bool diverged = false;       // loss or gradient became NaN/Inf
  long diverged_step = -1;
  double wall_seconds = 0;
  nlohmann::json to_json() const;
  static RunSummary from_json(const nlohmann::json& j);
};

/// Trains one configuration and writes into config.out: config.json (resolved config and environment),
/// metrics.csv (header, then one row per step, flushed per row), summary.json. Creates the directory.
/// Throws ConfigError for bad settings, std::runtime_error for I/O failures. A run that diverges stops at that step,
/// keeps every row written, and reports diverged = true (not an exception: divergence is a result).
RunSummary train(const TrainConfig& config);

}  // namespace xgrad::train
