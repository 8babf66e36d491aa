#include "bench/sgemm_floor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>

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

// All `count` products of one shape, on one set of operands that the first call has brought into the caches: the
// rate the machine allows at that shape. (Each product on its own matrices, as a batched matmul reads them, also
// timed the memory traffic and moved with the machine's load: 74 to 92 GFLOP/s between two runs a minute apart.)
Time time_shape(const GemmShape& g, Generator& gen, bool own_kernel) {
  const std::vector<float> a = random_floats(g.m * g.k, gen), b = random_floats(g.k * g.n, gen);
  std::vector<float> c(g.m * g.n);
  const std::size_t lda = g.trans_a ? g.m : g.k, ldb = g.trans_b ? g.k : g.n;
  auto product = [&] {
    blas::gemm<float>(g.trans_a, g.trans_b, g.m, g.n, g.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), g.n);
  };
  const bool own = blas::set_own_kernel(own_kernel);  // off: the machine's sgemm, OpenBLAS's rate
  product();                                          // warm: operands in cache, BLAS buffers allocated
  const double cpu0 = thread_cpu_ms();
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < g.count; ++i) product();
  const double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = thread_cpu_ms() - cpu0;
  blas::set_own_kernel(own);
  return {wall, cpu};
}
}  // namespace

double SgemmFloor::peak_gflops() const {
  double best = 0;
  for (const auto& g : gemms) best = std::max(best, g.gflops());
  return best;
}

SgemmFloor measure_sgemm_floor(const BenchConfig& config, std::size_t rounds, bool own_kernel) {
  return measure_gemm_shapes(step_gemms(model_config(config), config.batch, config.seq_len), rounds, own_kernel);
}

SgemmFloor measure_gemm_shapes(const std::vector<GemmShape>& shapes, std::size_t rounds, bool own_kernel) {
  if (shapes.empty()) return {};
  Generator gen(7, /*stream=*/0x7367656d6d /* "sgemm" */);
  std::vector<std::vector<double>> ms(shapes.size()), cpu_ms(shapes.size());
  time_shape(shapes.front(), gen, own_kernel);  // warm-up: BLAS buffers, page faults
  for (std::size_t r = 0; r < rounds; ++r)
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const Time t = time_shape(shapes[i], gen, own_kernel);
      ms[i].push_back(t.wall_ms);
      cpu_ms[i].push_back(t.cpu_ms);
    }
  SgemmFloor floor;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    // The fastest round (its wall and CPU time): the floor is what the machine allows, and a slower round is other
    // work's interference.
    const auto fastest = static_cast<std::size_t>(std::min_element(ms[i].begin(), ms[i].end()) - ms[i].begin());
    GemmTiming t{shapes[i], ms[i][fastest], cpu_ms[i][fastest]};
    floor.total_ms += t.ms;
    floor.total_cpu_ms += t.cpu_ms;
    floor.total_flops += shapes[i].flops();
    floor.gemms.push_back(t);
  }
  return floor;
}

std::vector<GemmShape> per_step_shapes(const std::vector<blas::GemmCount>& counts, std::size_t steps) {
  std::vector<GemmShape> shapes;
  for (const blas::GemmCount& g : counts) {
    const auto per_step = static_cast<std::size_t>(
        std::llround(static_cast<double>(g.calls) / static_cast<double>(std::max<std::size_t>(steps, 1))));
    if (g.m > 0 && per_step > 0) shapes.push_back({g.trans_a, g.trans_b, g.m, g.n, g.k, per_step});
  }
  return shapes;
}

std::vector<GemmShape> read_gemm_counts(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || line != "steps,trans_a,trans_b,m,n,k,calls")
    throw std::runtime_error(path + ": not a sgemm count (XGRAD_SGEMM_COUNT) file");
  std::vector<blas::GemmCount> counts;
  std::size_t steps = 0;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    blas::GemmCount g;
    char c[6];
    if (!(fields >> steps >> c[0] >> g.trans_a >> c[1] >> g.trans_b >> c[2] >> g.m >> c[3] >> g.n >> c[4] >> g.k >>
          c[5] >> g.calls))
      throw std::runtime_error(path + ": malformed line '" + line + "'");
    counts.push_back(g);
  }
  return per_step_shapes(counts, steps);
}

}  // namespace xgrad::bench
