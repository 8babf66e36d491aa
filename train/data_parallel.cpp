#include "train/data_parallel.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "platform/distributed.h"

namespace xgrad::train {

namespace {

template <class T>
xt::xarray<T> rows_of(const xt::xarray<T>& a, std::size_t begin, std::size_t end) {
  auto shape = a.shape();
  if (shape.empty() || end > shape[0] || begin > end)
    throw std::out_of_range(fmt::format("batch_rows: rows [{}, {}) of {}", begin, end, shape.empty() ? 0 : shape[0]));
  const std::size_t row = shape[0] ? a.size() / shape[0] : 0;
  shape[0] = end - begin;
  xt::xarray<T> out = xt::xarray<T>::from_shape(shape);
  std::copy(a.data() + begin * row, a.data() + end * row, out.data());
  return out;
}

// `shard` [b, ...] placed at row `begin` of zeros [batch_size, ...], then summed over ranks: each rank's rows hold
// its own values and zeros elsewhere, so the sum is exact.
xt::xarray<float> gathered_rows(const xt::xarray<float>& shard, std::size_t begin, std::size_t batch_size,
                                float multiplier) {
  std::vector<std::size_t> shape(shard.shape().begin(), shard.shape().end());
  const std::size_t row = shape[0] ? shard.size() / shape[0] : 0;
  shape[0] = batch_size;
  xt::xarray<float> full = xt::zeros<float>(shape);
  float* out = full.data() + begin * row;
  for (std::size_t i = 0; i < shard.size(); ++i) out[i] = shard.data()[i] * multiplier;
  platform::allreduce_sum(full.data(), full.size());
  return full;
}

std::uint64_t hash_bytes(const void* data, std::size_t n, std::uint64_t h) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {  // FNV-1a
    h ^= bytes[i];
    h *= 1099511628211ull;
  }
  return h;
}

// One value per rank, summed from slots that only their owner fills: exact, since x + 0 = x. A 64-bit value travels
// as two 32-bit halves, each exact in a double.
std::vector<std::uint64_t> gather_u64(std::uint64_t mine) {
  const int P = platform::world_size(), r = platform::rank();
  std::vector<double> slots(2 * static_cast<std::size_t>(P), 0.0);
  slots[2 * r] = static_cast<double>(mine >> 32);
  slots[2 * r + 1] = static_cast<double>(mine & 0xffffffffull);
  platform::allreduce_sum(slots.data(), slots.size());
  std::vector<std::uint64_t> all(P);
  for (int i = 0; i < P; ++i)
    all[i] = (static_cast<std::uint64_t>(slots[2 * i]) << 32) | static_cast<std::uint64_t>(slots[2 * i + 1]);
  return all;
}

}  // namespace

data::Batch batch_rows(const data::Batch& batch, std::size_t begin, std::size_t end) {
  return data::Batch{rows_of(batch.inputs, begin, end), rows_of(batch.targets, begin, end)};
}

std::size_t count_targets(const xt::xarray<std::int64_t>& targets) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < targets.size(); ++i) n += targets.data()[i] >= 0;
  return n;
}

std::pair<std::size_t, std::size_t> shard_rows(std::size_t batch_size, int rank, int world_size) {
  const std::size_t per_rank = batch_size / static_cast<std::size_t>(world_size);
  return {per_rank * static_cast<std::size_t>(rank), per_rank * static_cast<std::size_t>(rank + 1)};
}

ReducedStep allreduce_gradients(const NamedParameters& named, double weight, double weighted_loss,
                                double weighted_z_loss, double hits, bool stop, std::vector<float>& buffer) {
  std::size_t total = 0;
  for (const auto& [name, p] : named) total += p.numel();
  buffer.resize(total + 4);
  std::size_t offset = 0;
  const auto w = static_cast<float>(weight);
  for (const auto& [name, p] : named) {
    if (p.has_grad()) {
      const float* g = p.grad().data();
      for (std::size_t i = 0; i < p.numel(); ++i) buffer[offset + i] = g[i] * w;
    } else {
      std::fill(buffer.begin() + offset, buffer.begin() + offset + p.numel(), 0.0f);
    }
    offset += p.numel();
  }
  buffer[total] = static_cast<float>(weighted_loss);
  buffer[total + 1] = static_cast<float>(hits);
  buffer[total + 2] = stop ? 1.0f : 0.0f;
  buffer[total + 3] = static_cast<float>(weighted_z_loss);
  const auto t0 = std::chrono::steady_clock::now();
  platform::allreduce_sum(buffer.data(), buffer.size());
  ReducedStep reduced;
  reduced.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  offset = 0;
  for (auto [name, p] : named) {  // a copy of the handle: the tensor itself is shared
    if (p.has_grad()) std::copy(buffer.data() + offset, buffer.data() + offset + p.numel(), p.mutable_grad().data());
    offset += p.numel();
  }
  reduced.loss = buffer[total];
  reduced.hits = buffer[total + 1];
  reduced.stop = buffer[total + 2] > 0;
  reduced.z_loss = buffer[total + 3];
  return reduced;
}

