// The main experiment: the same model trained with and without attention-score scaling at several d_k, with
// identical seeds, data and initial weights; runs are child processes (`xgrad train`), `jobs` at a time.
#pragma once

#include <string>
#include <vector>

#include "train/config.h"
#include "train/trainer.h"

namespace xgrad::train {

struct ExperimentConfig {
  TrainConfig base;                       // everything but d_model, scale and out
  std::vector<std::size_t> d_ks{16, 64, 256};
  std::vector<nn::ScaleMode> scales{nn::ScaleMode::sqrt_dk, nn::ScaleMode::none};
  int jobs = 2;                           // runs in parallel
  std::string out;                        // experiment directory; runs go to out/dk<d_k>-<scale>
  std::string executable;                 // the xgrad binary to run children with
};

struct ExperimentRow {
  std::size_t d_k = 0;
  nn::ScaleMode scale = nn::ScaleMode::sqrt_dk;
  std::string dir;
  bool ok = false;  // the child exited 0 and wrote summary.json
  RunSummary summary;
};

/// Runs every (d_k, scale) pair; d_model = d_k * n_heads. Throws ConfigError on bad settings. A run that fails
/// is reported as such in its row; the others still run.
std::vector<ExperimentRow> run_experiment(const ExperimentConfig& config);

/// The comparison table: per d_k and scale, loss at start, final loss, final accuracy, mean |grad| of W_q and W_k.
std::string format_table(const std::vector<ExperimentRow>& rows);

/// `xgrad train` arguments that reproduce `config` exactly (used to launch child runs).
std::vector<std::string> to_args(const TrainConfig& config);

}  // namespace xgrad::train
