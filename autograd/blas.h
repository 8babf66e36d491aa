// The one place xgrad calls BLAS. Row-major GEMM for float and double, and what OpenBLAS says of itself.
#pragma once

#include <cstddef>
#include <string>

namespace xgrad::blas {

/// C = alpha * op(A) @ op(B) + beta * C, row-major; op(X) = X^T when trans_x. op(A) is [m, k], op(B) [k, n],
/// C [m, n]; lda/ldb/ldc are the row strides of the stored matrices. Calls cblas_sgemm / cblas_dgemm.
template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a, std::size_t lda,
          const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc);

/// The OpenBLAS kernel family in use (openblas_get_corename(), e.g. "SkylakeX", "Haswell", "Prescott").
std::string core_name();
/// BLAS threads in use.
int num_threads();
/// Sets the BLAS thread count (openblas_set_num_threads).
void set_num_threads(int n);

}  // namespace xgrad::blas
