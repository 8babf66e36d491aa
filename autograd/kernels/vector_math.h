// The SIMD building blocks of the kernels, for the loops the compiler cannot vectorise by itself: those calling exp
// or sqrt per element (a libm call, or a sqrt that may set errno, keeps GCC's vectoriser out) and floating-point
// sums (which it may not reorder, so a plain loop is one chain of dependent adds). Two layers:
//  - xsimd batches at the width of the compile target (SSE2 on a baseline x86-64 build: 4 floats, 2 doubles), for
//    float and double: sums and dot products (layer_norm, softmax backward), softmax rows, sqrt in AdamW.
//  - Wide float vectors for the exp-bound kernels (kernels/activations.cpp, kernels/softmax.cpp): GCC vector
//    extensions of 16 floats, in functions compiled three times (XGRAD_ISA_VARIANTS: AVX-512F, AVX2, baseline), of
//    which the widest the CPU runs is called, as PyTorch dispatches its kernels. Double keeps the xsimd path
//    (gradcheck runs in double and needs libm accuracy).
// Each kernel built on these is compared with its plain reference (kernels/reference.h) in tests/test_kernels.cpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "autograd/kernels/isa.h"

// XGRAD_ISA_VARIANTS(name, body, params, args) defines `name` as three functions, each `body` (an always_inline
// function) compiled for one instruction set (AVX-512F, AVX2, baseline x86-64), and a `name` that calls the one
// simd::active_isa() chose (kernels/isa.h): the widest this CPU runs, as PyTorch dispatches its kernels, or the one
// XGRAD_SIMD names, so that tests run each variant on one machine. Explicit, not GCC's target_clones: clang emits
// it the same way, and the choice can be forced.
#if defined(__x86_64__) || defined(__i386__)
#define XGRAD_ISA_VARIANTS(name, body, params, args)                           \
  __attribute__((target("avx512f"))) void name##_avx512f params { body args; } \
  __attribute__((target("avx2"))) void name##_avx2 params { body args; }       \
  void name##_baseline params { body args; }                                   \
  void name params {                                                           \
    switch (::xgrad::simd::active_isa()) {                                     \
      case ::xgrad::simd::Isa::avx512f:                                        \
        return name##_avx512f args;                                            \
      case ::xgrad::simd::Isa::avx2:                                           \
        return name##_avx2 args;                                               \
      case ::xgrad::simd::Isa::baseline:                                       \
        break;                                                                 \
    }                                                                          \
    name##_baseline args;                                                      \
  }
#else
#define XGRAD_ISA_VARIANTS(name, body, params, args) \
  void name params { body args; }
#endif

