// Data-parallel training over platform/distributed.h: each of P processes ("ranks") computes the gradient of its
// rows of the global batch, and the gradients are summed so that every rank applies the update one process would.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <xtensor/xarray.hpp>

#include "data/task.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "train/config.h"
#include "train/run_checkpoint.h"

namespace xgrad::train {

using NamedParameters = std::vector<std::pair<std::string, Tensor>>;

/// The rows [begin, end) of a batch (inputs and targets [B, T] → [end - begin, T]). Throws std::out_of_range if
/// end > B or begin > end.
data::Batch batch_rows(const data::Batch& batch, std::size_t begin, std::size_t end);

/// The positions that carry a target (target >= 0) in targets [B, T].
std::size_t count_targets(const xt::xarray<std::int64_t>& targets);

/// The rows of the global batch that rank `rank` of `world_size` computes: [rank·B/P, (rank+1)·B/P). B must be
/// divisible by P (TrainConfig checks --batch-size against the number of ranks).
std::pair<std::size_t, std::size_t> shard_rows(std::size_t batch_size, int rank, int world_size);

/// What the ranks' shards add up to in one step.
struct ReducedStep {
  double loss = 0;     // sum over ranks of (shard loss × shard targets / global targets): the global mean loss
  double z_loss = 0;   // the same for the z-loss (mean (log Z)^2 over the targets)
  double hits = 0;     // target positions whose arg-max logit is the target, over the global batch
  bool stop = false;   // some rank was asked to stop (SIGINT/SIGTERM/SIGHUP)
  double seconds = 0;  // time spent in the allreduce (including waiting for the slowest rank)
};

/// One MPI_Allreduce over one flat float buffer: every parameter's gradient (named order, each multiplied by
/// `weight` = shard targets / global targets, so the sum is the gradient of the global mean loss), then the weighted
/// loss, the weighted z-loss, the hits and the stop request. Writes the summed gradients back into the parameters that
/// have one. `buffer` is reused between steps. A collective: every rank calls it once per step.
ReducedStep allreduce_gradients(const NamedParameters& named, double weight, double weighted_loss,
                                double weighted_z_loss, double hits, bool stop, std::vector<float>& buffer);

/// Replaces each attention layer's record of this step (scores [b, H, T, T] with their gradient, probs; b = this
/// rank's rows, starting at row `begin` of the global batch of `batch_size` rows) by the record of the global batch,
/// the gradient multiplied by `weight` as allreduce_gradients does, so that attention statistics are those of a
/// one-process run. q and k are dropped. A collective (one allreduce per layer).
void gather_attention_records(nn::AttentionModel& model, std::size_t begin, std::size_t batch_size, double weight);

/// A 64-bit hash of every parameter's bytes, for each rank (index = rank). A collective.
std::vector<std::uint64_t> parameter_checksums(const NamedParameters& named);

/// Throws std::runtime_error naming `step` and the first rank whose checksum differs from rank 0's.
void check_same_parameters(const std::vector<std::uint64_t>& checksums, const std::string& where);

/// Makes every rank start from rank 0's state: the parameters, the optimizer's buffers and step count, and the
/// progress counters that decide what later steps do (step, skipped and consecutive skipped steps). Before that,
/// checks that every rank trains the same configuration (a hash of config.to_json() and the number of parameter
/// elements; std::runtime_error naming the rank otherwise). A collective; does nothing with one process.
void broadcast_from_root(const TrainConfig& config, nn::AttentionModel& model, nn::Optimizer& optimizer,
                         RunProgress& progress);

}  // namespace xgrad::train
