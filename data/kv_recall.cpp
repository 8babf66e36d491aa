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
  TaskEntry e;
  e.name = "kv_recall";
  e.description = "key-value recall: n_pairs key-value pairs, then a key; answer its value (content-based routing)";
  e.order = 10;
  e.settings = {whole_setting("n_keys", 8, 1, kMaxSymbols, "distinct keys"),
                whole_setting("n_values", 8, 2, kMaxSymbols, "distinct values (answer classes)"),
                whole_setting("n_pairs", 8, 1, kMaxSymbols, "key-value pairs per sequence")};
  e.seq_len_from = "--n-pairs";
  e.vocab_size_from = "--n-keys and --n-values";
  e.build = [](const SettingValues& v) -> std::unique_ptr<Task> {
    return std::make_unique<KeyValueRecall>(KeyValueRecallConfig{
        v.get<std::size_t>("n_keys"), v.get<std::size_t>("n_values"), v.get<std::size_t>("n_pairs")});
  };
  return e;
}
const Registration<TaskEntry> registration{kv_recall_entry()};
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

std::size_t KeyValueRecall::vocab_size() const { return config_.n_keys * config_.n_values + config_.n_keys; }

double KeyValueRecall::chance_loss() const { return std::log(static_cast<double>(config_.n_values)); }

Batch KeyValueRecall::make_batch(std::uint64_t seed, std::uint64_t index, std::size_t batch_size, Split split) const {
  const std::size_t T = seq_len(), P = config_.n_pairs;
  Batch b;
  b.inputs = xt::xarray<std::int64_t>::from_shape({batch_size, T});
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
      b.inputs(s, i) = static_cast<std::int64_t>(keys[i] * config_.n_values + value);
      if (i == query_pos) answer = value;
    }
    b.inputs(s, P) = static_cast<std::int64_t>(config_.n_keys * config_.n_values + keys[query_pos]);
    b.targets(s, P) = static_cast<std::int64_t>(answer);
  }
  return b;
}

}  // namespace xgrad::data
