// SIMD batches for the loops the compiler cannot vectorise by itself: those calling exp or sqrt per element (a
// libm call, or a sqrt that may set errno, keeps GCC's vectoriser out) and floating-point sums (which it may not
// reorder, so a plain loop is one chain of dependent adds). xsimd at the width of the compile target (SSE2 on a
// baseline x86-64 build: 4 floats, 2 doubles). Used by gelu, softmax and layer_norm, and by nn/optim.cpp (sqrt in
// AdamW). Measured at M (bench/README.md): gelu with one libm expf per element was 15% of the step, layer_norm's
// serial sums 6%.
#pragma once

#include <algorithm>
#include <cstddef>

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

/// Calls body(i, count) for i = 0, B, 2B, ... < n with count = min(B, n - i), B the batch size of T: every element
/// goes through the same batch code, the tail included (so no element depends on where it sits in the array).
template <class T, class F>
void for_each_batch(std::size_t n, F&& body) {
  constexpr std::size_t lanes = batch<T>::size;
  for (std::size_t i = 0; i < n; i += lanes) body(i, std::min(lanes, n - i));
}

/// Sum of x[0, n): one partial sum per lane, so the additions do not wait on each other (a plain loop is one
/// chain of dependent adds, since the compiler may not reorder floating-point sums).
template <class T>
T sum(const T* x, std::size_t n) {
  batch<T> acc(T(0));
  for_each_batch<T>(n, [&](std::size_t i, std::size_t count) { acc += load(x + i, count); });
  return xsimd::hadd(acc);
}

/// Sum of x[i] * y[i] over [0, n), with per-lane partial sums as sum().
template <class T>
T dot(const T* x, const T* y, std::size_t n) {
  batch<T> acc(T(0));
  for_each_batch<T>(n, [&](std::size_t i, std::size_t count) { acc += load(x + i, count) * load(y + i, count); });
  return xsimd::hadd(acc);
}

/// Sum of (x[i] - c)^2 over [0, n).
template <class T>
T sum_squared_deviation(const T* x, std::size_t n, T c) {
  batch<T> acc(T(0));
  for_each_batch<T>(n, [&](std::size_t i, std::size_t count) {
    const batch<T> d = load(x + i, count, c) - c;  // padding lanes hold c: they add 0
    acc += d * d;
  });
  return xsimd::hadd(acc);
}

}  // namespace xgrad::simd
