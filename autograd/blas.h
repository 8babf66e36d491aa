// The one place xgrad calls BLAS. Row-major GEMM for float (cblas directly) and double (through xtensor-blas), and
// what OpenBLAS says of itself.
#pragma once

#include <cstddef>
#include <string>

namespace xgrad::blas {

/// C = alpha * op(A) @ op(B) + beta * C, row-major; op(X) = X^T when trans_x. op(A) is [m, k], op(B) [k, n],
/// C [m, n]; lda/ldb/ldc are the row strides of the stored matrices. float: calls cblas_sgemm (the fast path);
/// double: gemm_reference.
template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a, std::size_t lda,
          const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc);

/// gemm<double> for m, n, k > 0, through xtensor-blas (xt::blas::gemm, which xt::linalg::dot runs on): the float64
/// reference the float32 path is checked against.
void gemm_reference(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha,
                    const double* a, std::size_t lda, const double* b, std::size_t ldb, double beta, double* c,
                    std::size_t ldc);

/// The OpenBLAS kernel family in use (openblas_get_corename(), e.g. "SkylakeX", "Haswell", "Prescott").
std::string core_name();
/// BLAS threads in use.
int num_threads();
/// Sets the BLAS thread count (openblas_set_num_threads).
void set_num_threads(int n);

}  // namespace xgrad::blas