namespace xgrad::simd {

template <class T>
using batch = xsimd::batch<T>;

/// Loads `count` <= batch size elements from p; the lanes past `count` hold `fill`.
template <class T>
batch<T> load(const T* p, std::size_t count, T fill = T(0)) {
  if (count == batch<T>::size) return batch<T>::load_unaligned(p);
  alignas(64) T buffer[batch<T>::size];
  std::fill(buffer, buffer + batch<T>::size, fill);
  // min: GCC 14 cannot tell count < size here and warns (-Warray-bounds) of a copy past the buffer.
  std::copy(p, p + std::min(count, batch<T>::size), buffer);
  return batch<T>::load_aligned(buffer);
}

/// Stores the first `count` <= batch size lanes of v to p.
template <class T>
void store(T* p, const batch<T>& v, std::size_t count) {
  if (count == batch<T>::size) return v.store_unaligned(p);
  alignas(64) T buffer[batch<T>::size];
  v.store_aligned(buffer);
  std::copy(buffer, buffer + std::min(count, batch<T>::size), p);
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

/// The sum of a batch's lanes, in lane order. Written here, not xsimd's: xsimd 8-12 call it hadd, 13 reduce_add.
template <class T>
T lane_sum(const batch<T>& v) {
  alignas(64) T lanes[batch<T>::size];
  v.store_aligned(lanes);
  T s = lanes[0];
  for (std::size_t l = 1; l < batch<T>::size; ++l) s += lanes[l];
  return s;
}

/// Sum of x[0, n): one partial sum per lane, so the additions do not wait on each other (a plain loop is one
/// chain of dependent adds, since the compiler may not reorder floating-point sums).
template <class T>
T sum(const T* x, std::size_t n) {
  batch<T> acc(T(0));
  for_each_batch<T>(n, [&](std::size_t i, auto count) { acc += load(x + i, count); });
  return lane_sum(acc);
}

/// Sum of x[i] * y[i] over [0, n), with per-lane partial sums as sum().
template <class T>
T dot(const T* x, const T* y, std::size_t n) {
  batch<T> acc(T(0));
  for_each_batch<T>(n, [&](std::size_t i, auto count) { acc += load(x + i, count) * load(y + i, count); });
  return lane_sum(acc);
}

/// Sum of (x[i] - c)^2 over [0, n).
template <class T>
T sum_squared_deviation(const T* x, std::size_t n, T c) {
  batch<T> acc(T(0));
  for_each_batch<T>(n, [&](std::size_t i, auto count) {
    const batch<T> d = load(x + i, count, c) - c;  // padding lanes hold c: they add 0
    acc += d * d;
  });
  return lane_sum(acc);
}

// ---- wide float kernels --------------------------------------------------------------------------------------

using float16 = float __attribute__((vector_size(64)));
using int16 = std::int32_t __attribute__((vector_size(64)));
constexpr std::size_t kWide = 16;

/// exp of 16 floats in place: Cephes' expf (Moshier 1992: exp(x) = 2^n exp(r), n = round(x / ln 2), ln 2 split in
/// two for an exact r, degree-5 polynomial), within 1 ulp of exp on [-87.34, 88.37] (checked on a 0.001 grid); 0
/// below (and for -inf), +inf above 88.37 (a float overflows at 88.72), NaN stays NaN. Inlined into each target
/// clone, so it runs at that clone's width.
__attribute__((always_inline)) inline void exp_in_place(float16& x) {
  const float lo = -87.3365448f, hi = 88.37f;
  float16 xc = x < lo ? float16{} + lo : x;
  xc = xc > hi ? float16{} + hi : xc;
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float16 n = (xc * 1.44269504088896341f + magic) - magic;
  float16 r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float16 p = float16{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int16 exponent = (__builtin_convertvector(n, int16) + 127) << 23;  // 2^n as float bits
  float16 y = p * __builtin_bit_cast(float16, exponent);
  y = x < lo ? float16{} : y;
  y = x > hi ? float16{} + std::numeric_limits<float>::infinity() : y;
  x = x != x ? x : y;
}

/// Loads `count` <= 16 floats into v, the other lanes holding `fill`. (Vectors pass by reference: a 64-byte vector
/// passed by value has a different ABI with and without AVX-512.)
__attribute__((always_inline)) inline void load16(float16& v, const float* p, std::size_t count, float fill = 0.0f) {
  v = float16{} + fill;
  std::memcpy(&v, p, count * sizeof(float));
}
__attribute__((always_inline)) inline void store16(float* p, const float16& v, std::size_t count) {
  std::memcpy(p, &v, count * sizeof(float));
}

/// Calls body(i, count) for i = 0, 16, 32, ... < n: count is the constant 16 for whole vectors (so load16/store16
/// compile to single vector moves) and n - i for the tail. `body` takes `auto count` and must be declared
/// __attribute__((always_inline)): a lambda is a function of its own, compiled for the baseline target unless it is
/// inlined into the clone.
template <class F>
__attribute__((always_inline)) inline void for_each_wide(std::size_t n, F&& body) {
  std::size_t i = 0;
  for (; i + kWide <= n; i += kWide) body(i, std::integral_constant<std::size_t, kWide>{});
  if (i < n) body(i, n - i);
}

}  // namespace xgrad::simd
