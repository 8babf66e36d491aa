#include "bench/step_timing.h"

#include <algorithm>
#include <chrono>
#include <ctime>

#include "autograd/blas.h"
#include "autograd/ops.h"
#include "bench/process_memory.h"
#include "bench/sgemm_floor.h"

namespace xgrad::bench {

StepRunner::StepRunner(const BenchConfig& config, std::uint64_t seed)
    : config_(config),
      seed_(seed),
      model_(model_config(config), seed),
      optimizer_(model_.parameters(), 1e-3, 0.9, 0.999, 1e-8, 0.01) {}

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

StepRunner::Time StepRunner::step(std::size_t index) {
  const std::size_t vocab = model_config(config_).vocab_size;
  Generator gen(seed_, /*stream=*/0x62656e6368 /* "bench" */, index);
  index_array tokens = index_array::from_shape({config_.batch, config_.seq_len});
  index_array targets = index_array::from_shape({config_.batch, config_.seq_len});
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens.data()[i] = static_cast<std::int64_t>(gen.uniform(vocab));
  for (std::size_t i = 0; i < targets.size(); ++i) targets.data()[i] = static_cast<std::int64_t>(gen.uniform(vocab));
  if (config_.targets == "last")
    for (std::size_t i = 0; i < targets.size(); ++i)
      if (i % config_.seq_len + 1 != config_.seq_len) targets.data()[i] = -1;

  const double cpu0 = thread_cpu_ms();
  const auto t0 = std::chrono::steady_clock::now();
  Tensor loss = config_.full_readout ? cross_entropy(model_.forward(tokens), targets)
                                     : nn::loss_at_targets(model_, tokens, targets).loss;
  optimizer_.zero_grad();
  loss.backward();
  optimizer_.step();
  last_loss_ = loss.item();
  const double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return {wall, thread_cpu_ms() - cpu0};
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

StepTiming time_training_steps(const BenchConfig& config, std::size_t warmup, std::size_t steps, std::uint64_t seed) {
  reset_peak_rss();
  StepRunner runner(config, seed);
  for (std::size_t i = 0; i < warmup; ++i) runner.step(i);
  std::vector<double> ms, cpu_ms;
  blas::reset_gemm_counts();
  blas::set_gemm_counting(true);
  for (std::size_t i = 0; i < steps; ++i) {
    const auto time = runner.step(warmup + i);
    ms.push_back(time.wall_ms);
    cpu_ms.push_back(time.cpu_ms);
  }
  blas::set_gemm_counting(false);
  StepTiming t;
  t.counted_gflop = steps ? blas::counted_gemm_flops() / static_cast<double>(steps) / 1e9 : 0;
  t.gemms = per_step_shapes(blas::gemm_counts(), steps);
  t.steps = steps;
  t.median_ms = median(ms);
  t.median_cpu_ms = median(cpu_ms);
  t.min_ms = ms.empty() ? 0 : *std::min_element(ms.begin(), ms.end());
  const auto mc = model_config(config);
  t.gflops = t.median_ms > 0 ? step_flops(mc, config.batch, config.seq_len) / (t.median_ms * 1e6) : 0;
  t.peak_rss_mib = peak_rss_mib();
  return t;
}

}  // namespace xgrad::bench
