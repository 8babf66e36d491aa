// One benchmarked training step (forward, cross-entropy, backward, AdamW) and its timing.
#pragma once

#include <cstdint>
#include <memory>

#include "bench/bench_configs.h"
#include "nn/model.h"
#include "nn/optim.h"

namespace xgrad::bench {

/// This thread's CPU time in milliseconds (CLOCK_THREAD_CPUTIME_ID): less sensitive to other processes than wall time.
double thread_cpu_ms();

/// A model of one benchmarked size with its AdamW (lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01),
/// trained on random tokens and targets drawn from xgrad::Generator (batch i is a function of (seed, i)).
class StepRunner {
 public:
  StepRunner(const BenchConfig& config, std::uint64_t seed);
  struct Time {
    double wall_ms, cpu_ms;  // cpu_ms: this thread's CPU time, less sensitive to other processes than wall time
  };
  /// Runs training step `index` and returns its time: the forward pass and cross_entropy (nn::loss_at_targets, or
  /// the full readout: BenchConfig::full_readout), zero_grad, backward (which frees the graph), AdamW step,
  /// loss.item(). Drawing the batch is not timed.
  Time step(std::size_t index);
  double last_loss() const { return last_loss_; }

 private:
  BenchConfig config_;
  std::uint64_t seed_;
  nn::AttentionModel model_;
  nn::AdamW optimizer_;
  double last_loss_ = 0;
};

struct StepTiming {
  double median_ms = 0, min_ms = 0, gflops = 0, peak_rss_mib = 0;
  double median_cpu_ms = 0;  // median of the thread CPU time per step
  std::size_t steps = 0;
  double counted_gflop = 0;      // sgemm GFLOP per step, every call of the timed steps counted (blas::gemm_counts)
  std::vector<GemmShape> gemms;  // those calls' shapes, per step
};

/// `warmup` untimed steps, then `steps` timed ones with their sgemm calls counted; GFLOP/s is step_flops (the
/// estimate) over the median step time.
StepTiming time_training_steps(const BenchConfig& config, std::size_t warmup, std::size_t steps,
                               std::uint64_t seed = 1);

/// The median of `values` (the mean of the two middle ones for an even count); 0 for none.
double median(std::vector<double> values);

}  // namespace xgrad::bench
