#include "train/config.h"

#include <cmath>

namespace xgrad::train {

namespace {
void require(bool ok, const std::string& message) {
  if (!ok) throw ConfigError(message);
}
}  // namespace

void TrainConfig::validate() const {
  require(task == "kv_recall", "--task: unknown task '" + task + "' (allowed: kv_recall)");
  require(n_pairs >= 1, "--n-pairs must be >= 1");
  require(n_keys >= n_pairs, "--n-keys (" + std::to_string(n_keys) + ") must be >= --n-pairs (" +
                                 std::to_string(n_pairs) + ")");
  require(n_values >= 2, "--n-values must be >= 2");
  require(n_keys <= 4096 && n_values <= 4096, "--n-keys and --n-values must be <= 4096");
  require(d_model >= 1, "--d-model must be >= 1");
  require(n_heads >= 1, "--n-heads must be >= 1");
  require(d_model % n_heads == 0, "--d-model (" + std::to_string(d_model) + ") must be divisible by --n-heads (" +
                                      std::to_string(n_heads) + ")");
  require(n_layers >= 1, "--n-layers must be >= 1");
  require(batch_size >= 1, "--batch-size must be >= 1");
  require(steps >= 1, "--steps must be >= 1");
  require(lr > 0 && std::isfinite(lr), "--lr must be a finite number > 0");
  require(optimizer == "sgd" || optimizer == "adamw", "--optimizer: unknown '" + optimizer + "' (allowed: sgd, adamw)");
  require(momentum >= 0 && momentum < 1, "--momentum must be in [0, 1)");
  require(weight_decay >= 0 && std::isfinite(weight_decay), "--weight-decay must be >= 0");
  require(clip_grad_norm >= 0, "--clip-grad-norm must be >= 0 (0 = no clipping)");
  require(log_every >= 1, "--log-every must be >= 1");
  require(threads >= 1, "--threads must be >= 1");
  require(!out.empty(), "--out: a run directory is required");
}

nlohmann::json TrainConfig::to_json() const {
  return {
      {"task", task},
      {"n_keys", n_keys},
      {"n_values", n_values},
      {"n_pairs", n_pairs},
      {"d_model", d_model},
      {"n_heads", n_heads},
      {"d_k", d_k()},
      {"n_layers", n_layers},
      {"d_ff", d_ff ? d_ff : 4 * d_model},
      {"mlp", mlp},
      {"causal", causal},
      {"scale", nn::to_string(scale)},
      {"batch_size", batch_size},
      {"steps", steps},
      {"lr", lr},
      {"optimizer", optimizer},
      {"momentum", momentum},
      {"weight_decay", weight_decay},
      {"clip_grad_norm", clip_grad_norm},
      {"seed", seed},
      {"data_seed", data_seed},
      {"log_every", log_every},
      {"threads", threads},
      {"out", out},
  };
}

}  // namespace xgrad::train
