// Neural-network ops with fused, numerically stable forward and backward passes. Implemented in ops_nn.cpp, instantiated for float and double.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/tensor.h"

namespace xgrad {

/// Softmax over the last axis, numerically stable (the row max is subtracted before exp).
/// A row whose every entry is -inf (fully masked) yields all zeros (not NaN) and passes zero gradient.
template <class T> basic_tensor<T> softmax(const basic_tensor<T>& a);
/// log(softmax(a)) over the last axis, computed as a - max - log(sum(exp(a - max))). A fully masked row (all
/// -inf) yields all -inf (the log of softmax's all-zero row) and passes zero gradient.
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
/// Stable (shifted by the row max, summed in double) for logits whose differences fit in the scalar type.
/// Fused backward: (softmax - onehot) / N. If no position carries a target the loss is 0 with zero gradient.
/// Throws Error on a shape mismatch or a target outside [0, C).
template <class T>
basic_tensor<T> cross_entropy(const basic_tensor<T>& logits, const index_array& targets,
                              std::int64_t ignore_index = -1);

}  // namespace xgrad
