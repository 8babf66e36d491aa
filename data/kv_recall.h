// Key-value recall: the task one attention layer can solve only by content-based routing.
#pragma once

#include "data/task.h"

namespace xgrad::data {

/// The defaults live in the task's setting declarations (kv_recall.cpp), not here.
struct KeyValueRecallConfig {
  std::size_t n_keys;    // distinct keys
  std::size_t n_values;  // distinct values (the answer classes)
  std::size_t n_pairs;   // key-value pairs per sequence; keys are distinct within a sequence
};

/// Each of the first n_pairs positions holds one pair as a single token, token = key * n_values + value.
/// The last position holds a query token, n_keys * n_values + key, for one of the keys present. The target there is
/// the value paired with that key (class id value, in [0, n_values)); every other position has target -1.
/// Sequence length T = n_pairs + 1; vocabulary = n_keys * n_values + n_keys. Keys are drawn without replacement,
/// values with replacement, so only the query's key — not position or frequency — identifies the answer.
/// Chance loss: ln(n_values). Eval batches come from their own generator stream.
class KeyValueRecall : public Task {
 public:
  /// Throws TaskError unless 1 <= n_pairs <= n_keys <= 4096 and 2 <= n_values <= 4096.
  explicit KeyValueRecall(KeyValueRecallConfig config);
  std::string name() const override { return "kv_recall"; }
  std::size_t vocab_size() const override;
  std::size_t seq_len() const override { return config_.n_pairs + 1; }
  double chance_loss() const override;
  const KeyValueRecallConfig& config() const { return config_; }

 private:
  Batch make_batch(std::uint64_t seed, std::uint64_t index, std::size_t batch_size, Split split) const override;
  KeyValueRecallConfig config_;
};

}  // namespace xgrad::data
