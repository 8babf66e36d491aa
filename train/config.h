// One training run's settings, resolved and validated, and their JSON form (config.json).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "nn/attention.h"

namespace xgrad::train {

/// Thrown for a bad setting; the message names the flag and the allowed values. The CLI exits 2 on it.
class ConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct TrainConfig {
  // task: key-value recall (data/kv_recall.h)
  std::string task = "kv_recall";
  std::size_t n_keys = 8, n_values = 8, n_pairs = 8;
  // model (nn/model.h)
  std::size_t d_model = 64, n_heads = 1, n_layers = 1, d_ff = 0;
  bool mlp = true, causal = true;
  nn::ScaleMode scale = nn::ScaleMode::sqrt_dk;
  // optimisation
  std::size_t batch_size = 64, steps = 800;
  double lr = 3e-3;
  std::string optimizer = "adamw";  // sgd | adamw
  double momentum = 0.9, weight_decay = 0.0, clip_grad_norm = 0.0;  // clip 0 = off
  // reproducibility and output
  std::uint64_t seed = 0, data_seed = 0;
  std::size_t log_every = 100;  // console progress every N steps (metrics.csv gets every step)
  int threads = 1;              // BLAS threads
  std::string out;              // run directory

  std::size_t d_k() const { return d_model / n_heads; }
  /// Throws ConfigError naming the first bad flag.
  void validate() const;
  nlohmann::json to_json() const;
};

}  // namespace xgrad::train
