// The differentiable ops. Each is a free function template instantiated for float and double; each op's
// forward and backward stand side by side in one of ops_*.cpp. Every op throws xgrad::Error naming itself and
// the offending shapes on bad input. Broadcasting follows NumPy.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/tensor.h"

namespace xgrad {

using index_array = xt::xarray<std::int64_t>;

// ---- elementwise, broadcasting (ops_elementwise.cpp) ---------------------------------------------------------

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

// ---- reductions (ops_reduce.cpp) ---------------------------------------------------------------------------

/// Sum of all elements → 0-d tensor.
template <class T> basic_tensor<T> sum(const basic_tensor<T>& a);
/// Sum over `axes` (negative axes count from the end); keeps reduced axes as size 1 when keepdim.
/// Throws Error on an axis out of range or repeated.
template <class T> basic_tensor<T> sum(const basic_tensor<T>& a, std::vector<int> axes, bool keepdim = false);
/// Mean of all elements → 0-d tensor.
template <class T> basic_tensor<T> mean(const basic_tensor<T>& a);
/// Mean over `axes`, as sum.
template <class T> basic_tensor<T> mean(const basic_tensor<T>& a, std::vector<int> axes, bool keepdim = false);

// ---- shape (ops_shape.cpp) ---------------------------------------------------------------------------------

/// Same elements, new shape; one entry may be -1 (inferred). Throws Error if the element counts differ.
template <class T> basic_tensor<T> reshape(const basic_tensor<T>& a, const std::vector<std::int64_t>& shape);
/// Reorders axes: output axis i is input axis dims[i] (negative allowed). Throws Error unless dims is a
/// permutation of the input's axes.
template <class T> basic_tensor<T> permute(const basic_tensor<T>& a, std::vector<int> dims);
/// Swaps two axes.
template <class T> basic_tensor<T> transpose(const basic_tensor<T>& a, int dim0, int dim1);

// ---- matrix product (ops_matmul.cpp) -----------------------------------------------------------------------

/// Batched matrix product with numpy.matmul rules for operands of 2 or more dims: [..., M, K] @ [..., K, N] →
/// [broadcast(...), M, N]. Runs cblas_sgemm / cblas_dgemm once per matrix of the batch.
/// Throws Error if an operand has fewer than 2 dims, the inner sizes differ or the batch dims do not broadcast.
template <class T> basic_tensor<T> matmul(const basic_tensor<T>& a, const basic_tensor<T>& b);

// ---- neural-network ops (ops_nn.cpp) -----------------------------------------------------------------------

/// Softmax over the last axis, numerically stable (the row max is subtracted before exp).
/// A row whose every entry is -inf (fully masked) yields all zeros (not NaN) and passes zero gradient.
template <class T> basic_tensor<T> softmax(const basic_tensor<T>& a);
/// log(softmax(a)) over the last axis, computed as a - max - log(sum(exp(a - max))).
template <class T> basic_tensor<T> log_softmax(const basic_tensor<T>& a);
/// Where `mask` is true (broadcast to a's shape), the output holds `value` and passes no gradient.
template <class T>
basic_tensor<T> masked_fill(const basic_tensor<T>& a, const xt::xarray<bool>& mask, double value);
/// Layer normalisation over the last axis (Ba, Kiros & Hinton 2016, eq. 4):
/// y = (x - mean) / sqrt(var + eps) * weight + bias, with the biased variance. x: [..., D]; weight, bias: [D] or
/// undefined (then omitted). Fused backward.
template <class T>
basic_tensor<T> layer_norm(const basic_tensor<T>& x, const basic_tensor<T>& weight, const basic_tensor<T>& bias,
                           double eps = 1e-5);
/// Rows of `weight` [V, D] picked by `indices` (any shape S) → [S..., D]. Throws Error naming the first index
/// outside [0, V).
template <class T> basic_tensor<T> embedding(const basic_tensor<T>& weight, const index_array& indices);
/// Mean cross-entropy between `logits` [..., C] and integer `targets` [...] (same leading shape), over the
/// positions whose target is not `ignore_index`: loss = mean_i(logsumexp(logits_i) - logits_i[t_i]).
/// Stable for any finite logits. Fused backward: (softmax - onehot) / N. If no position carries a target the
/// loss is 0 with zero gradient. Throws Error on a shape mismatch or a target outside [0, C).
template <class T>
basic_tensor<T> cross_entropy(const basic_tensor<T>& logits, const index_array& targets,
                              std::int64_t ignore_index = -1);

}  // namespace xgrad
