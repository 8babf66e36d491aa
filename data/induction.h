// Induction heads: the pattern-completion task that needs attention composed over two layers.
#pragma once

#include "data/settings.h"
#include "data/task.h"

namespace xgrad::data {

/// A random sequence in which a token A is followed by a token B once, and A appears again as the last token; the
/// target after that final A is B. This is the in-context copying that Olsson et al. (2022), "In-context Learning
/// and Induction Heads", attribute to induction heads: a first-layer head writes "my previous token was A" into the
/// position of B, and a second-layer head at the final A attends by content to that position and copies B. One layer
/// of attention can find A but not the token after it, so the task separates one-layer from two-layer models.
///
/// Layout, with T = seq_len: A and B are distinct symbols of [0, n_symbols), drawn uniformly; p is uniform in
/// [0, T-3]; positions p and p+1 hold A and B, position T-1 holds A, and every other position holds a symbol drawn
/// uniformly from the alphabet without A. So A occurs exactly twice and the pattern "A then ?" has one answer.
/// Target at T-1 = B; every other position has target -1.
/// Vocabulary = n_symbols; the loss is taken at position T-1 only. Chance loss: ln(n_symbols - 1), since the last
/// token shows the answer is not A. Eval batches come from their own generator stream.
class InductionHeads : public SymbolSequenceTask {
 public:
  /// Throws TaskError unless seq_len is in [3, 65536] and n_symbols in [3, 4096].
  explicit InductionHeads(SymbolSequenceConfig config);
  std::string name() const override { return "induction"; }
  double chance_loss() const override;

 private:
  Batch make_batch(std::uint64_t seed, std::uint64_t index, std::size_t batch_size, Split split) const override;
};

}  // namespace xgrad::data
