// Majority: the control task whose right attention pattern is uniform.
#pragma once

#include "data/settings.h"
#include "data/task.h"

namespace xgrad::data {

/// The largest alphabet majority accepts.
inline constexpr std::size_t kMaxMajoritySymbols = 64;

/// seq_len symbols drawn uniformly with replacement from [0, n_symbols). The target at the last position is the
/// symbol that occurs most often in the whole sequence (the last symbol included); every other position has target
/// -1. Sequences whose most frequent count is shared by two or more symbols are redrawn, so the answer is always
/// unique (with n_symbols = 2 and odd seq_len no redraw is ever needed).
/// A causal model solves it by attending uniformly from the last position and reading off the largest count, so
/// sharp, saturated attention is of no use here: the contrast to kv_recall.
/// T = seq_len; vocabulary = n_symbols; the loss is taken at position T-1 only. Chance loss: ln(n_symbols).
/// Eval batches come from their own generator stream.
class Majority : public SymbolSequenceTask {
 public:
  /// Throws TaskError unless seq_len is in [1, 65536] and n_symbols in [2, 64] (a small alphabet: with many symbols
  /// most draws tie and the redrawing gets slow).
  explicit Majority(SymbolSequenceConfig config);
  std::string name() const override { return "majority"; }
  double chance_loss() const override;

 private:
  Batch make_batch(std::uint64_t seed, std::uint64_t index, std::size_t batch_size, Split split) const override;
};

}  // namespace xgrad::data
