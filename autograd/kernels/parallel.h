// Threads for xgrad's own loops (element-wise ops, row-wise norms and softmax, the fused attention kernel, the
// optimizers), on a small pool of persistent threads (parallel.cpp says why not OpenMP). Separate from the BLAS
// thread count (autograd/blas.h); xgrad::platform::set_threads sets both. The default is one thread: nothing is
// spawned, every loop runs exactly as a plain serial loop.
//
// Determinism: xgrad's loops on parallel_for compute each output element in one call of the body, in the serial
// order, or (kernels::for_each_row_block) sum fixed blocks of rows and add the blocks in order. Their results are
// therefore bit-identical for any thread count. Matrix products split over the threads are not: blas::gemm's parts
// (OpenBLAS sums a part of C in another order than the whole) and matmul's gradients in row blocks, one per thread
// (a weight's gradient summed per block). They match one thread to rounding, and a run on the same thread count
// repeats bit for bit (tests/test_threads.cpp checks both).
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>

namespace xgrad {

/// Sets how many threads xgrad's own loops use (throws xgrad::Error if n < 1). Process-wide; default 1.
void set_num_threads(int n);
/// Threads xgrad's own loops use.
int num_threads();

/// Work (in element-operations, roughly one float read, computed and written) below which a loop stays on the
/// calling thread: handing work to a second thread costs a few microseconds, about as long as 16k cheap updates.
constexpr std::size_t kParallelMinWork = 16384;

/// grain for parallel_for when one index costs `work_per_index` element-operations: enough indices per chunk to
/// reach kParallelMinWork, rounded up to a multiple of `align` (>= 1).
inline std::size_t grain_for(std::size_t work_per_index, std::size_t align = 1) {
  const std::size_t per = std::max<std::size_t>(work_per_index, 1);
  const std::size_t g = std::max<std::size_t>((kParallelMinWork + per - 1) / per, 1);
  return (g + align - 1) / align * align;
}

namespace detail {
using range_fn = void (*)(void* context, std::size_t lo, std::size_t hi);
/// Runs fn(context, lo, hi) on `threads` threads over [begin, end) split at multiples of `grain` from `begin`.
void run_parallel(std::size_t begin, std::size_t end, std::size_t grain, std::size_t chunks, int threads, range_fn fn,
                  void* context);
/// True inside a parallel region (nested parallel_for calls run serially).
bool in_parallel();
}  // namespace detail

/// Calls fn(lo, hi) on disjoint sub-ranges covering [begin, end), on up to num_threads() threads. Sub-ranges start
/// at begin + k * grain (so a grain that is a multiple of a SIMD width keeps every vector where the serial loop has
/// it); each thread gets one contiguous run of them. Runs fn(begin, end) on the calling thread when one thread is
/// set, the range holds fewer than two grains, or we are already inside a parallel region. Worker threads get the
/// caller's floating-point control (flush-to-zero, denormals-are-zero, rounding). fn must not throw: validate
/// before the loop.
template <class F>
void parallel_for(std::size_t begin, std::size_t end, std::size_t grain, F&& fn) {
  if (begin >= end) return;
  grain = std::max<std::size_t>(grain, 1);
  const int threads = num_threads();
  if (threads <= 1 || end - begin < 2 * grain || detail::in_parallel()) {
    fn(begin, end);
    return;
  }
  const std::size_t chunks = (end - begin + grain - 1) / grain;
  const int used = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(threads), chunks));
  using Fn = std::remove_reference_t<F>;
  detail::run_parallel(
      begin, end, grain, chunks, used,
      [](void* context, std::size_t lo, std::size_t hi) { (*static_cast<Fn*>(context))(lo, hi); },
      const_cast<void*>(static_cast<const void*>(&fn)));
}

}  // namespace xgrad
