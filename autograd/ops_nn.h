// Neural-network ops with fused, numerically stable forward and backward passes. Implemented in ops_nn.cpp,
// instantiated for float and double.
#pragma once

#include <cstdint>

#include "autograd/random.h"
#include "autograd/tensor.h"

namespace xgrad {

/// Softmax along `axis` (default the last; negative counts from the end), numerically stable (the max along the
/// axis is subtracted before exp). A slice whose every entry is -inf (fully masked) yields all zeros (not NaN) and
/// passes zero gradient. Throws Error on a 0-d tensor or an axis out of range.
template <class T>
basic_tensor<T> softmax(const basic_tensor<T>& a, int axis = -1);
/// log(softmax(a)) along `axis` (default the last), computed as a - max - log(sum(exp(a - max))). A fully masked
/// slice (all -inf) yields all -inf (the log of softmax's all-zero slice) and passes zero gradient. Throws as
/// softmax.
template <class T>
basic_tensor<T> log_softmax(const basic_tensor<T>& a, int axis = -1);
/// Where `mask` is true (broadcast to a's shape), the output holds `value` and passes no gradient.
template <class T>
basic_tensor<T> masked_fill(const basic_tensor<T>& a, const xt::xarray<bool>& mask, double value);
/// Layer normalisation over the last axis (Ba, Kiros & Hinton 2016, eq. 4):
/// y = (x - mean) / sqrt(var + eps) * weight + bias, with the biased variance. x: [..., D]; weight, bias: [D] or
/// undefined (then omitted). Fused backward. Throws Error on a 0-d input, an empty last axis, or a weight or bias
/// of the wrong shape.
template <class T>
basic_tensor<T> layer_norm(const basic_tensor<T>& x, const basic_tensor<T>& weight, const basic_tensor<T>& bias,
                           double eps = 1e-5);
/// Layer normalisation over the trailing axes `normalized_shape` (as torch.nn.functional.layer_norm): the mean and
/// biased variance are taken over all of them together. x: [..., *normalized_shape]; weight, bias: normalized_shape
/// or undefined. layer_norm(x, {D}, w, b) equals layer_norm(x, w, b). Throws Error unless normalized_shape is
/// non-empty, has elements and equals x's trailing axes, or on a weight or bias of another shape.
template <class T>
basic_tensor<T> layer_norm(const basic_tensor<T>& x, const shape_t& normalized_shape, const basic_tensor<T>& weight,
                           const basic_tensor<T>& bias, double eps = 1e-5);
/// RMS normalisation over the last axis (Zhang & Sennrich 2019, eq. 4): y = x / sqrt(mean(x^2) + eps) * weight.
/// No mean is subtracted and there is no bias. x: [..., D]; weight: [D] or undefined (then omitted). eps is added
/// to the mean square (default 1e-6, as T5 and LLaMA). Fused backward. Throws Error on a 0-d input, an empty last
/// axis, or a weight of the wrong shape.
template <class T>
basic_tensor<T> rms_norm(const basic_tensor<T>& x, const basic_tensor<T>& weight, double eps = 1e-6);
/// Inverted dropout (Srivastava et al. 2014, with the scaling moved to training time): in training, each element
/// is zeroed with probability p and the survivors are scaled by 1 / (1 - p), so the expectation is unchanged and
/// evaluation needs no rescaling. The mask is drawn from `gen` (one uniform draw per element, in row-major
/// order), so the result is a function of the generator's state; backward reuses the same mask. With
/// training = false or p = 0 the input itself is returned (no draw, no new node). Throws Error unless 0 <= p < 1.
template <class T>
basic_tensor<T> dropout(const basic_tensor<T>& x, double p, bool training, Generator& gen);
/// Rows of `weight` [V, D] picked by `indices` (any shape S) → [S..., D]. Throws Error naming the first index
/// outside [0, V).
template <class T>
basic_tensor<T> embedding(const basic_tensor<T>& weight, const index_array& indices);
/// How a loss over positions is reduced (torch.nn.functional's `reduction`): `none` keeps one loss per position,
/// `mean` averages over the positions that carry a target, `sum` adds them.
enum class Reduction { none, mean, sum };

/// Cross-entropy between `logits` [..., C] and integer `targets` [...] (same leading shape) at the positions whose
/// target is not `ignore_index`, against the target distribution q = (1 - eps) onehot(t) + eps / C with
/// eps = `label_smoothing` (Szegedy et al. 2016, sec. 7; as torch.nn.functional.cross_entropy):
///   loss_i = logsumexp(logits_i) - (1 - eps) logits_i[t_i] - (eps / C) sum_j logits_i[j].
/// eps = 0 is the plain cross-entropy. `reduction`: mean (default) gives a 0-d loss, mean_i(loss_i) over the N
/// counted positions; sum gives sum_i(loss_i); none gives the losses at targets' shape [...], 0 at ignored
/// positions. Stable (shifted by the row max, summed in double) for logits whose differences fit in the scalar
/// type. Fused backward: (softmax - q) times the output gradient (divided by N for mean). If no position carries a
/// target, mean and sum are 0 with zero gradient. Throws Error on a shape mismatch, a target outside [0, C), or
/// label_smoothing outside [0, 1].
template <class T>
basic_tensor<T> cross_entropy(const basic_tensor<T>& logits, const index_array& targets, std::int64_t ignore_index = -1,
                              double label_smoothing = 0.0, Reduction reduction = Reduction::mean);

/// The z-loss of `logits` [..., C] at the positions of `targets` [...] (same leading shape) that are not
/// `ignore_index`: mean_i (log Z_i)^2 with log Z_i = logsumexp(logits_i), the auxiliary loss that keeps the softmax
/// normalizer near 1 (Chowdhery et al. 2022, PaLM, section 5; Wortsman et al. 2023, section 3.2, "output logit
/// divergence"). A 0-d tensor; a constant 0 (no graph) when no position carries a target. A composite of logsumexp, mul
/// and sum, so its gradient is theirs: 2 log Z_i softmax(logits_i) / N. Throws Error on a shape mismatch or logits
/// without classes.
template <class T>
basic_tensor<T> z_loss(const basic_tensor<T>& logits, const index_array& targets, std::int64_t ignore_index = -1);

}  // namespace xgrad
