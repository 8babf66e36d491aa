#include "data/induction.h"

#include <cmath>

#include "autograd/random.h"
#include "data/registry.h"

namespace xgrad::data {

namespace {
const Registration<TaskEntry> induction_registration{symbol_sequence_task<InductionHeads>(
    "induction", "induction heads: after A B ... A, predict B (Olsson et al. 2022)", 60)};
}  // namespace

InductionHeads::InductionHeads(SymbolSequenceConfig config) : SymbolSequenceTask(config) {
  check_setting("induction", "seq_len", config_.seq_len, 3, kMaxSeqLen);
  // Three symbols at least, so that the filler is not just B repeated and the answer is not "the other symbol".
  check_setting("induction", "n_symbols", config_.n_symbols, 3, kMaxSymbols);
}

double InductionHeads::chance_loss() const { return std::log(static_cast<double>(config_.n_symbols - 1)); }

Batch InductionHeads::make_batch(std::uint64_t seed, std::uint64_t index, std::size_t batch_size, Split split) const {
  const std::size_t T = config_.seq_len, K = config_.n_symbols;
  Batch b = blank_batch(batch_size, T);
  Generator rng(seed, split_stream(0x6968 /* "ih" */, split), index);
  for (std::size_t s = 0; s < batch_size; ++s) {
    const std::size_t a = rng.uniform(K);
    // A uniform draw from the alphabet without `a`: draw from K-1 symbols and step over a.
    auto other_than_a = [&] {
      const std::size_t x = rng.uniform(K - 1);
      return static_cast<std::int64_t>(x >= a ? x + 1 : x);
    };
    const std::int64_t b_symbol = other_than_a();
    const std::size_t p = rng.uniform(T - 2);
    std::int64_t* in = &b.inputs(s, 0);
    for (std::size_t i = 0; i + 1 < T; ++i) in[i] = other_than_a();
    in[p] = static_cast<std::int64_t>(a);
    in[p + 1] = b_symbol;
    in[T - 1] = static_cast<std::int64_t>(a);
    b.targets(s, T - 1) = b_symbol;
  }
  return b;
}

}  // namespace xgrad::data
