// The task interface: a source of token batches, each a pure function of (data seed, batch index, split).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

#include "data/input_file.h"

namespace xgrad::data {

/// Thrown for invalid task settings and unreadable task inputs; the message starts with the task name and names
/// the setting (or file) and the allowed values.
class TaskError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// One batch of sequences. inputs: [B, T] token ids in [0, vocab_size), or [B, T, S]: S token ids per position,
/// whose embeddings the model adds (kv_recall's sum encoding). targets: [B, T] class ids in [0, vocab_size), or -1
/// where the position carries no loss.
struct Batch {
  xt::xarray<std::int64_t> inputs;
  xt::xarray<std::int64_t> targets;
};

/// A batch for a task to fill: inputs [batch_size, T] (uninitialised), targets [batch_size, T] all -1 (no loss), for
/// tasks whose loss is taken at a few positions.
inline Batch blank_batch(std::size_t batch_size, std::size_t T) {
  Batch b;
  b.inputs = xt::xarray<std::int64_t>::from_shape({batch_size, T});
  b.targets = xt::xarray<std::int64_t>::from_shape({batch_size, T});
  b.targets.fill(-1);
  return b;
}

/// Which data a batch comes from. Synthetic tasks draw eval batches from their own generator stream (fresh draws
/// from the same distribution, so not guaranteed disjoint from training sequences when the task's sequence space is
/// small); file-backed tasks hold out a part of the file.
enum class Split { train, eval };

/// The generator stream of `split` for a task whose train stream is `task_stream`: eval gets a different stream, so
/// eval batch i is never a copy of train batch i.
inline std::uint64_t split_stream(std::uint64_t task_stream, Split split) {
  return split == Split::train ? task_stream : task_stream ^ 0x8000000000000000ull;
}

class Task {
 public:
  virtual ~Task() = default;
  virtual std::string name() const = 0;
  /// Number of distinct token ids (also the number of output classes).
  virtual std::size_t vocab_size() const = 0;
  /// Tokens per sequence, T.
  virtual std::size_t seq_len() const = 0;
  /// Loss in nats of a model that spreads its probability uniformly over the possible answers.
  virtual double chance_loss() const = 0;
  /// At most how many positions of a sequence carry a target (not -1). The readout runs at those only
  /// (nn::loss_at_targets), so the memory estimate sizes the logits by it. Default: every position.
  virtual std::size_t targets_per_sequence() const { return seq_len(); }
  /// Bytes of data the task holds in memory for the whole run (a file's contents, token arrays); 0 for tasks that
  /// generate their sequences. The memory estimate counts them.
  virtual std::size_t data_bytes() const { return 0; }
  /// The files the task read, with their size and content hash, in a fixed order; empty for generated tasks.
  /// config.json records them, and a resumed run must read the same bytes.
  virtual std::vector<InputFile> input_files() const { return {}; }
  /// For a model trained on `trained` (this task at another length: --eval-seq-len, --eval-n-pairs) and evaluated on
  /// this task: for each of this task's seq_len() positions, the position of `trained` whose learned positional
  /// embedding it takes, each in [0, trained.seq_len()). The model has no embedding for positions it never saw; a
  /// task maps each position to a trained one of the same role. Default: the positions the trained sequence has
  /// keep theirs, later ones repeat them from the start (t mod trained.seq_len()).
  virtual std::vector<std::size_t> trained_positions(const Task& trained) const {
    std::vector<std::size_t> out(seq_len());
    for (std::size_t t = 0; t < out.size(); ++t) out[t] = t % trained.seq_len();
    return out;
  }
  /// For analysis (`xgrad explain`): for each query position of `batch`, the position of the key whose content the
  /// target there needs ([batch_size, seq_len()], -1 at positions without a target or whose answer is not at one
  /// key), so that attention can be seen looking where the answer is or not. Default: empty (the task names no such
  /// key). `batch` must come from this task's batch().
  virtual xt::xarray<std::int64_t> answer_positions(const Batch& batch) const {
    (void)batch;
    return {};
  }
  /// Batch number `index` of the stream named by `seed` in `split`: the same arguments always give the same batch,
  /// so runs that differ only in model settings see the same data, and a resumed run sees what an uninterrupted one
  /// saw. inputs and targets are [batch_size, seq_len()].
  Batch batch(std::uint64_t seed, std::uint64_t index, std::size_t batch_size, Split split = Split::train) const {
    return make_batch(seed, index, batch_size, split);
  }

 protected:
  // Non-virtual batch() over a virtual make_batch(): the default argument lives in one place, and a subclass's
  // override cannot hide or change it.
  virtual Batch make_batch(std::uint64_t seed, std::uint64_t index, std::size_t batch_size, Split split) const = 0;
};

}  // namespace xgrad::data
