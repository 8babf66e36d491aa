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
TaskEntry copy_entry() {
  TaskEntry e;
  e.name = "copy";
  e.description = "copy: write the sequence out again after a separator";
  e.order = 20;
  e.settings = {seq_len_setting(), n_symbols_setting()};
  e.vocab_size_from = "--n-symbols";
  e.build = [](const SettingValues& v) -> std::unique_ptr<Task> {
    return std::make_unique<CopySequence>(symbol_sequence_config(v));
  };
  return e;
}
TaskEntry reverse_entry() {
  TaskEntry e;
  e.name = "reverse";
  e.description = "reverse: write the sequence out reversed after a separator";
  e.order = 30;
  e.settings = {seq_len_setting(), n_symbols_setting()};
  e.vocab_size_from = "--n-symbols";
  e.build = [](const SettingValues& v) -> std::unique_ptr<Task> {
    return std::make_unique<ReverseSequence>(symbol_sequence_config(v));
  };
  return e;
}
TaskEntry sort_entry() {
  TaskEntry e;
  e.name = "sort";
  e.description = "sort: write the sequence out sorted after a separator";
  e.order = 40;
  e.settings = {seq_len_setting(), n_symbols_setting()};
  e.vocab_size_from = "--n-symbols";
  e.build = [](const SettingValues& v) -> std::unique_ptr<Task> {
    return std::make_unique<SortSequence>(symbol_sequence_config(v));
  };
  return e;
}
const Registration<TaskEntry> copy_registration{copy_entry()};
const Registration<TaskEntry> reverse_registration{reverse_entry()};
const Registration<TaskEntry> sort_registration{sort_entry()};
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
