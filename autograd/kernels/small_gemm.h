// A matrix product whose second operand is small (up to a few MiB: op(B) is read once per block of rows of C), in
// xgrad's own SIMD code, without BLAS's blocking: row blocks of C against panels of op(B) 64 columns wide. Two uses:
// the blocks of multi-head attention (a head's [T, d_k] operands), where a per-(batch, head) product is too small for
// BLAS to reach its rate and a causal mask zeroes half of the terms, which this kernel skips; and, where the CPU has
// AVX-512 but OpenBLAS runs narrower kernels, every product of gemm<float> whose op(B) holds at most 2^20 floats
// (autograd/blas.h). Plain reference: reference::matmul (kernels/reference.h); tests/test_kernels.cpp holds the kernel
// to it.
#pragma once

#include <cstddef>

namespace xgrad::simd {

/// Which terms of a product are known to be zero, or not wanted, so that the kernel skips them. `pos` is sorted
/// ascending (a causal mask's query positions: row i of the scores may see keys 0..pos[i]).
enum class Skip {
  none,
  /// C[i][j] is wanted for j <= pos[i] only (scores Q K^T, their gradient dO V^T); C[i][j] = 0 is written past it.
  /// pos has m entries.
  c_past_pos,
  /// A is not transposed and A[i][p] = 0 for p > pos[i] (probabilities P V, their gradient dS K). pos has m entries.
  a_past_pos,
  /// A is transposed: op(A)[j][p] = A[p][j] = 0 for j > pos[p] (P^T dO, dS^T Q). pos has k entries.
  a_t_past_pos,
};

/// One product C = alpha op(A) op(B) + beta C, row-major: op(X) = X^T when trans_x; op(A) is [m, k], op(B) [k, n],
/// C [m, n]; lda, ldb, ldc are the row strides of the stored matrices. With beta = 0, C is not read (it may hold
/// anything, NaN included). Each entry is a float sum in a fixed order (no threads): the same inputs give the same
/// bits. `pack` is scratch of at least k * small_gemm_pack_width(n) floats when trans_b or n is not a multiple of 16
/// (op(B) is copied there first in rows of whole vectors), else unused.
struct SmallGemm {
  bool trans_a = false, trans_b = false;
  std::size_t m = 0, n = 0, k = 0;
  float alpha = 1;
  const float* a = nullptr;
  std::size_t lda = 0;
  const float* b = nullptr;
  std::size_t ldb = 0;
  float beta = 0;
  float* c = nullptr;
  std::size_t ldc = 0;
  Skip skip = Skip::none;
  const std::size_t* pos = nullptr;  // for skip != none
  float* pack = nullptr;
};

/// n rounded up to a multiple of 16 floats: the row length of small_gemm's copy of op(B).
inline std::size_t small_gemm_pack_width(std::size_t n) { return (n + 15) / 16 * 16; }

/// Whether small_gemm beats BLAS at a head's products (64 x 64 x 32 and its transposes) in the variant this process
/// runs (kernels/isa.h), `skipping` half the terms (a causal mask) or none. Measured against OpenBLAS's Haswell kernels
/// in cache (bench/README.md): AVX-512 1.3-2.2x faster either way; AVX2 1.2x faster over a pair's six products when
/// skipping, 1.17x slower without; baseline (SSE2) slower than Haswell's BLAS but faster than Prescott's, which is
/// what a CPU without AVX2 runs.
bool small_gemm_pays(bool skipping);

/// Computes `g` at the widest vector width the CPU runs (XGRAD_SIMD, kernels/isa.h). Throws nothing; the caller
/// checks the shapes (a skip's pos must be sorted and hold m or k entries as its Skip says).
void small_gemm(const SmallGemm& g);

}  // namespace xgrad::simd
