// One training run's settings, resolved and validated, and their JSON form (config.json).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/registry.h"
#include "nn/attention.h"

namespace xgrad::train {

/// Thrown for a bad setting; the message names the flag and the allowed values. The CLI exits 2 on it.
class ConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct TrainConfig {
  // task (data/registry.h): kv_recall | copy | reverse | sort | majority | induction | char_lm | data
  std::string task = "kv_recall";
  std::size_t n_keys = 8, n_values = 8, n_pairs = 8;  // kv_recall
  std::size_t seq_len = 16, n_symbols = 8;             // copy, reverse, sort, majority, induction; seq_len: char_lm
  std::string text_path;                               // char_lm
  std::string data_dir;                                // data: inputs.npy, targets.npy (see data/token_arrays.h)
  std::size_t data_vocab_size = 0;                     // data: --vocab-size (0 = max token id + 1)
  bool shuffle = false;                                // data: a seeded permutation of the rows per epoch
  // model (nn/model.h)
  std::size_t d_model = 64, n_heads = 1, n_layers = 1, d_ff = 0;
  std::size_t head_dim = 0;  // --d-k: the head size d_k; 0 means d_model / n_heads
  bool mlp = true, layer_norm = true, residual = true, causal = true;
  std::string scale = "sqrt_dk";  // a registered scaling (nn/scaling.h)
  std::string attention = "multi_head";  // a registered attention layer (nn/attention_layer.h)
  double emb_init_std = 1.0, proj_init_gain = 1.0;
  // optimisation
  std::size_t batch_size = 64, steps = 800;
  double lr = 3e-3;
  std::string optimizer = "adamw";  // sgd | adamw
  double momentum = 0.9, weight_decay = 0.0, clip_grad_norm = 0.0;  // clip 0 = off
  // reproducibility and output
  std::uint64_t seed = 0, data_seed = 0;
  std::size_t log_every = 1;     // saturation metrics and update RMS every N steps (other rows hold nan there)
  std::size_t print_every = 100; // console progress every N steps
  std::size_t eval_every = 0;    // held-out loss every N steps (0 = off); eval_loss column
  std::size_t eval_batches = 4;  // batches per held-out evaluation
  int threads = 1;               // --threads: BLAS and xgrad's own loops (autograd/kernels/parallel.h)
  bool flush_denormals = true;   // flush subnormal floats to zero (see environment.h)
  std::string out;               // run directory
  bool overwrite = false;        // replace an existing run in `out`
  // checkpoints and recovery (see trainer.h)
  std::size_t checkpoint_every = 100;  // write out/checkpoint.safetensors every N steps (0: only at the end)
  bool resume = false;                 // continue the run in `out` from its checkpoint (not part of to_json)
  std::string on_nan = "stop";         // non-finite loss or gradient: stop (exit 3) | skip (the step, and go on)
  std::string init_from;               // start from the weights of this safetensors file instead of the seed's
  // Testing only (no flag, not in config.json): at these steps one gradient element of the first attn.w_q.weight is
  // set to NaN after backward, to exercise the non-finite handling.
  std::vector<std::size_t> nan_gradient_steps;

  std::size_t d_k() const { return head_dim ? head_dim : d_model / n_heads; }
  /// Throws ConfigError naming the first bad flag (task settings included: the task is built once to check them).
  void validate() const;
  /// A rough upper estimate of the memory one run needs (parameters, optimizer state, activations), in GiB.
  double estimated_memory_gib(std::size_t vocab_size, std::size_t seq_len) const;
  /// validate() rejects a configuration estimated above this.
  static constexpr double kMaxMemoryGiB = 12.0;
  /// The data-layer settings of this configuration.
  data::TaskOptions task_options() const;
  nlohmann::json to_json() const;
  /// The configuration a config.json (to_json) describes; keys to_json writes and `j` lacks keep their defaults
  /// (runs written by older versions). Throws ConfigError naming the key and `source` for a value of the wrong type
  /// or an unknown scaling. `out` is taken from `j`.
  static TrainConfig from_json(const nlohmann::json& j, const std::string& source);
};

/// Settings a resumed run may change: they do not alter what the run computes (steps may only be raised).
const std::vector<std::string>& resumable_settings();

/// Throws ConfigError unless `requested` describes the same run as `stored` (the run directory's config.json): every
/// setting but resumable_settings() must be equal, and requested.steps >= stored.steps. The message names the flag,
/// both values, and what may change.
void check_same_run(const TrainConfig& stored, const TrainConfig& requested);

/// The first to_json key outside resumable_settings() whose value differs between `a` and `b` (a setting given
/// before what follows from it: d_k and d_ff last), or "" if they describe the same run.
std::string first_differing_setting(const TrainConfig& a, const TrainConfig& b);

/// The command-line flag of a to_json key ("task_seq_len" -> "--seq-len", "d_model" -> "--d-model").
std::string flag_of(const std::string& key);

}  // namespace xgrad::train
