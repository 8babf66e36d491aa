// The plain references of the kernels: what each fast path computes, written as the textbook loop with wide
// accumulators (long double) and no SIMD, threads or in-place tricks. tests/test_kernels.cpp holds every kernel to
// its reference (exactly, or within a stated ulp bound); the general broadcasting case of kernels::broadcast_map
// runs broadcast_map_reference itself.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include <xtensor/xarray.hpp>
#include <xtensor/xbroadcast.hpp>

#include "autograd/tensor.h"

namespace xgrad::reference {

/// gelu, tanh form (Hendrycks & Gimpel 2016, sec. 2): 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3),
/// evaluated as x sigmoid(2u), which equals it and does not cancel where tanh(u) is near -1.
inline long double gelu(long double x) {
  const long double k = std::sqrt(2.0L / 3.141592653589793238462643383279502884L);
  return x / (1.0L + std::exp(-2.0L * k * (x + 0.044715L * x * x * x)));
}

/// d gelu / dx of the tanh form: s + x s (1 - s) 2 u', s = sigmoid(2u), u' = sqrt(2 / pi) (1 + 3 * 0.044715 x^2).
inline long double gelu_derivative(long double x) {
  const long double k = std::sqrt(2.0L / 3.141592653589793238462643383279502884L), c = 0.044715L;
  const long double e = std::exp(-2.0L * k * (x + c * x * x * x));
  const long double s = 1.0L / (1.0L + e), one_minus_s = e / (1.0L + e);
  return s + x * s * one_minus_s * 2.0L * k * (1.0L + 3.0L * c * x * x);
}

/// softmax of n contiguous elements: exp(x_j - max) / sum_i exp(x_i - max); a row whose every entry is -inf (fully
/// masked) gives all zeros.
template <class T>
std::vector<long double> softmax_row(const T* in, std::size_t n) {
  long double m = -std::numeric_limits<long double>::infinity();
  for (std::size_t j = 0; j < n; ++j) m = std::max<long double>(m, in[j]);
  std::vector<long double> out(n, 0.0L);
  if (m == -std::numeric_limits<long double>::infinity()) return out;
  long double s = 0;
  for (std::size_t j = 0; j < n; ++j) s += out[j] = std::exp(static_cast<long double>(in[j]) - m);
  for (std::size_t j = 0; j < n; ++j) out[j] /= s;
  return out;
}

/// sum_j x_j
template <class T>
long double sum(const T* x, std::size_t n) {
  long double s = 0;
  for (std::size_t j = 0; j < n; ++j) s += x[j];
  return s;
}

/// sum_j x_j y_j
template <class T>
long double dot(const T* x, const T* y, std::size_t n) {
  long double s = 0;
  for (std::size_t j = 0; j < n; ++j) s += static_cast<long double>(x[j]) * y[j];
  return s;
}

/// sum_j (x_j - c)^2
template <class T>
long double sum_squared_deviation(const T* x, std::size_t n, T c) {
  long double s = 0;
  for (std::size_t j = 0; j < n; ++j) s += (static_cast<long double>(x[j]) - c) * (static_cast<long double>(x[j]) - c);
  return s;
}

/// C = A @ B for row-major A [m, k] and B [k, n]: C [m, n].
template <class T>
std::vector<long double> matmul(const T* a, const T* b, std::size_t m, std::size_t k, std::size_t n) {
  std::vector<long double> c(m * n, 0.0L);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t p = 0; p < k; ++p)
      for (std::size_t j = 0; j < n; ++j) c[i * n + j] += static_cast<long double>(a[i * k + p]) * b[p * n + j];
  return c;
}

/// out = f(x, y) elementwise at out's shape, both operands broadcast to it (NumPy broadcasting) by xtensor.
template <class T, class F>
void broadcast_map_reference(const xt::xarray<T>& x, const xt::xarray<T>& y, xt::xarray<T>& out, F f) {
  const shape_t shape(out.shape().begin(), out.shape().end());
  const xt::xarray<T> xb = xt::broadcast(x, shape), yb = xt::broadcast(y, shape);
  for (std::size_t i = 0; i < out.size(); ++i) out.data()[i] = f(xb.data()[i], yb.data()[i]);
}

}  // namespace xgrad::reference
