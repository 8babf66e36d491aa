#include "autograd/kernels/small_gemm.h"

#include <algorithm>
#include <cstring>

#include "autograd/kernels/isa.h"

namespace xgrad::simd {

namespace {

using float4 = float __attribute__((vector_size(16)));
using float8 = float __attribute__((vector_size(32)));
using float16 = float __attribute__((vector_size(64)));

template <class V>
constexpr std::size_t kLanes = sizeof(V) / sizeof(float);

// Rows [i, i + R) of C's columns [j0, j0 + NV lanes), n_cols of them real (the last vector may be partial), summing
// the terms p in [p0, p1): R x NV accumulators held in registers, one broadcast of op(A) per row and term, one load
// of B's row per vector and term. B's rows (stride ldp) are readable for NV whole vectors from j0.
template <class V, int R, int NV>
__attribute__((always_inline)) inline void block(const SmallGemm& g, const float* bp, std::size_t ldp, std::size_t i,
                                                 std::size_t j0, std::size_t n_cols, std::size_t p0, std::size_t p1) {
  constexpr std::size_t W = kLanes<V>;
  V acc[R][NV] = {};
  for (std::size_t p = p0; p < p1; ++p) {
    float x[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) x[r] = g.trans_a ? g.a[p * g.lda + i + r] : g.a[(i + r) * g.lda + p];
    V b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) std::memcpy(&b[v], bp + p * ldp + j0 + v * W, sizeof(V));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] += x[r] * b[v];
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      const std::size_t col = j0 + v * W, count = std::min(W, n_cols - v * W);
      float* c = g.c + (i + r) * g.ldc + col;
      V out = g.alpha * acc[r][v];
      if (g.beta != 0) {
        V old{};
        std::memcpy(&old, c, count * sizeof(float));
        out += g.beta * old;
      }
      std::memcpy(c, &out, count * sizeof(float));
    }
}

// block with the panel's vector count chosen at run time (1 to 4).
template <class V, int R>
__attribute__((always_inline)) inline void block_of(std::size_t vectors, const SmallGemm& g, const float* bp,
                                                    std::size_t ldp, std::size_t i, std::size_t j0, std::size_t n_cols,
                                                    std::size_t p0, std::size_t p1) {
  switch (vectors) {
    case 1:
      return block<V, R, 1>(g, bp, ldp, i, j0, n_cols, p0, p1);
    case 2:
      return block<V, R, 2>(g, bp, ldp, i, j0, n_cols, p0, p1);
    case 3:
      return block<V, R, 3>(g, bp, ldp, i, j0, n_cols, p0, p1);
    default:
      return block<V, R, 4>(g, bp, ldp, i, j0, n_cols, p0, p1);
  }
}

// The terms [p0, p1) and columns [0, n_end) that rows [i, i + rows) need, by g.skip.
struct Range {
  std::size_t p0, p1, n_end;
};
__attribute__((always_inline)) inline Range range_of(const SmallGemm& g, std::size_t i, std::size_t rows) {
  Range r{0, g.k, g.n};
  if (g.skip == Skip::c_past_pos || g.skip == Skip::a_past_pos) {  // pos has m entries: the block's last row's
    const std::size_t last = g.pos[std::min(i + rows, g.m) - 1] + 1;
    (g.skip == Skip::c_past_pos ? r.n_end : r.p1) = std::min(g.skip == Skip::c_past_pos ? g.n : g.k, last);
  }
  if (g.skip == Skip::a_t_past_pos)  // pos has k entries: the first term whose position reaches the block's row i
    r.p0 = static_cast<std::size_t>(std::lower_bound(g.pos, g.pos + g.k, i) - g.pos);
  return r;
}

// Rows [i, i + R) over every column panel they need; with c_past_pos, the entries past each row's pos are zeroed.
template <class V, int R>
__attribute__((always_inline)) inline void rows(const SmallGemm& g, const float* bp, std::size_t ldp, std::size_t i) {
  constexpr std::size_t W = kLanes<V>, kPanel = 4 * W;
  const Range r = range_of(g, i, R);
  for (std::size_t j0 = 0; j0 < r.n_end; j0 += kPanel) {
    const std::size_t n_cols = std::min(kPanel, r.n_end - j0);
    block_of<V, R>((n_cols + W - 1) / W, g, bp, ldp, i, j0, n_cols, r.p0, std::max(r.p0, r.p1));
  }
  if (g.skip == Skip::c_past_pos)
    for (int q = 0; q < R; ++q) {
      float* c = g.c + (i + q) * g.ldc;
      std::fill(c + std::min(g.n, g.pos[i + q] + 1), c + g.n, 0.0f);
    }
}

