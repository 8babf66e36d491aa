// Copy, reverse, sort: read a random sequence, then write it out transformed, one symbol per step.
#pragma once

#include <cstdint>
#include <vector>

#include "data/settings.h"
#include "data/task.h"

namespace xgrad::data {

/// The layout the three tasks share. With n = seq_len / 2, symbols x1..xn drawn uniformly with replacement from
/// [0, n_symbols), and y1..yn the transformed sequence:
///
///   position  0 .. n-1      n     n+1 .. 2n-1
///   input     x1 .. xn      SEP   y1  .. y(n-1)
///   target    -1 .. -1      y1    y2  .. yn
///
/// so the inputs are the targets shifted right by one, as in next-token prediction with teacher forcing, and a causal
/// model sees x1..xn and the answer so far at every position where a loss is taken. SEP = n_symbols.
/// T = seq_len; vocabulary = n_symbols + 1; the loss is taken on the n positions n .. 2n-1.
/// Chance loss: ln(n_symbols) (SEP is never an answer). Eval batches come from their own generator stream.
class SequenceTransform : public Task {
 public:
  /// Throws TaskError unless seq_len is even and in [4, 65536], and n_symbols is in [2, 4096].
  SequenceTransform(std::string name, std::uint64_t stream, SymbolSequenceConfig config);
  std::string name() const override { return name_; }
  std::size_t vocab_size() const override { return config_.n_symbols + 1; }
  std::size_t seq_len() const override { return config_.seq_len; }
  double chance_loss() const override;
  const SymbolSequenceConfig& config() const { return config_; }

 protected:
  /// Replaces `symbols` (x1..xn) by the sequence the model must write (y1..yn).
  virtual void transform(std::vector<std::int64_t>& symbols) const = 0;

 private:
  Batch make_batch(std::uint64_t seed, std::uint64_t index, std::size_t batch_size, Split split) const override;
  std::string name_;
  std::uint64_t stream_;
  SymbolSequenceConfig config_;
};

/// "copy": y = x. One attention head solves it by looking back n positions.
class CopySequence : public SequenceTransform {
 public:
  explicit CopySequence(SymbolSequenceConfig config);

 protected:
  void transform(std::vector<std::int64_t>&) const override {}
};

/// "reverse": y1..yn = xn..x1. The head must look back a distance that shrinks by two each step.
class ReverseSequence : public SequenceTransform {
 public:
  explicit ReverseSequence(SymbolSequenceConfig config);

 protected:
  void transform(std::vector<std::int64_t>& symbols) const override;
};

/// "sort": y = x sorted ascending (repeated symbols repeat). Position does not help: the model must find, by
/// content, the smallest remaining symbol.
class SortSequence : public SequenceTransform {
 public:
  explicit SortSequence(SymbolSequenceConfig config);

 protected:
  void transform(std::vector<std::int64_t>& symbols) const override;
};

}  // namespace xgrad::data
