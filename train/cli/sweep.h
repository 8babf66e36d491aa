// `xgrad sweep`: a grid of scale mode × d_k × (optimizer, learning rate) × any other settings (--grid) × seed runs,
// each a child process (`xgrad train --config FILE`, FILE written by the sweep), `jobs` at a time, all below one sweep directory with an index file. Runs already complete are
// skipped, so an interrupted sweep resumes by running the same command again. A run that diverges is a result,
// recorded with its step; the sweep goes on.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/config.h"

namespace xgrad::train {

/// One optimizer at one learning rate.
struct Arm {
  std::string optimizer;  // sgd | adamw
  double lr = 0;
};
/// "sgd@0.1" → {sgd, 0.1}; throws ConfigError naming --arms and the allowed form.
Arm parse_arm(const std::string& text);

/// One more axis of the grid: a declared setting and its values (`--grid d_model=16,64`).
struct GridAxis {
  std::string key;
  std::vector<nlohmann::json> values;
};

struct SweepConfig {
  TrainConfig base;  // every setting but scale, head size, seed, optimizer, lr, the grid axes and out
  std::vector<std::string> scales{"sqrt_dk", "none"};
  std::vector<std::size_t> d_ks{16, 64, 256};
  std::vector<std::uint64_t> seeds{0, 1, 2};
  std::vector<Arm> arms{{"adamw", 3e-3}};
  std::vector<GridAxis> grid;  // in the order given; runs vary the last axis fastest (before the seed)
  int jobs = 2;            // runs at once (each run uses base.threads threads, BLAS and xgrad's own)
  std::string out;         // sweep directory: runs in out/runs/<name>, the index in out/sweep.json
  std::string executable;  // the xgrad binary children run
};

struct SweepRun {
  std::string name;  // dk<d_k>-<scale>-<optimizer>-lr<lr>[-<key><value> per grid axis]-s<seed>
  TrainConfig config;
  nlohmann::json grid = nlohmann::json::object();  // this run's value of each grid axis
  std::string status = "pending";  // pending | complete | diverged | failed | skipped (complete before this sweep)
  long diverged_step = -1;
  double final_loss = 0;
  double seconds = 0;
};

/// The runs of the grid, in order (d_k, scale, arm, seed), with their directories. Throws ConfigError on bad settings
/// (empty lists, duplicates, invalid run settings).
std::vector<SweepRun> plan_sweep(const SweepConfig& config);

/// Runs the plan; writes out/sweep.json after every finished run (atomically). `progress` gets one line per
/// finished run ("runs done / total, elapsed, ETA"). On SIGINT/SIGTERM the children are stopped, the index written,
/// and the signal re-raised. Returns the runs with their status.
std::vector<SweepRun> run_sweep(const SweepConfig& config, const std::function<void(const std::string&)>& progress);

/// Where the sweep writes the config file of run `name` (`xgrad train --config FILE` runs it): out/configs/name.json.
std::string run_config_path(const SweepConfig& config, const std::string& name);

}  // namespace xgrad::train
