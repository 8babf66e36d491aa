// The floor of a training step: the time its GEMMs alone take in OpenBLAS on one thread (and, beside it, in what
// gemm<float> runs: xgrad's own kernel where it runs).
#pragma once

#include <string>
#include <vector>

#include "autograd/blas.h"
#include "bench/bench_configs.h"

namespace xgrad::bench {

struct GemmTiming {
  GemmShape shape;
  double ms = 0, cpu_ms = 0;  // fastest round's wall and thread CPU time of all `count` calls of this shape
  double gflops() const { return ms > 0 ? shape.flops() / (ms * 1e6) : 0; }
};

struct SgemmFloor {
  std::vector<GemmTiming> gemms;
  double total_ms = 0, total_cpu_ms = 0;  // sums over gemms: the step's time if it did nothing but its GEMMs
  double total_flops = 0;
  double gflops() const { return total_ms > 0 ? total_flops / (total_ms * 1e6) : 0; }
  /// The best rate of a single shape (the largest GEMMs), for reference.
  double peak_gflops() const;
};

/// Times every GEMM of one training step of `config` (step_gemms) through xgrad::blas::gemm<float>, on the BLAS
/// threads currently set, on random data in cache (each shape's operands warmed by one call first); each shape's
/// time is the fastest of `rounds` runs. With `own_kernel` false (the floor) every product goes to OpenBLAS; true
/// times what gemm<float> runs (xgrad's own kernel where blas::own_kernel_active()).
SgemmFloor measure_sgemm_floor(const BenchConfig& config, std::size_t rounds = 7, bool own_kernel = false);
/// The same for given shapes (each `count` calls).
SgemmFloor measure_gemm_shapes(const std::vector<GemmShape>& shapes, std::size_t rounds = 7, bool own_kernel = false);

/// The shapes of one step from a tally of `steps` steps (blas::gemm_counts()): calls / steps each, rounded; the
/// unshaped entry (dimensions >= 2^20) is left out.
std::vector<GemmShape> per_step_shapes(const std::vector<blas::GemmCount>& counts, std::size_t steps);
/// The same from the CSV `xgrad train` writes under XGRAD_SGEMM_COUNT=FILE (steps,trans_a,trans_b,m,n,k,calls).
/// Throws std::runtime_error for a file it cannot read or a malformed line.
std::vector<GemmShape> read_gemm_counts(const std::string& path);

}  // namespace xgrad::bench
