#include "data/sequence_transform.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "autograd/random.h"
#include "data/registry.h"

namespace xgrad::data {

namespace {
// Three tasks of one layout, registered beside the code they share.
const Registration<TaskEntry> copy_registration{
    symbol_sequence_task<CopySequence>("copy", "copy: write the sequence out again after a separator", 20)};
const Registration<TaskEntry> reverse_registration{
    symbol_sequence_task<ReverseSequence>("reverse", "reverse: write the sequence out reversed after a separator", 30)};
const Registration<TaskEntry> sort_registration{
    symbol_sequence_task<SortSequence>("sort", "sort: write the sequence out sorted after a separator", 40)};
}  // namespace

SequenceTransform::SequenceTransform(std::string name, std::uint64_t stream, SymbolSequenceConfig config)
    : name_(std::move(name)), stream_(stream), config_(config) {
  if (config_.seq_len % 2 != 0 || config_.seq_len < 4 || config_.seq_len > kMaxSeqLen)
    throw TaskError(name_ + ": seq_len must be even and in [4, " + std::to_string(kMaxSeqLen) +
                    "] (seq_len / 2 symbols, then the separator and the answer), got " +
                    std::to_string(config_.seq_len));
  check_setting(name_, "n_symbols", config_.n_symbols, 2, kMaxSymbols);
}

double SequenceTransform::chance_loss() const { return std::log(static_cast<double>(config_.n_symbols)); }

Batch SequenceTransform::make_batch(std::uint64_t seed, std::uint64_t index, std::size_t batch_size,
                                    Split split) const {
  const std::size_t T = config_.seq_len, n = T / 2;
  const auto separator = static_cast<std::int64_t>(config_.n_symbols);
  Batch b;
  b.inputs = xt::xarray<std::int64_t>::from_shape({batch_size, T});
  b.targets = xt::xarray<std::int64_t>::from_shape({batch_size, T});
  Generator rng(seed, split_stream(stream_, split), index);
  std::vector<std::int64_t> symbols(n);
  for (std::size_t s = 0; s < batch_size; ++s) {
    std::int64_t* in = &b.inputs(s, 0);
    std::int64_t* target = &b.targets(s, 0);
    for (std::size_t i = 0; i < n; ++i) {
      symbols[i] = static_cast<std::int64_t>(rng.uniform(config_.n_symbols));
      in[i] = symbols[i];
      target[i] = -1;
    }
    transform(symbols);
    in[n] = separator;
    for (std::size_t i = 0; i < n; ++i) {
      target[n + i] = symbols[i];
      if (i + 1 < n) in[n + 1 + i] = symbols[i];
    }
  }
  return b;
}

CopySequence::CopySequence(SymbolSequenceConfig config) : SequenceTransform("copy", 0x6370 /* "cp" */, config) {}

ReverseSequence::ReverseSequence(SymbolSequenceConfig config)
    : SequenceTransform("reverse", 0x7276 /* "rv" */, config) {}

void ReverseSequence::transform(std::vector<std::int64_t>& symbols) const {
  std::reverse(symbols.begin(), symbols.end());
}

SortSequence::SortSequence(SymbolSequenceConfig config) : SequenceTransform("sort", 0x7374 /* "st" */, config) {}

void SortSequence::transform(std::vector<std::int64_t>& symbols) const { std::sort(symbols.begin(), symbols.end()); }

}  // namespace xgrad::data
