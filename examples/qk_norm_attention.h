// A new layer written outside nn/: multi-head self-attention with QK-norm, RMSNorm applied per head to the queries
// and keys before their dot product. QK-norm was introduced with LayerNorm (Dehghani et al. 2023, "Scaling Vision
// Transformers to 22 Billion Parameters", sec. 2.1; that form is one of xgrad's built-in scalings); the RMSNorm-per-
// head form is the one later LLMs use (e.g. Qwen3, Gemma 3). With q and k normalised to unit RMS, |q·k| <= d_k whatever
// the scale of the input, so the softmax cannot saturate because activations grew.
//
// The pattern for a layer whose gradients should be checked: write its math once as a function template on the
// scalar type (qk_norm_attention<T> below), gradcheck that in double, and let the Module hold the float
// parameters and call the same function. The Module then needs no backward code and no test of its own
// gradients beyond "it calls the checked function".
//
// The Module is also a registered attention layer, "qk_norm" (registered in qk_norm_attention.cpp), so a build
// that links this file trains it with `--attention qk_norm` and gets the saturation statistics of its scores.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "autograd/ops.h"
#include "examples/rms_norm_layer.h"
#include "nn/attention.h"
#include "nn/attention_layer.h"
#include "nn/layers.h"

namespace examples {

/// QK-norm self-attention on explicit weights. x: [B, T, d_model]; w_q, w_k, w_v, w_o: [d_model, d_model]
/// (xgrad's Linear layout, y = x W); q_norm_weight, k_norm_weight: [d_k] with d_k = d_model / n_heads, shared by the
/// heads. Per head: q = rms_norm(x W_q) * q_norm_weight, k likewise, v = x W_v; softmax(q k^T / sqrt(d_k)) v with
/// the causal mask when `causal`; heads concatenated, then W_o. Returns [B, T, d_model]. With `record` (float only),
/// the scores (softmax input, kept with retain_grad), the weights and the normalised q, k are recorded there; with
/// `attn_dropout` (float only) the weights go through it before they multiply v (the layer's attn_dropout).
/// Throws xgrad::Error naming the op if x is not 3-D, n_heads does not divide d_model, or a weight's shape is wrong.
template <class T>
xgrad::basic_tensor<T> qk_norm_attention(const xgrad::basic_tensor<T>& x, const xgrad::basic_tensor<T>& w_q,
                                         const xgrad::basic_tensor<T>& w_k, const xgrad::basic_tensor<T>& w_v,
                                         const xgrad::basic_tensor<T>& w_o, const xgrad::basic_tensor<T>& q_norm_weight,
                                         const xgrad::basic_tensor<T>& k_norm_weight, std::size_t n_heads, bool causal,
                                         double eps = 1e-6, xgrad::nn::AttentionRecord* record = nullptr,
                                         const xgrad::nn::Dropout* attn_dropout = nullptr) {
  using xgrad::shape_str;
  if (x.dim() != 3) throw xgrad::Error("qk_norm_attention: x must be [B, T, d_model], got " + shape_str(x.shape()));
  const std::size_t D = x.size(2);
  if (n_heads == 0 || D % n_heads != 0)
    throw xgrad::Error("qk_norm_attention: n_heads (" + std::to_string(n_heads) + ") must divide d_model (" +
                       std::to_string(D) + ") of x " + shape_str(x.shape()));
  const std::size_t d_k = D / n_heads;
  for (const auto* w : {&w_q, &w_k, &w_v, &w_o})
    if (w->shape() != xgrad::shape_t{D, D})
      throw xgrad::Error("qk_norm_attention: projection weights must be [" + std::to_string(D) + ", " +
                         std::to_string(D) + "] for x " + shape_str(x.shape()) + ", got " + shape_str(w->shape()));
  for (const auto* w : {&q_norm_weight, &k_norm_weight})
    if (w->shape() != xgrad::shape_t{d_k})
      throw xgrad::Error("qk_norm_attention: norm weights must be [d_k] = [" + std::to_string(d_k) + "], got " +
                         shape_str(w->shape()));

  const auto B = static_cast<std::int64_t>(x.size(0)), T_ = static_cast<std::int64_t>(x.size(1));
  const auto H = static_cast<std::int64_t>(n_heads), Dk = static_cast<std::int64_t>(d_k);
  auto heads = [&](const xgrad::basic_tensor<T>& t) {  // [B, T, D] → [B, H, T, d_k]
    return xgrad::permute(xgrad::reshape(t, {B, T_, H, Dk}), {0, 2, 1, 3});
  };
  const auto q = xgrad::rms_norm(heads(xgrad::matmul(x, w_q)), q_norm_weight, eps);
  const auto k = xgrad::rms_norm(heads(xgrad::matmul(x, w_k)), k_norm_weight, eps);
  const auto v = heads(xgrad::matmul(x, w_v));
  // 1/sqrt(d_k) is kept: normalised q and k have unit RMS components, so q·k has the spread sqrt(d_k) that
  // Vaswani et al.'s scaling assumes.
  auto scores = xgrad::matmul(q, xgrad::transpose(k, -2, -1)) * (1.0 / std::sqrt(static_cast<double>(d_k)));
  if (causal) scores = xgrad::masked_fill(scores, xgrad::nn::causal_mask(x.size(1)), -INFINITY);
  auto probs = xgrad::softmax(scores, -1);
  if constexpr (std::is_same_v<T, float>) {
    if (record) {
      if (scores.requires_grad()) scores.retain_grad();
      record->scores = scores;
      record->probs = probs.value();
      record->q = q.value();
      record->k = k.value();
    }
    if (attn_dropout) probs = attn_dropout->forward(probs);
  }
  const auto out = xgrad::matmul(probs, v);  // [B, H, T, d_k]
  return xgrad::matmul(xgrad::reshape(xgrad::permute(out, {0, 2, 1, 3}), {B, T_, H * Dk}), w_o);
}

/// The Module around qk_norm_attention: parameters w_q.weight, w_k.weight, w_v.weight, w_o.weight ([d_model,
/// d_model], no bias, LeCun normal init as nn::MultiHeadAttention) and q_norm.weight, k_norm.weight ([d_k], init 1).
/// x: [B, T, d_model] → [B, T, d_model]. Throws xgrad::Error unless d_model > 0, n_heads > 0 and n_heads divides
/// d_model.
class QKNormAttention : public xgrad::nn::AttentionLayer {
 public:
  QKNormAttention(std::size_t d_model, std::size_t n_heads, bool causal, xgrad::Generator& gen);
  xgrad::Tensor forward(const xgrad::Tensor& x) override;
  std::size_t n_heads() const override { return heads_; }
  double effective_multiplier(std::size_t T) const override;

  std::size_t d_model, d_k;
  bool causal;
  std::shared_ptr<xgrad::nn::Linear> w_q, w_k, w_v, w_o;
  std::shared_ptr<RMSNorm> q_norm, k_norm;

 private:
  std::size_t heads_;
};

}  // namespace examples
