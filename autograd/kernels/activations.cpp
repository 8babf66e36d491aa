#include "autograd/kernels/activations.h"

#include <cmath>

#include "autograd/kernels/parallel.h"
#include "autograd/kernels/vector_math.h"

namespace xgrad::simd {

namespace {

template <class T>
const T gelu_k = static_cast<T>(std::sqrt(2.0 / M_PI));
template <class T>
const T gelu_c = static_cast<T>(0.044715);

// The float kernels, compiled per ISA (XGRAD_ISA_VARIANTS).
__attribute__((always_inline)) inline void gelu_body(const float* x, float* out, float* sig, std::size_t n, float k,
                                                     float c) {
  for_each_wide(
      n, [&](std::size_t i, auto count) __attribute__((always_inline)) {
        float16 xi;
        load16(xi, x + i, count);
        float16 e = -2.0f * k * (xi + c * xi * xi * xi);
        exp_in_place(e);
        const float16 s = 1.0f / (1.0f + e);
        store16(sig + i, s, count);
        store16(out + i, xi * s, count);
      });
}

__attribute__((always_inline)) inline void gelu_backward_body(const float* x, const float* sig, float* g, std::size_t n,
                                                              float k, float c) {
  for (std::size_t i = 0; i < n; ++i) {  // plain loop: the compiler vectorises it at each clone's width
    const float xi = x[i], s = sig[i];
    g[i] *= s + xi * s * (1.0f - s) * 2.0f * k * (1.0f + 3.0f * c * xi * xi);
  }
}

XGRAD_ISA_VARIANTS(gelu_f32, gelu_body, (const float* x, float* out, float* sig, std::size_t n, float k, float c),
                   (x, out, sig, n, k, c))
XGRAD_ISA_VARIANTS(gelu_backward_f32, gelu_backward_body,
                   (const float* x, const float* sig, float* g, std::size_t n, float k, float c), (x, sig, g, n, k, c))

}  // namespace

// Chunks of a multiple of 64 elements: every SIMD vector sits where the serial loop has it.
void gelu(const float* x, float* out, float* sig, std::size_t n) {
  parallel_for(0, n, grain_for(8, 64), [&](std::size_t lo, std::size_t hi) {
    gelu_f32(x + lo, out + lo, sig + lo, hi - lo, gelu_k<float>, gelu_c<float>);
  });
}

void gelu(const double* x, double* out, double* sig, std::size_t n) {
  const double k = gelu_k<double>, c = gelu_c<double>;
  parallel_for(0, n, grain_for(8, 64), [&](std::size_t lo, std::size_t hi) {
    for_each_batch<double>(hi - lo, [&](std::size_t i, auto count) {
      const batch<double> xi = load(x + lo + i, count);
      const batch<double> s = 1.0 / (1.0 + xsimd::exp(-2.0 * k * (xi + c * xi * xi * xi)));
      store(sig + lo + i, s, count);
      store(out + lo + i, xi * s, count);
    });
  });
}

void gelu_backward(const float* x, const float* sig, float* g, std::size_t n) {
  parallel_for(0, n, grain_for(4, 64), [&](std::size_t lo, std::size_t hi) {
    gelu_backward_f32(x + lo, sig + lo, g + lo, hi - lo, gelu_k<float>, gelu_c<float>);
  });
}

void gelu_backward(const double* x, const double* sig, double* g, std::size_t n) {
  const double k = gelu_k<double>, c = gelu_c<double>;
  parallel_for(0, n, grain_for(4, 64), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) {
      const double xi = x[i], s = sig[i];
      g[i] *= s + xi * s * (1.0 - s) * 2.0 * k * (1.0 + 3.0 * c * xi * xi);
    }
  });
}

}  // namespace xgrad::simd
