#include "bench/sgemm_floor.h"

#include <algorithm>
#include <chrono>
#include <ctime>

#include "autograd/blas.h"
#include "autograd/random.h"
#include "bench/step_timing.h"

namespace xgrad::bench {

namespace {
std::vector<float> random_floats(std::size_t n, Generator& gen) {
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(gen.normal());
  return v;
}

struct Time {
  double wall_ms, cpu_ms;
};

// All `count` products of one shape, each on its own matrices laid out one after another (as a batched matmul
// reads them).
Time time_shape(const GemmShape& g, Generator& gen) {
  const std::size_t a_size = g.m * g.k, b_size = g.k * g.n, c_size = g.m * g.n;
  const std::vector<float> a = random_floats(a_size * g.count, gen), b = random_floats(b_size * g.count, gen);
  std::vector<float> c(c_size * g.count);
  const std::size_t lda = g.trans_a ? g.m : g.k, ldb = g.trans_b ? g.k : g.n;
  const double cpu0 = thread_cpu_ms();
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < g.count; ++i)
    blas::gemm<float>(g.trans_a, g.trans_b, g.m, g.n, g.k, 1.0f, a.data() + i * a_size, lda, b.data() + i * b_size, ldb,
                      0.0f, c.data() + i * c_size, g.n);
  const double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return {wall, thread_cpu_ms() - cpu0};
}
}  // namespace

double SgemmFloor::peak_gflops() const {
  double best = 0;
  for (const auto& g : gemms) best = std::max(best, g.gflops());
  return best;
}

SgemmFloor measure_sgemm_floor(const BenchConfig& config, std::size_t rounds) {
  const auto shapes = step_gemms(model_config(config), config.batch, config.seq_len);
  Generator gen(7, /*stream=*/0x7367656d6d /* "sgemm" */);
  std::vector<std::vector<double>> ms(shapes.size()), cpu_ms(shapes.size());
  time_shape(shapes.front(), gen);  // warm-up: BLAS buffers, page faults
  for (std::size_t r = 0; r < rounds; ++r)
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const Time t = time_shape(shapes[i], gen);
      ms[i].push_back(t.wall_ms);
      cpu_ms[i].push_back(t.cpu_ms);
    }
  SgemmFloor floor;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    GemmTiming t{shapes[i], median(ms[i]), median(cpu_ms[i])};
    floor.total_ms += t.ms;
    floor.total_cpu_ms += t.cpu_ms;
    floor.total_flops += shapes[i].flops();
    floor.gemms.push_back(t);
  }
  return floor;
}

}  // namespace xgrad::bench
