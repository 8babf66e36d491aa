// Elementwise ops with NumPy broadcasting, and the arithmetic operators on tensors. Implemented in ops_elementwise.cpp,
// instantiated for float and double.
#pragma once

#include "autograd/tensor.h"

namespace xgrad {

/// a + b, NumPy broadcasting. Shapes: any two broadcastable shapes → their broadcast shape.
template <class T>
basic_tensor<T> add(const basic_tensor<T>& a, const basic_tensor<T>& b);
/// a - b, NumPy broadcasting.
template <class T>
basic_tensor<T> sub(const basic_tensor<T>& a, const basic_tensor<T>& b);
/// a * b (elementwise), NumPy broadcasting.
template <class T>
basic_tensor<T> mul(const basic_tensor<T>& a, const basic_tensor<T>& b);
/// a / b (elementwise), NumPy broadcasting.
template <class T>
basic_tensor<T> div(const basic_tensor<T>& a, const basic_tensor<T>& b);
/// a + s for a constant s.
template <class T>
basic_tensor<T> add_scalar(const basic_tensor<T>& a, double s);
/// a * s for a constant s.
template <class T>
basic_tensor<T> mul_scalar(const basic_tensor<T>& a, double s);
/// a ** p for a constant exponent p (elementwise).
template <class T>
basic_tensor<T> pow_scalar(const basic_tensor<T>& a, double p);
template <class T>
basic_tensor<T> neg(const basic_tensor<T>& a);
template <class T>
basic_tensor<T> exp(const basic_tensor<T>& a);
/// Natural logarithm; log(0) = -inf, as in IEEE arithmetic.
template <class T>
basic_tensor<T> log(const basic_tensor<T>& a);
template <class T>
basic_tensor<T> sqrt(const basic_tensor<T>& a);
template <class T>
basic_tensor<T> tanh(const basic_tensor<T>& a);
template <class T>
basic_tensor<T> sigmoid(const basic_tensor<T>& a);
/// max(a, 0); the gradient at exactly 0 is taken as 0 (as PyTorch).
template <class T>
basic_tensor<T> relu(const basic_tensor<T>& a);
/// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hendrycks & Gimpel 2016, eq. 2
/// approximation), as GPT-2 uses.
template <class T>
basic_tensor<T> gelu(const basic_tensor<T>& a);
/// GELU, exact form: x Φ(x) = 0.5 x (1 + erf(x / sqrt(2))) (Hendrycks & Gimpel 2016, sec. 2), as
/// torch.nn.functional.gelu(x, approximate='none'). A separate name rather than a flag on `gelu` because xgrad's
/// `gelu` has always meant the tanh form while PyTorch's default is the erf form: a defaulted flag would mislead.
template <class T>
basic_tensor<T> gelu_erf(const basic_tensor<T>& a);
/// SiLU (swish): x * sigmoid(x) (Elfwing, Uchibe & Doya 2018; Ramachandran et al. 2017).
template <class T>
basic_tensor<T> silu(const basic_tensor<T>& a);
/// 1 / sqrt(a). At 0 the value is +inf and the gradient -inf; negative inputs give NaN (IEEE arithmetic).
template <class T>
basic_tensor<T> rsqrt(const basic_tensor<T>& a);
/// |a|. The gradient is sign(a), taken as 0 at exactly 0 (as PyTorch).
template <class T>
basic_tensor<T> abs(const basic_tensor<T>& a);
/// a clamped into [min, max]; either bound may be -inf/+inf (one-sided clamp). NaN stays NaN.
/// The gradient passes only where min < a < max strictly: an input sitting exactly on a bound gets 0 (PyTorch
/// passes it there; at the bound both one-sided derivatives are valid subgradients and 0 keeps a clamped value
/// from being pushed further out). Throws Error if min > max or a bound is NaN.
template <class T>
basic_tensor<T> clamp(const basic_tensor<T>& a, double min, double max);

/// a ** b elementwise, NumPy broadcasting. Gradients (as PyTorch):
///   d/da = b a^(b-1), taken as 0 where b == 0 (also at a == 0, where 0 * inf would be NaN);
///   d/db = a^b log(a), defined for a > 0. At a == 0 it is taken as 0 where b >= 0 (the limit of a^b log a as
///   a -> 0+ for b > 0); at a == 0 with b < 0 it is -inf (a^b = inf), and for a < 0 it is NaN (log of a
///   negative number), so only differentiate with respect to b through positive bases.
/// Throws Error if the shapes do not broadcast.
template <class T>
basic_tensor<T> pow(const basic_tensor<T>& a, const basic_tensor<T>& b);
/// Elementwise max(a, b), NumPy broadcasting. Where a == b the gradient is split half/half between a and b
/// (as PyTorch's torch.maximum). A NaN in either operand gives NaN (as torch.maximum) and no gradient there.
/// Throws Error if the shapes do not broadcast.
template <class T>
basic_tensor<T> maximum(const basic_tensor<T>& a, const basic_tensor<T>& b);
/// Elementwise min(a, b), NumPy broadcasting; ties split the gradient half/half and NaN propagates, as `maximum`.
template <class T>
basic_tensor<T> minimum(const basic_tensor<T>& a, const basic_tensor<T>& b);

// ---- comparisons and selection --------------------------------------------------------------------------------
// Comparisons return plain boolean masks (no graph: they are not differentiable), with NumPy broadcasting, and
// throw Error naming the op if the shapes do not broadcast. NaN compares as IEEE arithmetic says (only ne is true).

/// a == b elementwise.
template <class T>
xt::xarray<bool> eq(const basic_tensor<T>& a, const basic_tensor<T>& b);
/// a != b elementwise.
template <class T>
xt::xarray<bool> ne(const basic_tensor<T>& a, const basic_tensor<T>& b);
/// a < b elementwise.
template <class T>
xt::xarray<bool> lt(const basic_tensor<T>& a, const basic_tensor<T>& b);
/// a <= b elementwise.
template <class T>
xt::xarray<bool> le(const basic_tensor<T>& a, const basic_tensor<T>& b);
/// a > b elementwise.
template <class T>
xt::xarray<bool> gt(const basic_tensor<T>& a, const basic_tensor<T>& b);
/// a >= b elementwise.
template <class T>
xt::xarray<bool> ge(const basic_tensor<T>& a, const basic_tensor<T>& b);
/// a where `cond` is true, b elsewhere, broadcasting cond, a and b together (NumPy/torch.where). The output has
/// their common broadcast shape; the gradient flows to a where cond holds and to b elsewhere, each summed back
/// to its own shape. Throws Error if the three shapes do not broadcast.
/// Spell it `xgrad::where`: `cond` is an xtensor type, so an unqualified call also finds xt::where by
/// argument-dependent lookup, which wins overload resolution for non-const or temporary arguments (and then fails
/// to compile on tensors).
template <class T>
basic_tensor<T> where(const xt::xarray<bool>& cond, const basic_tensor<T>& a, const basic_tensor<T>& b);

template <class T>
basic_tensor<T> operator+(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  return add(a, b);
}
template <class T>
basic_tensor<T> operator-(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  return sub(a, b);
}
template <class T>
basic_tensor<T> operator*(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  return mul(a, b);
}
template <class T>
basic_tensor<T> operator/(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  return div(a, b);
}
template <class T>
basic_tensor<T> operator-(const basic_tensor<T>& a) {
  return neg(a);
}
template <class T>
basic_tensor<T> operator+(const basic_tensor<T>& a, double s) {
  return add_scalar(a, s);
}
template <class T>
basic_tensor<T> operator-(const basic_tensor<T>& a, double s) {
  return add_scalar(a, -s);
}
template <class T>
basic_tensor<T> operator*(const basic_tensor<T>& a, double s) {
  return mul_scalar(a, s);
}
template <class T>
basic_tensor<T> operator*(double s, const basic_tensor<T>& a) {
  return mul_scalar(a, s);
}
template <class T>
basic_tensor<T> operator/(const basic_tensor<T>& a, double s) {
  return mul_scalar(a, 1.0 / s);
}

}  // namespace xgrad
