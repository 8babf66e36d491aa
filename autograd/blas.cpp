#include "autograd/blas.h"

#include <algorithm>

#include <cblas.h>

namespace xgrad::blas {

namespace {
// BLAS rejects empty matrices and leading dimensions of 0; handle those here so callers need not.
template <class T>
bool trivial(std::size_t m, std::size_t n, std::size_t k, T beta, T* c, std::size_t ldc) {
  if (m == 0 || n == 0) return true;
  if (k != 0) return false;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
  return true;
}
int ld(std::size_t x) { return static_cast<int>(std::max<std::size_t>(1, x)); }
}  // namespace

template <>
void gemm<float>(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
                 std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
  if (trivial(m, n, k, beta, c, ldc)) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a, ld(lda), b, ld(ldb), beta, c,
              ld(ldc));
}

template <>
void gemm<double>(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha,
                  const double* a, std::size_t lda, const double* b, std::size_t ldb, double beta, double* c,
                  std::size_t ldc) {
  if (trivial(m, n, k, beta, c, ldc)) return;
  gemm_reference(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

std::string core_name() {
  const char* name = openblas_get_corename();
  return name ? std::string(name) : std::string("unknown");
}
int num_threads() { return openblas_get_num_threads(); }
void set_num_threads(int n) { openblas_set_num_threads(n); }

}  // namespace xgrad::blas
