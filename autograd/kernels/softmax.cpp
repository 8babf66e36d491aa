#include "autograd/kernels/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/kernels/vector_math.h"

namespace xgrad::simd {

namespace {

// The float row, compiled per ISA (XGRAD_ISA_VARIANTS): max, shifted exps and their sum, then a division.
__attribute__((always_inline)) inline void softmax_row_body(const float* in, float* out, std::size_t n) {
  const float ninf = -std::numeric_limits<float>::infinity();
  float16 mv = float16{} + ninf;
  for_each_wide(
      n, [&](std::size_t j, auto count) __attribute__((always_inline)) {
        float16 v;
        load16(v, in + j, count, ninf);
        mv = v > mv ? v : mv;
      });
  float m = ninf;
  for (std::size_t l = 0; l < kWide; ++l) m = std::max(m, mv[l]);
  if (m == ninf) {  // fully masked row
    std::fill(out, out + n, 0.0f);
    return;
  }
  float16 sum{};
  for_each_wide(
      n, [&](std::size_t j, auto count) __attribute__((always_inline)) {
        float16 e;
        load16(e, in + j, count, ninf);  // padding lanes: exp(-inf) = 0
        e -= m;
        exp_in_place(e);
        store16(out + j, e, count);
        sum += e;
      });
  float s = 0;
  for (std::size_t l = 0; l < kWide; ++l) s += sum[l];
  for (std::size_t j = 0; j < n; ++j) out[j] /= s;
}

__attribute__((always_inline)) inline void exp_shifted_body(const float* in, float shift, float* out, std::size_t n) {
  for_each_wide(
      n, [&](std::size_t j, auto count) __attribute__((always_inline)) {
        float16 e;
        load16(e, in + j, count);
        e -= shift;
        exp_in_place(e);
        store16(out + j, e, count);
      });
}

XGRAD_ISA_VARIANTS(softmax_row_f32, softmax_row_body, (const float* in, float* out, std::size_t n), (in, out, n))
XGRAD_ISA_VARIANTS(exp_shifted_f32, exp_shifted_body, (const float* in, float shift, float* out, std::size_t n),
                   (in, shift, out, n))

}  // namespace

void softmax_row(const float* in, float* out, std::size_t n) { softmax_row_f32(in, out, n); }

void softmax_row(const double* in, double* out, std::size_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (std::size_t j = 0; j < n; ++j) m = std::max(m, in[j]);
  if (m == -std::numeric_limits<double>::infinity()) {
    std::fill(out, out + n, 0.0);
    return;
  }
  // Padding lanes hold -inf, whose exp adds 0 to the sum.
  batch<double> sum(0.0);
  for_each_batch<double>(n, [&](std::size_t j, auto count) {
    const batch<double> e = xsimd::exp(load(in + j, count, -std::numeric_limits<double>::infinity()) - m);
    store(out + j, e, count);
    sum += e;
  });
  const double s = lane_sum(sum);
  for (std::size_t j = 0; j < n; ++j) out[j] /= s;
}

void exp_shifted(const float* in, float shift, float* out, std::size_t n) { exp_shifted_f32(in, shift, out, n); }

void exp_shifted(const double* in, double shift, double* out, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) out[j] = std::exp(in[j] - shift);
}

}  // namespace xgrad::simd
