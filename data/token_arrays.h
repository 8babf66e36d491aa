// The `data` task: user-supplied token arrays (.npy files), read in order.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "data/npy.h"
#include "data/registry.h"
#include "data/task.h"

namespace xgrad::data {

struct TokenArraysConfig {
  std::string dir;             // holds inputs.npy and targets.npy; optionally eval_inputs.npy and eval_targets.npy
  std::size_t vocab_size = 0;  // 0: the largest token id in the files + 1
  bool shuffle = false;        // a fresh seeded permutation of the rows in every epoch
};

/// The arrays of one split: inputs and targets, both [N, T].
struct TokenArraysSplit {
  NpyArray inputs, targets;
};

/// Trains on the rows of DIR/inputs.npy and DIR/targets.npy: int32 or int64 arrays of shape [N, T] (any N >= 1,
/// 1 <= T <= 65536), held in memory in their own element type (each file read once, in bulk). inputs hold token ids in
/// [0, vocab_size); targets hold class ids in [0, vocab_size), or -1 where the position carries no loss (at least one
/// target must not be -1). Training batch i holds rows i*B .. (i+1)*B - 1, taken modulo N (so epochs follow each other
/// seamlessly and a batch may straddle two). With shuffle, position p of that sequence reads row perm_e[p mod N] of
/// epoch e = floor(p / N), where perm_e is a permutation drawn from (seed, e) by Fisher-Yates: still a pure function of
/// (seed, i). Without shuffle the seed is not used. The optional held-out split DIR/eval_inputs.npy +
/// DIR/eval_targets.npy (same T) is read the same way, never shuffled; has_eval_split() says whether it is there.
/// vocab_size = the largest id in any of the files
/// + 1 unless given. Chance loss: ln(vocab_size).
class TokenArrays : public Task {
 public:
  /// Reads the files. Throws TaskError naming the file (and for a bad id, its row and position) when a file is
  /// missing or malformed (see parse_npy), a shape is not [N, T], inputs and targets differ in shape, the splits
  /// differ in T, an id is out of range or above a given vocab_size, or no target is set.
  explicit TokenArrays(TokenArraysConfig config);
  /// The same checks on arrays already in memory (`eval` may be empty: both arrays without a shape); `source`
  /// names them in messages.
  TokenArrays(TokenArraysConfig config, TokenArraysSplit train, TokenArraysSplit eval, const std::string& source);
  /// What the task of `config` will hold, from the headers of its files alone (TaskEntry::plan): the arrays' bytes
  /// (and the shuffle permutation's), and T. Throws TaskError naming the file for a missing or malformed file, a
  /// shape that is not [N, T], or T outside [1, kMaxSeqLen].
  static TaskPlan plan(const TokenArraysConfig& config);
  std::string name() const override { return "data"; }
  std::size_t vocab_size() const override { return vocab_size_; }
  std::size_t seq_len() const override { return seq_len_; }
  double chance_loss() const override;
  std::size_t data_bytes() const override;
  std::vector<InputFile> input_files() const override { return files_; }
  bool has_eval_split() const { return !eval_.inputs.shape.empty(); }
  /// N of the training split.
  std::size_t rows() const { return train_.inputs.shape[0]; }

 private:
  Batch make_batch(std::uint64_t seed, std::uint64_t index, std::size_t batch_size, Split split) const override;
  // Row `r` of epoch `epoch` under shuffling.
  std::size_t shuffled_row(std::uint64_t seed, std::uint64_t epoch, std::size_t r) const;
  void check(const std::string& source);

  TokenArraysConfig config_;
  TokenArraysSplit train_, eval_;
  std::vector<InputFile> files_;  // in the order read: inputs, targets, eval_inputs, eval_targets
  std::size_t vocab_size_ = 0, seq_len_ = 0;
  // The permutation of the last epoch asked for: batches come in order, so it is reused until the epoch ends.
  mutable std::mutex cache_mutex_;
  mutable std::uint64_t cached_seed_ = 0, cached_epoch_ = 0;
  mutable bool cache_valid_ = false;
  mutable std::vector<std::size_t> permutation_;
};

}  // namespace xgrad::data
