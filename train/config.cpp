#include "train/config.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <filesystem>
#include <type_traits>

#include <fmt/format.h>

#include "data/token_arrays.h"

namespace xgrad::train {

namespace {
void require(bool ok, const std::string& message) {
  if (!ok) throw ConfigError(message);
}
}  // namespace

void TrainConfig::validate() const {
  // Flags of one task given to another are mistakes, not settings to ignore silently.
  require(text_path.empty() || task == "char_lm", "--text is read only by --task char_lm (the task is " + task + ")");
  require(data_dir.empty() || task == "data", "--data is read only by --task data (the task is " + task + ")");
  require(data_vocab_size == 0 || task == "data", "--vocab-size is read only by --task data (the task is " + task + ")");
  require(!shuffle || task == "data", "--shuffle is read only by --task data (the task is " + task + ")");
  std::unique_ptr<data::Task> t;
  try {
    t = data::make_task(task_options());
  } catch (const data::TaskError& e) {
    if (task == "data") throw ConfigError(std::string("--data: ") + e.what());
    throw ConfigError(std::string("invalid task settings: ") + e.what());
  }
  if (const auto* arrays = dynamic_cast<const data::TokenArrays*>(t.get()))
    require(eval_every == 0 || arrays->has_eval_split(),
            "--eval-every: the data in " + data_dir + " has no held-out split (eval_inputs.npy and eval_targets.npy); "
            "add one or pass --eval-every 0");
  try {
    Registry<nn::ScalingEntry>::instance().at(scale);
  } catch (const RegistryError& e) {
    throw ConfigError(std::string("--scale: ") + e.what());
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
  // The optimizer computes in float: a double below the smallest normal float becomes 0 (or a subnormal that
  // flush_denormals zeroes), one above the largest becomes inf.
  require(lr <= FLT_MAX && static_cast<float>(lr) >= FLT_MIN,
          fmt::format("--lr must be in [{:.9g}, {:.9g}] (a normal float), got {:g}", FLT_MIN, FLT_MAX, lr));
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
  require(clip_grad_norm == 0 || static_cast<float>(clip_grad_norm) >= FLT_MIN,
          fmt::format("--clip-grad-norm must be 0 (off) or in [{:.9g}, 1e30) (a normal float), got {:g}", FLT_MIN,
                      clip_grad_norm));
  require(threads <= 64, "--threads must be <= 64");
  require(!out.empty(), "--out: a run directory is required");
  require(checkpoint_every <= 1000000000, "--checkpoint-every must be in [0, 1000000000]");
  require(on_nan == "stop" || on_nan == "skip", "--on-nan: unknown '" + on_nan + "' (allowed: stop, skip)");
  if (!init_from.empty() && !resume) {  // a resumed run takes its weights from its checkpoint
    std::error_code ec;
    require(std::filesystem::is_regular_file(init_from, ec),
            "--init-from: '" + init_from + "' is not a file (give a .safetensors checkpoint)");
  }
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
  o.data_dir = data_dir;
  o.vocab_size = data_vocab_size;
  o.shuffle = shuffle;
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
      {"data_dir", data_dir},
      {"data_vocab_size", data_vocab_size},
      {"shuffle", shuffle},
      {"d_model", d_model},
      {"n_heads", n_heads},
      {"d_k", d_k()},
      {"n_layers", n_layers},
      {"d_ff", d_ff ? d_ff : 4 * d_model},
      {"mlp", mlp},
      {"layer_norm", layer_norm},
      {"residual", residual},
      {"causal", causal},
      {"scale", scale},
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
      {"checkpoint_every", checkpoint_every},
      {"on_nan", on_nan},
      {"init_from", init_from},
  };
}

namespace {

// nlohmann converts any number to any arithmetic type (-3 to 18446744073709551613, 2.5 to 2): check the JSON type
// first, so that a corrupt config.json is refused by key instead of read as another run.
template <class T>
void read_key(const nlohmann::json& j, const char* key, T& value, const std::string& source) {
  const auto it = j.find(key);
  if (it == j.end()) return;
  std::string want;
  bool ok = true;
  if constexpr (std::is_same_v<T, bool>) {
    ok = it->is_boolean();
    want = "true or false";
  } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
    ok = it->is_number_unsigned();
    want = "a whole number >= 0";
  } else if constexpr (std::is_integral_v<T>) {
    ok = it->is_number_integer();
    want = "a whole number";
  } else if constexpr (std::is_floating_point_v<T>) {
    ok = it->is_number();
    want = "a finite number";
  } else {
    ok = it->is_string();
    want = "a string";
  }
  try {
    if (ok) value = it->get<T>();
  } catch (const nlohmann::json::exception&) {
    ok = false;
  }
  if (!ok) throw ConfigError(source + ": '" + key + "' holds " + it->dump() + ", which is not " + want);
}

}  // namespace

