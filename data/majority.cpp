#include "data/majority.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/random.h"
#include "data/registry.h"

namespace xgrad::data {

namespace {
const Registration<TaskEntry> majority_registration{
    symbol_sequence_task<Majority>("majority", "majority: answer the most frequent symbol of the sequence", 50)};
}  // namespace

Majority::Majority(SymbolSequenceConfig config) : SymbolSequenceTask(config) {
  check_setting("majority", "seq_len", config_.seq_len, 1, kMaxSeqLen);
  check_setting("majority", "n_symbols", config_.n_symbols, 2, kMaxMajoritySymbols);
}

double Majority::chance_loss() const { return std::log(static_cast<double>(config_.n_symbols)); }

Batch Majority::make_batch(std::uint64_t seed, std::uint64_t index, std::size_t batch_size, Split split) const {
  const std::size_t T = config_.seq_len, K = config_.n_symbols;
  Batch b = blank_batch(batch_size, T);
  Generator rng(seed, split_stream(0x6d6a /* "mj" */, split), index);
  std::vector<std::size_t> count(K);
  for (std::size_t s = 0; s < batch_size; ++s) {
    std::int64_t* in = &b.inputs(s, 0);
    std::size_t winner = 0;
    bool unique = false;
    while (!unique) {
      std::fill(count.begin(), count.end(), std::size_t(0));
      for (std::size_t i = 0; i < T; ++i) {
        const std::size_t symbol = rng.uniform(K);
        in[i] = static_cast<std::int64_t>(symbol);
        ++count[symbol];
      }
      winner = static_cast<std::size_t>(std::max_element(count.begin(), count.end()) - count.begin());
      unique = std::count(count.begin(), count.end(), count[winner]) == 1;
    }
    b.targets(s, T - 1) = static_cast<std::int64_t>(winner);
  }
  return b;
}

}  // namespace xgrad::data
