// SIMD batches for the loops the compiler cannot vectorise by itself: those calling exp or sqrt per element (a
// libm call, or a sqrt that may set errno, keeps GCC's vectoriser out) and floating-point sums (which it may not
// reorder, so a plain loop is one chain of dependent adds). xsimd at the width of the compile target (SSE2 on a
// baseline x86-64 build: 4 floats, 2 doubles). Used by gelu, softmax and layer_norm, by nn/optim.cpp (sqrt in
// AdamW) and nn/attention.cpp (softmax rows). Measured at M (bench/README.md): gelu with one libm expf per element was 15% of the step, layer_norm's
// serial sums 6%.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <type_traits>

#include <xsimd/xsimd.hpp>

namespace xgrad::simd {

template <class T>
using batch = xsimd::batch<T>;

/// Loads `count` <= batch size elements from p; the lanes past `count` hold `fill`.
template <class T>
batch<T> load(const T* p, std::size_t count, T fill = T(0)) {
  if (count == batch<T>::size) return batch<T>::load_unaligned(p);
  alignas(64) T buffer[batch<T>::size];
  std::fill(buffer, buffer + batch<T>::size, fill);
  std::copy(p, p + count, buffer);
  return batch<T>::load_aligned(buffer);
}

/// Stores the first `count` <= batch size lanes of v to p.
template <class T>
void store(T* p, const batch<T>& v, std::size_t count) {
  if (count == batch<T>::size) return v.store_unaligned(p);
  alignas(64) T buffer[batch<T>::size];
  v.store_aligned(buffer);
  std::copy(buffer, buffer + count, p);
}

/// A full batch's element count as a compile-time constant, so that load/store of a full batch compile to one
/// instruction.
template <class T>
using full_batch = std::integral_constant<std::size_t, batch<T>::size>;

/// Calls body(i, count) for i = 0, B, 2B, ... < n, B the batch size of T: count is full_batch<T> for whole batches
/// and n - i for the tail, which goes through the same batch code (so no element's result depends on where it
/// sits in the array). `body` takes `auto count`.
template <class T, class F>
void for_each_batch(std::size_t n, F&& body) {
  constexpr std::size_t lanes = batch<T>::size;
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) body(i, full_batch<T>{});
  if (i < n) body(i, n - i);
}

/// Sum of x[0, n): one partial sum per lane, so the additions do not wait on each other (a plain loop is one
/// chain of dependent adds, since the compiler may not reorder floating-point sums).
template <class T>
T sum(const T* x, std::size_t n) {
  batch<T> acc(T(0));
  for_each_batch<T>(n, [&](std::size_t i, auto count) { acc += load(x + i, count); });
  return xsimd::hadd(acc);
}

/// Sum of x[i] * y[i] over [0, n), with per-lane partial sums as sum().
template <class T>
T dot(const T* x, const T* y, std::size_t n) {
  batch<T> acc(T(0));
  for_each_batch<T>(n, [&](std::size_t i, auto count) { acc += load(x + i, count) * load(y + i, count); });
  return xsimd::hadd(acc);
}

/// Sum of (x[i] - c)^2 over [0, n).
template <class T>
T sum_squared_deviation(const T* x, std::size_t n, T c) {
  batch<T> acc(T(0));
  for_each_batch<T>(n, [&](std::size_t i, auto count) {
    const batch<T> d = load(x + i, count, c) - c;  // padding lanes hold c: they add 0
    acc += d * d;
  });
  return xsimd::hadd(acc);
}

/// out = softmax(in) over n contiguous elements, subtracting the max first; a row whose every entry is -inf (fully
/// masked) gives all zeros. in and out may be the same array. The row kernel of xgrad::softmax (last axis), shared
/// with fused ops that must match it.
template <class T>
void softmax_row(const T* in, T* out, std::size_t n) {
  T m = -std::numeric_limits<T>::infinity();
  for (std::size_t j = 0; j < n; ++j) m = std::max(m, in[j]);
  if (m == -std::numeric_limits<T>::infinity()) {
    std::fill(out, out + n, T(0));
    return;
  }
  // Padding lanes hold -inf, whose exp adds 0 to the sum.
  batch<T> sum(T(0));
  for_each_batch<T>(n, [&](std::size_t j, auto count) {
    const batch<T> e = xsimd::exp(load(in + j, count, -std::numeric_limits<T>::infinity()) - m);
    store(out + j, e, count);
    sum += e;
  });
  const T s = xsimd::hadd(sum);
  for (std::size_t j = 0; j < n; ++j) out[j] /= s;
}

}  // namespace xgrad::simd