TrainConfig TrainConfig::from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw ConfigError(source + " is not a JSON object");
  TrainConfig c;
  read_key(j, "task", c.task, source);
  read_key(j, "n_keys", c.n_keys, source);
  read_key(j, "n_values", c.n_values, source);
  read_key(j, "n_pairs", c.n_pairs, source);
  read_key(j, "task_seq_len", c.seq_len, source);
  read_key(j, "n_symbols", c.n_symbols, source);
  read_key(j, "text_path", c.text_path, source);
  read_key(j, "data_dir", c.data_dir, source);
  read_key(j, "data_vocab_size", c.data_vocab_size, source);
  read_key(j, "shuffle", c.shuffle, source);
  read_key(j, "d_model", c.d_model, source);
  read_key(j, "n_heads", c.n_heads, source);
  read_key(j, "d_k", c.head_dim, source);
  read_key(j, "n_layers", c.n_layers, source);
  read_key(j, "d_ff", c.d_ff, source);
  read_key(j, "mlp", c.mlp, source);
  read_key(j, "layer_norm", c.layer_norm, source);
  read_key(j, "residual", c.residual, source);
  read_key(j, "causal", c.causal, source);
  read_key(j, "scale", c.scale, source);
  try {
    Registry<nn::ScalingEntry>::instance().at(c.scale);
  } catch (const std::exception& e) {
    throw ConfigError(source + ": 'scale': " + e.what());
  }
  read_key(j, "emb_init_std", c.emb_init_std, source);
  read_key(j, "proj_init_gain", c.proj_init_gain, source);
  read_key(j, "batch_size", c.batch_size, source);
  read_key(j, "steps", c.steps, source);
  read_key(j, "lr", c.lr, source);
  read_key(j, "optimizer", c.optimizer, source);
  read_key(j, "momentum", c.momentum, source);
  read_key(j, "weight_decay", c.weight_decay, source);
  read_key(j, "clip_grad_norm", c.clip_grad_norm, source);
  read_key(j, "seed", c.seed, source);
  read_key(j, "data_seed", c.data_seed, source);
  read_key(j, "log_every", c.log_every, source);
  read_key(j, "print_every", c.print_every, source);
  read_key(j, "eval_every", c.eval_every, source);
  read_key(j, "eval_batches", c.eval_batches, source);
  read_key(j, "threads", c.threads, source);
  read_key(j, "flush_denormals", c.flush_denormals, source);
  read_key(j, "out", c.out, source);
  read_key(j, "checkpoint_every", c.checkpoint_every, source);
  read_key(j, "on_nan", c.on_nan, source);
  read_key(j, "init_from", c.init_from, source);
  return c;
}

const std::vector<std::string>& resumable_settings() {
  static const std::vector<std::string> keys{"steps", "print_every", "threads", "checkpoint_every", "on_nan", "out"};
  return keys;
}

std::string flag_of(const std::string& key) {
  if (key == "task_seq_len") return "--seq-len";
  if (key == "text_path") return "--text";
  if (key == "data_dir") return "--data";
  if (key == "data_vocab_size") return "--vocab-size";
  std::string flag = "--" + key;
  for (char& ch : flag)
    if (ch == '_') ch = '-';
  return flag;
}

std::string first_differing_setting(const TrainConfig& a_config, const TrainConfig& b_config) {
  const nlohmann::json a = a_config.to_json(), b = b_config.to_json();
  const auto& free = resumable_settings();
  std::vector<std::string> keys;
  for (const auto& [key, value] : a.items())
    if (key != "d_ff" && key != "d_k") keys.push_back(key);
  keys.insert(keys.end(), {"d_k", "d_ff"});
  for (const std::string& key : keys) {
    if (std::find(free.begin(), free.end(), key) != free.end()) continue;
    if (!b.contains(key) || b.at(key) != a.at(key)) return key;
  }
  return "";
}

void check_same_run(const TrainConfig& stored, const TrainConfig& requested) {
  const std::string key = first_differing_setting(stored, requested);
  if (!key.empty()) {
    const nlohmann::json a = stored.to_json(), b = requested.to_json();
    throw ConfigError(flag_of(key) + ": the run in " + stored.out + " was trained with " + a.at(key).dump() +
                      ", not " + (b.contains(key) ? b.at(key).dump() : "null") +
                      "; a resumed run keeps its settings (it may change only --steps (raise), --print-every, "
                      "--threads, --checkpoint-every, --on-nan)");
  }
  if (requested.steps < stored.steps)
    throw ConfigError("--steps: the run in " + stored.out + " was set to " + std::to_string(stored.steps) +
                      " steps; a resumed run may raise --steps but not lower it (got " +
                      std::to_string(requested.steps) + ")");
}

}  // namespace xgrad::train
