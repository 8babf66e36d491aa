// The float64 GEMM through xtensor-blas. A translation unit of its own: xtensor-blas declares the CBLAS functions
// itself (xflens/cxxblas), in forms that clash with OpenBLAS's cblas.h, which blas.cpp includes.
#include <algorithm>
#include <array>

#include <xtensor-blas/xblas.hpp>
#include <xtensor/xadapt.hpp>
#include <xtensor/xtensor.hpp>

#include "autograd/blas.h"

namespace xgrad::blas {

// A and B are adapted at their row strides (xtensor-blas packs them for the call); C is written in place when its
// rows are packed, else through a packed copy.
void gemm_reference(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha,
                    const double* a, std::size_t lda, const double* b, std::size_t ldb, double beta, double* c,
                    std::size_t ldc) {
  using Shape = std::array<std::size_t, 2>;
  // The adaptor's size is its element count (xtensor checks it against the shape); the strides reach the rest.
  auto stored = [](const double* p, Shape shape, std::size_t ld) {
    return xt::adapt(p, shape[0] * shape[1], xt::no_ownership(), shape, Shape{ld, 1});
  };
  const auto op_a = stored(a, trans_a ? Shape{k, m} : Shape{m, k}, lda);
  const auto op_b = stored(b, trans_b ? Shape{n, k} : Shape{k, n}, ldb);
  if (ldc == n) {
    auto out = xt::adapt(c, m * n, xt::no_ownership(), Shape{m, n});
    xt::blas::gemm(op_a, op_b, out, trans_a, trans_b, alpha, beta);
    return;
  }
  xt::xtensor<double, 2> packed = stored(c, Shape{m, n}, ldc);
  xt::blas::gemm(op_a, op_b, packed, trans_a, trans_b, alpha, beta);
  for (std::size_t i = 0; i < m; ++i) std::copy(&packed(i, 0), &packed(i, 0) + n, c + i * ldc);
}

}  // namespace xgrad::blas
