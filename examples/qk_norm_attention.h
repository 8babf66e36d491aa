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

#include <cstddef>
#include <memory>

#include "autograd/ops.h"
#include "examples/rms_norm_layer.h"
#include "nn/attention_layer.h"
#include "nn/layers.h"

namespace examples {

/// QK-norm self-attention on explicit weights. x: [B, T, d_model]; w_q, w_k, w_v, w_o: [d_model, d_model]
/// (xgrad's Linear layout, y = x W); q_norm_weight, k_norm_weight: [d_k] with d_k = d_model / n_heads, shared by the
/// heads. Per head: q = rms_norm(x W_q) * q_norm_weight, k likewise, v = x W_v; softmax(q k^T / sqrt(d_k)) v with
/// the causal mask when `causal`; heads concatenated, then W_o. Returns [B, T, d_model]. With `record` (float only),
/// the scores (softmax input, kept with retain_grad), the weights and the normalised q, k are recorded there.
/// Throws xgrad::Error naming the op if x is not 3-D, n_heads does not divide d_model, or a weight's shape is wrong.
template <class T>
xgrad::basic_tensor<T> qk_norm_attention(const xgrad::basic_tensor<T>& x, const xgrad::basic_tensor<T>& w_q,
                                         const xgrad::basic_tensor<T>& w_k, const xgrad::basic_tensor<T>& w_v,
                                         const xgrad::basic_tensor<T>& w_o, const xgrad::basic_tensor<T>& q_norm_weight,
                                         const xgrad::basic_tensor<T>& k_norm_weight, std::size_t n_heads, bool causal,
                                         double eps = 1e-6, xgrad::nn::AttentionRecord* record = nullptr);

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
