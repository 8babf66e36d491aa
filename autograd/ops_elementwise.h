// Elementwise ops with NumPy broadcasting, and the arithmetic operators on tensors. Implemented in ops_elementwise.cpp, instantiated for float and double.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/tensor.h"

namespace xgrad {

/// a + b, NumPy broadcasting. Shapes: any two broadcastable shapes → their broadcast shape.
template <class T> basic_tensor<T> add(const basic_tensor<T>& a, const basic_tensor<T>& b);
/// a - b, NumPy broadcasting.
template <class T> basic_tensor<T> sub(const basic_tensor<T>& a, const basic_tensor<T>& b);
/// a * b (elementwise), NumPy broadcasting.
template <class T> basic_tensor<T> mul(const basic_tensor<T>& a, const basic_tensor<T>& b);
/// a / b (elementwise), NumPy broadcasting.
template <class T> basic_tensor<T> div(const basic_tensor<T>& a, const basic_tensor<T>& b);
/// a + s for a constant s.
template <class T> basic_tensor<T> add_scalar(const basic_tensor<T>& a, double s);
/// a * s for a constant s.
template <class T> basic_tensor<T> mul_scalar(const basic_tensor<T>& a, double s);
/// a ** p for a constant exponent p (elementwise).
template <class T> basic_tensor<T> pow_scalar(const basic_tensor<T>& a, double p);
template <class T> basic_tensor<T> neg(const basic_tensor<T>& a);
template <class T> basic_tensor<T> exp(const basic_tensor<T>& a);
/// Natural logarithm; log(0) = -inf, as in IEEE arithmetic.
template <class T> basic_tensor<T> log(const basic_tensor<T>& a);
template <class T> basic_tensor<T> sqrt(const basic_tensor<T>& a);
template <class T> basic_tensor<T> tanh(const basic_tensor<T>& a);
template <class T> basic_tensor<T> sigmoid(const basic_tensor<T>& a);
/// max(a, 0); the gradient at exactly 0 is taken as 0 (as PyTorch).
template <class T> basic_tensor<T> relu(const basic_tensor<T>& a);
/// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hendrycks & Gimpel 2016, eq. 2
/// approximation), as GPT-2 uses.
template <class T> basic_tensor<T> gelu(const basic_tensor<T>& a);

template <class T> basic_tensor<T> operator+(const basic_tensor<T>& a, const basic_tensor<T>& b) { return add(a, b); }
template <class T> basic_tensor<T> operator-(const basic_tensor<T>& a, const basic_tensor<T>& b) { return sub(a, b); }
template <class T> basic_tensor<T> operator*(const basic_tensor<T>& a, const basic_tensor<T>& b) { return mul(a, b); }
template <class T> basic_tensor<T> operator/(const basic_tensor<T>& a, const basic_tensor<T>& b) { return div(a, b); }
template <class T> basic_tensor<T> operator-(const basic_tensor<T>& a) { return neg(a); }
template <class T> basic_tensor<T> operator+(const basic_tensor<T>& a, double s) { return add_scalar(a, s); }
template <class T> basic_tensor<T> operator-(const basic_tensor<T>& a, double s) { return add_scalar(a, -s); }
template <class T> basic_tensor<T> operator*(const basic_tensor<T>& a, double s) { return mul_scalar(a, s); }
template <class T> basic_tensor<T> operator*(double s, const basic_tensor<T>& a) { return mul_scalar(a, s); }
template <class T> basic_tensor<T> operator/(const basic_tensor<T>& a, double s) { return mul_scalar(a, 1.0 / s); }

}  // namespace xgrad
