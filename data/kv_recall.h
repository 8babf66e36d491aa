// Key-value recall: the task one attention layer can solve only by content-based routing.
#pragma once

#include "data/task.h"

namespace xgrad::data {

/// How a sequence's key-value pairs enter the model (setting kv_encoding).
enum class KeyValueEncoding {
  pair,  ///< one token per pair: every pair's embedding is learned on its own
  sum,   ///< the key's token and the value's token at one position: the model sums their embeddings
};

/// The defaults live in the task's setting declarations (kv_recall.cpp), not here.
struct KeyValueRecallConfig {
  std::size_t n_keys;    // distinct keys
  std::size_t n_values;  // distinct values (the answer classes)
  std::size_t n_pairs;   // key-value pairs per sequence; keys are distinct within a sequence
  KeyValueEncoding encoding = KeyValueEncoding::pair;
};

/// Sequence length T = n_pairs + 1: the first n_pairs positions hold the pairs, the last one a query for one of the
/// keys present. The target there is the value paired with that key (class id value, in [0, n_values)); every other
/// position has target -1. Keys are drawn without replacement, values with replacement, so only the query's key —
/// not position or frequency — identifies the answer. Chance loss: ln(n_values). Eval batches come from their own
/// generator stream. The same (seed, index, split) draws the same keys, values and query in both encodings.
///
/// pair: inputs [B, T]. A pair is one token, key * n_values + value; the query is the token n_keys * n_values + key.
/// Vocabulary n_keys * n_values + n_keys.
/// sum: inputs [B, T, 2], two tokens per position whose embeddings the model adds (nn/model.h). Values are tokens
/// [0, n_values) (so a value's token is its class id), keys n_values + key, and the query marker is n_values + n_keys:
/// a pair position holds (key token, value token), the query position (key token, query marker). Key and value
/// embeddings are each shared by every pair they occur in. Vocabulary n_values + n_keys + 1.
class KeyValueRecall : public Task {
 public:
  /// Throws TaskError unless 1 <= n_pairs <= n_keys <= 4096 and 2 <= n_values <= 4096.
  explicit KeyValueRecall(KeyValueRecallConfig config);
  std::string name() const override { return "kv_recall"; }
  std::size_t vocab_size() const override;
  std::size_t seq_len() const override { return config_.n_pairs + 1; }
  /// The query, the last position.
  std::size_t targets_per_sequence() const override { return 1; }
  double chance_loss() const override;
  const KeyValueRecallConfig& config() const { return config_; }
  /// A pair's position does not matter to the answer: pair i takes the trained pair position i mod (trained
  /// n_pairs), and the query the trained query position. `trained` is a kv_recall (its seq_len() - 1 pairs).
  std::vector<std::size_t> trained_positions(const Task& trained) const override;
  /// The query (last position) needs the pair position holding its key.
  xt::xarray<std::int64_t> answer_positions(const Batch& batch) const override;

 private:
  Batch make_batch(std::uint64_t seed, std::uint64_t index, std::size_t batch_size, Split split) const override;
  KeyValueRecallConfig config_;
};

}  // namespace xgrad::data
