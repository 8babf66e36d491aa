// The gelu kernel: one exp per element instead of a libm tanh, at the widest vector width the CPU runs, split over
// threads. Plain reference: reference::gelu and reference::gelu_derivative (kernels/reference.h);
// tests/test_kernels.cpp holds the kernel to them within a stated ulp bound.
#pragma once

#include <cstddef>

namespace xgrad::simd {

/// gelu, tanh form, of n elements: 0.5 x (1 + tanh(u)) computed as out = x sig with sig = sigmoid(2u),
/// u = k (x + c x^3), k = sqrt(2 / pi), c = 0.044715 (Hendrycks & Gimpel 2016, sec. 2). sig is kept for
/// gelu_backward. float: 16-wide Cephes exp (simd::exp_in_place) in target clones; double: xsimd::exp.
void gelu(const float* x, float* out, float* sig, std::size_t n);
void gelu(const double* x, double* out, double* sig, std::size_t n);

/// g *= d gelu / dx for n elements, given x and sig from gelu: d/dx [x sig] = sig + x sig (1 - sig) 2 u',
/// u' = k (1 + 3 c x^2).
void gelu_backward(const float* x, const float* sig, float* g, std::size_t n);
void gelu_backward(const double* x, const double* sig, double* g, std::size_t n);

}  // namespace xgrad::simd
