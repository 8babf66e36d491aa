#include "train/config.h"

#include <cmath>

namespace xgrad::train {

namespace {
void require(bool ok, const std::string& message) {
  if (!ok) throw ConfigError(message);
}
}  // namespace

void TrainConfig::validate() const {
  std::unique_ptr<data::Task> t;
  try {
    t = data::make_task(task_options());
  } catch (const data::TaskError& e) {
    throw ConfigError(std::string("invalid task settings: ") + e.what());
  }
  require(d_model >= 1, "--d-model must be >= 1");
  require(n_heads >= 1, "--n-heads must be >= 1");
  require(head_dim > 0 || d_model % n_heads == 0, "--d-model (" + std::to_string(d_model) +
                                                      ") must be divisible by --n-heads (" + std::to_string(n_heads) +
                                                      "), or give the head size with --d-k");
  require(n_layers >= 1, "--n-layers must be >= 1");
  require(batch_size >= 1, "--batch-size must be >= 1");
  require(steps >= 1, "--steps must be >= 1");
  require(lr > 0 && std::isfinite(lr), "--lr must be a finite number > 0");
  require(optimizer == "sgd" || optimizer == "adamw", "--optimizer: unknown '" + optimizer + "' (allowed: sgd, adamw)");
  require(momentum >= 0 && momentum < 1, "--momentum must be in [0, 1)");
  require(weight_decay >= 0 && std::isfinite(weight_decay), "--weight-decay must be >= 0");
  require(clip_grad_norm >= 0, "--clip-grad-norm must be >= 0 (0 = no clipping)");
  require(log_every >= 1, "--log-every must be >= 1");
  require(print_every >= 1, "--print-every must be >= 1");
  require(eval_batches >= 1, "--eval-batches must be >= 1");
  require(emb_init_std > 0 && std::isfinite(emb_init_std), "--emb-init-std must be a finite number > 0");
  require(proj_init_gain > 0 && std::isfinite(proj_init_gain), "--proj-init-gain must be a finite number > 0");
  require(threads >= 1, "--threads must be >= 1");
  require(clip_grad_norm < 1e30, "--clip-grad-norm must be finite (0 = off)");
  require(threads <= 64, "--threads must be <= 64");
  require(!out.empty(), "--out: a run directory is required");
  const double gib = estimated_memory_gib(t->vocab_size(), t->seq_len());
  require(gib <= kMaxMemoryGiB, "the model and batch need about " + std::to_string(static_cast<int>(gib)) +
                                    " GiB (limit " + std::to_string(static_cast<int>(kMaxMemoryGiB)) +
                                    "): reduce --d-model, --d-ff, --n-layers, --batch-size or the task's vocabulary");
}

double TrainConfig::estimated_memory_gib(std::size_t vocab, std::size_t T) const {
  const double d = static_cast<double>(d_model), V = static_cast<double>(vocab), L = static_cast<double>(n_layers),
               B = static_cast<double>(batch_size), H = static_cast<double>(n_heads), Td = static_cast<double>(T);
  const double ff = mlp ? static_cast<double>(d_ff ? d_ff : 4 * d_model) : 0.0;
  const double inner = static_cast<double>(n_heads * d_k());
  const double params = 2 * V * d + Td * d + L * (4 * d * inner + 2 * d * ff);
  // value, gradient, two Adam moments and the pre-step copy per parameter; forward activations kept for backward,
  // and as much again for their gradients
  const double activations = B * Td * (L * (10 * d + 8 * inner + 4 * ff + 4 * H * Td) + 3 * V);
  return (4.0 * 5 * params + 4.0 * 2 * activations) / (1024.0 * 1024 * 1024);
}

data::TaskOptions TrainConfig::task_options() const {
  data::TaskOptions o;
  o.name = task;
  o.n_keys = n_keys;
  o.n_values = n_values;
  o.n_pairs = n_pairs;
  o.seq_len = seq_len;
  o.n_symbols = n_symbols;
  o.text_path = text_path;
  return o;
}

nlohmann::json TrainConfig::to_json() const {
  return {
      {"task", task},
      {"n_keys", n_keys},
      {"n_values", n_values},
      {"n_pairs", n_pairs},
      {"task_seq_len", seq_len},
      {"n_symbols", n_symbols},
      {"text_path", text_path},
      {"d_model", d_model},
      {"n_heads", n_heads},
      {"d_k", d_k()},
      {"n_layers", n_layers},
      {"d_ff", d_ff ? d_ff : 4 * d_model},
      {"mlp", mlp},
      {"layer_norm", layer_norm},
      {"residual", residual},
      {"causal", causal},
      {"scale", nn::to_string(scale)},
      {"emb_init_std", emb_init_std},
      {"proj_init_gain", proj_init_gain},
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
      {"print_every", print_every},
      {"eval_every", eval_every},
      {"eval_batches", eval_batches},
      {"threads", threads},
      {"flush_denormals", flush_denormals},
      {"out", out},
  };
}

}  // namespace xgrad::train
