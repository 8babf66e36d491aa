// The floor of a whole sweep: its GEMM FLOPs over the measured single-thread sgemm rate times the
// cores it used, next to its wall time.
#pragma once

#include <map>
#include <string>

#include "bench/bench_configs.h"

namespace xgrad::bench {

/// What a sweep directory (the `--out` of `xgrad sweep` / `xgrad experiment`) asked the machine to compute.
struct SweepWork {
  std::size_t runs = 0;
  double flops = 0;        // GEMM FLOPs of every training step of every run (step_flops of what the loss
                           // needs x steps)
  double run_seconds = 0;  // sum of the runs' own wall times (sweep.json "seconds")
  std::map<std::string, double> flops_by_shape;  // per model shape "d_model,n_heads,d_k,batch,seq_len,vocab"
                                                 // (a parse_shape string)
  std::map<std::string, std::size_t> steps_by_shape;
};

/// Reads DIR/sweep.json and each run's config.json (d_model, n_heads, d_k, n_layers, d_ff, mlp, batch_size, seq_len,
/// vocab_size, steps). Throws std::runtime_error naming the file when one is missing or not a sweep's.
SweepWork read_sweep_work(const std::string& dir);

}  // namespace xgrad::bench
