// The one place xgrad calls BLAS. Row-major GEMM for float (cblas directly) and double (through xtensor-blas), and
// what OpenBLAS says of itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace xgrad::blas {

/// C = alpha * op(A) @ op(B) + beta * C, row-major; op(X) = X^T when trans_x. op(A) is [m, k], op(B) [k, n],
/// C [m, n]; lda/ldb/ldc are the row strides of the stored matrices. float: calls cblas_sgemm (the fast path), or,
/// where this CPU has AVX-512 and OpenBLAS runs narrower kernels, xgrad's own kernel (simd::small_gemm) for a product
/// whose op(B) holds at most 2^20 floats (own_kernel_active); a
/// product of at least 2^18 multiply-adds, called outside a parallel region with xgrad's threads > 1
/// (xgrad::set_num_threads), is split into rows (or, when n > m, columns) of C, one cblas_sgemm per thread: BLAS
/// itself runs on one thread (platform::set_threads), so that one pool of threads does all the work. The parts
/// match one call to rounding (OpenBLAS's order of a sum depends on the shape), not bit for bit. double:
/// gemm_reference.
template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a, std::size_t lda,
          const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc);

/// gemm<double> for m, n, k > 0, through xtensor-blas (xt::blas::gemm, which xt::linalg::dot runs on): the float64
/// reference the float32 path is checked against.
void gemm_reference(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha,
                    const double* a, std::size_t lda, const double* b, std::size_t ldb, double beta, double* c,
                    std::size_t ldc);

/// A tally of gemm<float> calls, for benchmarks that count the FLOPs a step performs instead of estimating them.
/// Off by default: gemm<float> then pays one relaxed atomic load. On, each call adds to a lock-free table of
/// shapes (safe from the thread pool's workers). Empty calls (m, n or k of 0) are not BLAS calls and not counted.
struct GemmCount {
  bool trans_a = false, trans_b = false;
  std::size_t m = 0, n = 0, k = 0;
  std::uint64_t calls = 0;
  double flops() const {  // 2 m n k per call: one multiply and one add per term of every dot product
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(calls);
  }
};
/// Starts (true) or pauses (false) counting; the tally is kept across pauses.
void set_gemm_counting(bool on);
bool gemm_counting();
/// Clears the tally.
void reset_gemm_counts();
/// Adds one product of op(A) [m, k] by op(B) [k, n] computed outside gemm<float> (simd::small_gemm) to the tally, as
/// the gemm call it stands for, when counting is on.
void count_product(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k);
/// Calls counted since the last reset, one entry per shape (transposes, m, n, k), in no particular order. Shapes
/// with m, n or k >= 2^20 are not stored by shape: they add to one entry with m = n = k = 0, calls = their
/// count, and flops_of_unshaped_gemms() their FLOPs.
std::vector<GemmCount> gemm_counts();
double flops_of_unshaped_gemms();
/// The sum of flops() over gemm_counts(), plus flops_of_unshaped_gemms().
double counted_gemm_flops();

/// Allows (true, the default) or forbids xgrad's own kernel in gemm<float>: off, every product goes to BLAS (the
/// bench's sgemm floor is BLAS's rate). Returns the setting it replaces.
bool set_own_kernel(bool on);
/// Whether gemm<float> runs xgrad's own kernel for the products it fits: allowed, and this CPU has AVX-512 while
/// OpenBLAS's kernel family (core_name()) is not an AVX-512 one (SkylakeX, Cooperlake, SapphireRapids).
bool own_kernel_active();

/// The OpenBLAS kernel family in use (openblas_get_corename(), e.g. "SkylakeX", "Haswell", "Prescott").
std::string core_name();
/// Whether `core` (a core_name(), any case) is one of OpenBLAS's AVX-512 kernel families: SkylakeX, Cooperlake,
/// SapphireRapids.
bool is_avx512_core(const std::string& core);
/// BLAS threads in use.
int num_threads();
/// Sets the BLAS thread count (openblas_set_num_threads).
void set_num_threads(int n);

/// Runs first() and second(), two independent pieces of work that call gemm, at once on two of xgrad's threads
/// (autograd/kernels/parallel.h), with BLAS on one thread meanwhile: two products side by side (a matmul's two
/// gradients) finish sooner than each split over two threads in turn, which packs each operand twice. Runs them in
/// turn on the calling thread when xgrad has one thread or is already in a parallel region. Neither may throw.
void side_by_side(const std::function<void()>& first, const std::function<void()>& second);

}  // namespace xgrad::blas