namespace {

// A record of forward_at ([B, H, Tq, T]) as [B, H, T, T]: row i goes to row query_positions[i], the rows of positions
// this rank did not compute hold `fill`. Ranks can compute different positions (the targets of their own rows), so
// each gathers the full shape; filled with -inf scores (every key masked) such a row is skipped by attention_stats,
// and it is never a target row of the rank, so the statistics are those of the computed rows.
xt::xarray<float> all_query_rows(const xt::xarray<float>& a, const std::vector<std::size_t>& query_positions,
                                 float fill) {
  if (query_positions.empty()) return a;
  const std::size_t B = a.shape(0), H = a.shape(1), Tq = a.shape(2), T = a.shape(3);
  xt::xarray<float> out = xt::xarray<float>::from_shape({B, H, T, T});
  std::fill(out.begin(), out.end(), fill);
  for (std::size_t bh = 0; bh < B * H; ++bh)
    for (std::size_t i = 0; i < Tq; ++i)
      std::copy(a.data() + (bh * Tq + i) * T, a.data() + (bh * Tq + i + 1) * T,
                out.data() + (bh * T + query_positions[i]) * T);
  return out;
}

}  // namespace

void gather_attention_records(nn::AttentionModel& model, std::size_t begin, std::size_t batch_size, double weight) {
  for (auto& layer : model.attention_layers()) {
    nn::AttentionRecord& last = layer->last;
    if (!last.scores.defined()) continue;
    const bool has_grad = last.scores.has_grad();
    const std::vector<std::size_t>& rows = last.query_positions;
    Tensor scores(gathered_rows(all_query_rows(last.scores.value(), rows, -INFINITY), begin, batch_size, 1.0f));
    if (has_grad) {
      scores.node()->grad =
          gathered_rows(all_query_rows(last.scores.grad(), rows, 0.0f), begin, batch_size, static_cast<float>(weight));
      scores.node()->has_grad = true;
    }
    xt::xarray<float> probs = gathered_rows(all_query_rows(last.probs, rows, 0.0f), begin, batch_size, 1.0f);
    std::vector<double> qk_spectral_norms = std::move(last.qk_spectral_norms);  // of the weights every rank shares
    last = nn::AttentionRecord();
    last.qk_spectral_norms = std::move(qk_spectral_norms);
    last.scores = scores;
    last.probs = std::move(probs);
  }
}

std::vector<std::uint64_t> parameter_checksums(const NamedParameters& named) {
  std::uint64_t h = 1469598103934665603ull;
  for (const auto& [name, p] : named) h = hash_bytes(p.value().data(), p.numel() * sizeof(float), h);
  return gather_u64(h);
}

void check_same_parameters(const std::vector<std::uint64_t>& checksums, const std::string& where) {
  for (std::size_t r = 1; r < checksums.size(); ++r)
    if (checksums[r] != checksums[0])
      throw std::runtime_error(fmt::format(
          "{}: the parameters of rank {} differ from rank 0's (checksum {:016x}, rank 0: {:016x}); the ranks no "
          "longer train the same model",
          where, r, checksums[r], checksums[0]));
}

void broadcast_from_root(const TrainConfig& config, nn::AttentionModel& model, nn::Optimizer& optimizer,
                         RunProgress& progress) {
  if (platform::world_size() == 1) return;
  const NamedParameters named = model.named_parameters();
  std::size_t elements = 0;
  for (const auto& [name, p] : named) elements += p.numel();
  const std::string settings = config.to_json().dump();
  const std::uint64_t mine = hash_bytes(settings.data(), settings.size(), 1469598103934665603ull) ^ elements;
  const std::vector<std::uint64_t> all = gather_u64(mine);
  if (all[platform::rank()] != all[0])
    throw std::runtime_error(fmt::format(
        "rank {} was started with other settings than rank 0 (every rank must run the same command; under --resume "
        "the run directory must be on storage every node reads)",
        platform::rank()));

  for (auto [name, p] : named) platform::broadcast(p.mutable_value().data(), p.numel());
  nn::OptimizerState state = optimizer.state();
  for (auto& [kind, arrays] : state.buffers)
    for (auto& a : arrays) platform::broadcast(a.data(), a.size());
  double counters[4] = {static_cast<double>(state.step), static_cast<double>(progress.step),
                        static_cast<double>(progress.skipped_steps), static_cast<double>(progress.consecutive_skips)};
  platform::broadcast(counters, 4);
  state.step = static_cast<std::size_t>(counters[0]);
  optimizer.load_state(state);
  progress.step = static_cast<std::size_t>(counters[1]);
  progress.skipped_steps = static_cast<std::size_t>(counters[2]);
  progress.consecutive_skips = static_cast<std::size_t>(counters[3]);
}

}  // namespace xgrad::train
