// Multi-query associative recall (MQAR): the recall benchmark of Arora et al. 2023, "Zoology: Measuring and
// Improving Recall in Efficient Language Models", section 3.1: key-value pairs as alternating tokens, then several
// queries, each answered by the value paired with its key earlier in the sequence.
#pragma once

#include "data/task.h"

namespace xgrad::data {

/// The defaults live in the task's setting declarations (mqar.cpp), not here.
struct MultiQueryRecallConfig {
  std::size_t n_keys;              // distinct keys (Zoology: the first half of its vocab_size)
  std::size_t n_values;            // distinct values, the answer classes (Zoology: the second half)
  std::size_t n_pairs;             // key-value pairs per sequence, each key queried once (Zoology: num_kv_pairs)
  std::size_t seq_len;             // T (Zoology: input_seq_len)
  double power_a = 0.01;           // power law of the query gaps (Zoology's power_a; 1 = uniform)
  bool random_non_queries = true;  // filler between queries: random values (true) or the blank token (false)
};

/// T = seq_len tokens. Positions [0, 2 n_pairs) hold the pairs as alternating tokens, key at 2i and its value at
/// 2i + 1; keys are drawn without replacement from n_keys and values without replacement from n_values (as
/// Zoology draws both). The rest of the sequence is the query region: every key is queried exactly once, at an even
/// offset 2g from its start, the gap slots g distinct and drawn with probability proportional to (g + 1)^(power_a -
/// 1) (Zoology's power law: small gaps, queries soon after the pairs, are likelier); the target at a query is its
/// key's value, and every other position has target -1. The query region's other positions hold filler: a random
/// value token with random_non_queries (Zoology draws filler from its whole vocabulary of 8192, where a filler that
/// repeats a key is rare; with a toy vocabulary it would be common and make a query ambiguous, so filler here is
/// never a key), else the blank token.
/// Tokens: keys [0, n_keys), values n_keys + v, blank n_keys + n_values; vocabulary n_keys + n_values + 1; the
/// target is the value's token. Chance loss: ln(n_values). Needs two layers (one to copy each key into the next
/// position, one to look it up), as induction does. Eval batches come from their own generator stream.
class MultiQueryRecall : public Task {
 public:
  /// Throws TaskError, naming the flags and the allowed values, unless 1 <= n_pairs <= n_keys <= 4096,
  /// n_pairs <= n_values <= 4096, 4 n_pairs <= seq_len <= 65536 (the query region has room for a query at every
  /// other position) and 0 < power_a <= 1.
  explicit MultiQueryRecall(MultiQueryRecallConfig config);
  std::string name() const override { return "mqar"; }
  std::size_t vocab_size() const override { return config_.n_keys + config_.n_values + 1; }
  std::size_t seq_len() const override { return config_.seq_len; }
  /// One query per key.
  std::size_t targets_per_sequence() const override { return config_.n_pairs; }
  double chance_loss() const override;
  const MultiQueryRecallConfig& config() const { return config_; }
  /// Pair positions repeat the trained pairs' positions (2 x trained n_pairs of them, so a key stays at an even one
  /// and its value after it), query-region positions the trained query region's, from its start and with the same
  /// parity. `trained` must be an mqar (std::invalid_argument otherwise).
  std::vector<std::size_t> trained_positions(const Task& trained) const override;

 private:
  Batch make_batch(std::uint64_t seed, std::uint64_t index, std::size_t batch_size, Split split) const override;
  MultiQueryRecallConfig config_;
  std::vector<double> gap_weights_;  // (g + 1)^(power_a - 1) for each gap slot g of the query region
};

}  // namespace xgrad::data
