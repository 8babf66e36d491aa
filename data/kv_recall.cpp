#include "data/kv_recall.h"

#include <cmath>
#include <numeric>
#include <string>

#include "autograd/random.h"
#include "data/registry.h"
#include "data/settings.h"

namespace xgrad::data {

namespace {
TaskEntry kv_recall_entry() {
  TaskEntry e =
      task_entry("kv_recall",
                 "key-value recall: n_pairs key-value pairs, then a key; answer its value (content-based routing)", 10);
  e.settings = {n_keys_setting(), n_values_setting(), n_pairs_setting(8),
                text_setting("kv_encoding", "pair", {"pair", "sum"},
                             "pair: one token per key-value pair; sum: key embedding + value embedding at one "
                             "position")};
  e.seq_len_from = "--n-pairs";
  e.vocab_size_from = "--n-keys, --n-values and --kv-encoding";
  e.build = [](const SettingValues& v) -> std::unique_ptr<Task> {
    const KeyValueEncoding encoding =
        v.get<std::string>("kv_encoding") == "sum" ? KeyValueEncoding::sum : KeyValueEncoding::pair;
    return std::make_unique<KeyValueRecall>(KeyValueRecallConfig{
        v.get<std::size_t>("n_keys"), v.get<std::size_t>("n_values"), v.get<std::size_t>("n_pairs"), encoding});
  };
  return e;
}
const Registration<TaskEntry> kv_recall_registration{kv_recall_entry()};
}  // namespace

KeyValueRecall::KeyValueRecall(KeyValueRecallConfig config) : config_(config) {
  // The vocabulary is n_keys * n_values + n_keys, so both factors are bounded.
  check_setting("kv_recall", "n_keys", config_.n_keys, 1, kMaxSymbols);
  check_setting("kv_recall", "n_values", config_.n_values, 2, kMaxSymbols);
  check_setting("kv_recall", "n_pairs", config_.n_pairs, 1, kMaxSymbols);
  if (config_.n_keys < config_.n_pairs)
    throw TaskError("kv_recall: n_keys (" + std::to_string(config_.n_keys) + ") must be >= n_pairs (" +
                    std::to_string(config_.n_pairs) + "): keys are distinct within a sequence");
}

std::size_t KeyValueRecall::vocab_size() const {
  if (config_.encoding == KeyValueEncoding::sum) return config_.n_values + config_.n_keys + 1;
  return config_.n_keys * config_.n_values + config_.n_keys;
}

double KeyValueRecall::chance_loss() const { return std::log(static_cast<double>(config_.n_values)); }

std::vector<std::size_t> KeyValueRecall::trained_positions(const Task& trained) const {
  const std::size_t trained_pairs = trained.seq_len() - 1;
  std::vector<std::size_t> out(seq_len());
  for (std::size_t i = 0; i < config_.n_pairs; ++i) out[i] = i % trained_pairs;
  out[config_.n_pairs] = trained_pairs;  // the query
  return out;
}

Batch KeyValueRecall::make_batch(std::uint64_t seed, std::uint64_t index, std::size_t batch_size, Split split) const {
  const std::size_t T = seq_len(), P = config_.n_pairs;
  const bool sum = config_.encoding == KeyValueEncoding::sum;
  const auto key_token = [this](std::size_t key) { return static_cast<std::int64_t>(config_.n_values + key); };
  Batch b;
  b.inputs = sum ? xt::xarray<std::int64_t>::from_shape({batch_size, T, 2})
                 : xt::xarray<std::int64_t>::from_shape({batch_size, T});
  b.targets = xt::xarray<std::int64_t>::from_shape({batch_size, T});
  b.targets.fill(-1);
  Generator rng(seed, split_stream(0x6b76 /* "kv" */, split), index);
  std::vector<std::size_t> keys(config_.n_keys);
  for (std::size_t s = 0; s < batch_size; ++s) {
    std::iota(keys.begin(), keys.end(), std::size_t(0));
    for (std::size_t i = 0; i < P; ++i)  // partial Fisher-Yates: the first P keys are a uniform draw
      std::swap(keys[i], keys[i + rng.uniform(config_.n_keys - i)]);
    std::size_t query_pos = rng.uniform(P);
    std::size_t answer = 0;
    for (std::size_t i = 0; i < P; ++i) {
      const std::size_t value = rng.uniform(config_.n_values);
      if (sum) {
        b.inputs(s, i, 0) = key_token(keys[i]);
        b.inputs(s, i, 1) = static_cast<std::int64_t>(value);
      } else {
        b.inputs(s, i) = static_cast<std::int64_t>(keys[i] * config_.n_values + value);
      }
      if (i == query_pos) answer = value;
    }
    if (sum) {
      b.inputs(s, P, 0) = key_token(keys[query_pos]);
      b.inputs(s, P, 1) = key_token(config_.n_keys);  // the query marker, n_values + n_keys
    } else {
      b.inputs(s, P) = static_cast<std::int64_t>(config_.n_keys * config_.n_values + keys[query_pos]);
    }
    b.targets(s, P) = static_cast<std::int64_t>(answer);
  }
  return b;
}

xt::xarray<std::int64_t> KeyValueRecall::answer_positions(const Batch& batch) const {
  const std::size_t B = batch.inputs.shape(0), T = seq_len(), P = config_.n_pairs;
  const bool sum = config_.encoding == KeyValueEncoding::sum;
  // The key of position i: its own token in the sum encoding; key * n_values + value (pair) or n_keys * n_values +
  // key (the query) in the pair encoding.
  const auto key_at = [&](std::size_t s, std::size_t i) -> std::int64_t {
    if (sum) return batch.inputs(s, i, 0);
    const auto token = batch.inputs(s, i);
    const auto pairs = static_cast<std::int64_t>(config_.n_keys * config_.n_values);
    return token >= pairs ? token - pairs : token / static_cast<std::int64_t>(config_.n_values);
  };
  xt::xarray<std::int64_t> out = xt::xarray<std::int64_t>::from_shape({B, T});
  out.fill(-1);
  for (std::size_t s = 0; s < B; ++s)
    for (std::size_t i = 0; i < P; ++i)
      if (key_at(s, i) == key_at(s, P)) out(s, P) = static_cast<std::int64_t>(i);
  return out;
}

}  // namespace xgrad::data