// pack[p][j] = B[j][p] for p < k, j < n: 4 x 4 tiles transposed in registers (4 vector loads and stores and 8
// shuffles where element by element it takes 16 loads and 16 stores), the edges element by element.
__attribute__((always_inline)) inline void pack_transposed(const SmallGemm& g, float* pack, std::size_t ldp) {
  std::size_t j = 0;
  for (; j + 4 <= g.n; j += 4) {
    std::size_t p = 0;
    for (; p + 4 <= g.k; p += 4) {
      float4 r[4];
      for (int q = 0; q < 4; ++q) std::memcpy(&r[q], g.b + (j + q) * g.ldb + p, sizeof(float4));
      const float4 t0 = __builtin_shufflevector(r[0], r[1], 0, 4, 1, 5);
      const float4 t1 = __builtin_shufflevector(r[0], r[1], 2, 6, 3, 7);
      const float4 t2 = __builtin_shufflevector(r[2], r[3], 0, 4, 1, 5);
      const float4 t3 = __builtin_shufflevector(r[2], r[3], 2, 6, 3, 7);
      const float4 out[4] = {__builtin_shufflevector(t0, t2, 0, 1, 4, 5), __builtin_shufflevector(t0, t2, 2, 3, 6, 7),
                             __builtin_shufflevector(t1, t3, 0, 1, 4, 5), __builtin_shufflevector(t1, t3, 2, 3, 6, 7)};
      for (int q = 0; q < 4; ++q) std::memcpy(pack + (p + q) * ldp + j, &out[q], sizeof(float4));
    }
    for (; p < g.k; ++p)
      for (std::size_t q = 0; q < 4; ++q) pack[p * ldp + j + q] = g.b[(j + q) * g.ldb + p];
  }
  for (; j < g.n; ++j)
    for (std::size_t p = 0; p < g.k; ++p) pack[p * ldp + j] = g.b[j * g.ldb + p];
}

// The whole product: B^T (or a B whose rows are not whole vectors) copied to `pack` with rows of a whole number of
// vectors, zero padded, so that every load reads B's own columns or the padding; then rows R at a time (RN when
// op(B) is at most 2 vectors wide), then R4 (the rows a causal block's positions are taken over stay few), then 1.
template <class V, int R, int RN, int R4>
__attribute__((always_inline)) inline void run(const SmallGemm& g) {
  constexpr std::size_t W = kLanes<V>;
  if (g.m == 0 || g.n == 0) return;
  const float* bp = g.b;
  std::size_t ldp = g.ldb;
  if (g.trans_b || g.n % W != 0) {
    ldp = (g.n + W - 1) / W * W;
    if (g.trans_b)
      pack_transposed(g, g.pack, ldp);
    else
      for (std::size_t p = 0; p < g.k; ++p) std::copy(g.b + p * g.ldb, g.b + p * g.ldb + g.n, g.pack + p * ldp);
    for (std::size_t p = 0; p < g.k; ++p) std::fill(g.pack + p * ldp + g.n, g.pack + (p + 1) * ldp, 0.0f);
    bp = g.pack;
  }
  std::size_t i = 0;
  if (g.n <= 2 * W)
    for (; i + RN <= g.m; i += RN) rows<V, RN>(g, bp, ldp, i);
  else
    for (; i + R <= g.m; i += R) rows<V, R>(g, bp, ldp, i);
  for (; i + R4 <= g.m; i += R4) rows<V, R4>(g, bp, ldp, i);
  for (; i < g.m; ++i) rows<V, 1>(g, bp, ldp, i);
}

// Per instruction set, the widest vector and the rows per block whose accumulators (R x 4 vectors, RN x 2) and B's
// vectors fit the register file: 32 zmm, 16 ymm, 16 xmm. AVX-512's 6 rows (not 4) run the nanoGPT step's products
// at 165-218 GFLOP/s in cache, against 137-174 (bench/README.md).
void small_gemm_baseline(const SmallGemm& g) { run<float4, 2, 4, 2>(g); }
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx512f"))) void small_gemm_avx512f(const SmallGemm& g) { run<float16, 6, 8, 4>(g); }
__attribute__((target("avx2,fma"))) void small_gemm_avx2(const SmallGemm& g) { run<float8, 3, 6, 3>(g); }
#endif

}  // namespace

bool small_gemm_pays(bool skipping) { return skipping || active_isa() != Isa::avx2; }

void small_gemm(const SmallGemm& g) {
#if defined(__x86_64__) || defined(__i386__)
  switch (active_isa()) {
    case Isa::avx512f:
      return small_gemm_avx512f(g);
    case Isa::avx2: {
      // Every AVX2 CPU made has FMA, but the avx2 variant is chosen by AVX2 alone (isa.cpp).
      static const bool fma = __builtin_cpu_supports("fma") != 0;
      if (fma) return small_gemm_avx2(g);
      break;
    }
    case Isa::baseline:
      break;
  }
#endif
  small_gemm_baseline(g);
}

}  // namespace xgrad::simd
