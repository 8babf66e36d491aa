// The task interface: a source of token batches, each a pure function of (data seed, batch index).
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

namespace xgrad::data {

/// Thrown for invalid task settings; the message names the setting and the allowed values.
class TaskError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// One batch of sequences. inputs: [B, T] token ids in [0, vocab_size). targets: [B, T] class ids in
/// [0, vocab_size), or -1 where the position carries no loss.
struct Batch {
  xt::xarray<std::int64_t> inputs;
  xt::xarray<std::int64_t> targets;
};

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
  /// Batch number `index` of the stream named by `seed`: the same arguments always give the same batch, so runs
  /// that differ only in model settings see the same data, and a resumed run sees what an uninterrupted one saw.
  virtual Batch batch(std::uint64_t seed, std::uint64_t index, std::size_t batch_size) const = 0;
};

}  // namespace xgrad::data
