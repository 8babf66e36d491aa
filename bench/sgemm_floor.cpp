#include "bench/sgemm_floor.h"

#include <chrono>

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

// All `count` products of one shape, each on its own matrices laid out one after another (as a batched matmul
// reads them).
double time_shape_ms(const GemmShape& g, Generator& gen) {
  const std::size_t a_size = g.m * g.k, b_size = g.k * g.n, c_size = g.m * g.n;
  const std::vector<float> a = random_floats(a_size * g.count, gen), b = random_floats(b_size * g.count, gen);
  std::vector<float> c(c_size * g.count);
  const std::size_t lda = g.trans_a ? g.m : g.k, ldb = g.trans_b ? g.k : g.n;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < g.count; ++i)
    blas::gemm<float>(g.trans_a, g.trans_b, g.m, g.n, g.k, 1.0f, a.data() + i * a_size, lda, b.data() + i * b_size,
                      ldb, 0.0f, c.data() + i * c_size, g.n);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

SgemmFloor measure_sgemm_floor(const BenchConfig& config, std::size_t rounds) {
  const auto shapes = step_gemms(model_config(config), config.batch, config.seq_len);
  Generator gen(7, /*stream=*/0x7367656d6d /* "sgemm" */);
  std::vector<std::vector<double>> ms(shapes.size());
  time_shape_ms(shapes.front(), gen);  // warm-up: BLAS buffers, page faults
  for (std::size_t r = 0; r < rounds; ++r)
    for (std::size_t i = 0; i < shapes.size(); ++i) ms[i].push_back(time_shape_ms(shapes[i], gen));
  SgemmFloor floor;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    GemmTiming t{shapes[i], median(ms[i])};
    floor.total_ms += t.ms;
    floor.total_flops += shapes[i].flops();
    floor.gemms.push_back(t);
  }
  return floor;
}

}  // namespace xgrad::bench
