// QK-norm attention: the function template (checked in double by test_examples) and the Module that calls it.
#include "examples/qk_norm_attention.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "nn/attention.h"

namespace examples {

template <class T>
xgrad::basic_tensor<T> qk_norm_attention(const xgrad::basic_tensor<T>& x, const xgrad::basic_tensor<T>& w_q,
                                         const xgrad::basic_tensor<T>& w_k, const xgrad::basic_tensor<T>& w_v,
                                         const xgrad::basic_tensor<T>& w_o, const xgrad::basic_tensor<T>& q_norm_weight,
                                         const xgrad::basic_tensor<T>& k_norm_weight, std::size_t n_heads, bool causal,
                                         double eps) {
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
  const auto out = xgrad::matmul(xgrad::softmax(scores, -1), v);  // [B, H, T, d_k]
  return xgrad::matmul(xgrad::reshape(xgrad::permute(out, {0, 2, 1, 3}), {B, T_, H * Dk}), w_o);
}

template xgrad::basic_tensor<float> qk_norm_attention(
    const xgrad::basic_tensor<float>&, const xgrad::basic_tensor<float>&, const xgrad::basic_tensor<float>&,
    const xgrad::basic_tensor<float>&, const xgrad::basic_tensor<float>&, const xgrad::basic_tensor<float>&,
    const xgrad::basic_tensor<float>&, std::size_t, bool, double);
template xgrad::basic_tensor<double> qk_norm_attention(
    const xgrad::basic_tensor<double>&, const xgrad::basic_tensor<double>&, const xgrad::basic_tensor<double>&,
    const xgrad::basic_tensor<double>&, const xgrad::basic_tensor<double>&, const xgrad::basic_tensor<double>&,
    const xgrad::basic_tensor<double>&, std::size_t, bool, double);

QKNormAttention::QKNormAttention(std::size_t d_model_, std::size_t n_heads_, bool causal_, xgrad::Generator& gen)
    : d_model(d_model_), n_heads(n_heads_), d_k(0), causal(causal_) {
  if (d_model == 0 || n_heads == 0 || d_model % n_heads != 0)
    throw xgrad::Error("QKNormAttention: d_model (" + std::to_string(d_model) +
                       ") must be a positive multiple of n_heads (" + std::to_string(n_heads) + ")");
  d_k = d_model / n_heads;
  using xgrad::nn::Linear;
  w_q = register_module("w_q", std::make_shared<Linear>(d_model, d_model, false, gen));
  w_k = register_module("w_k", std::make_shared<Linear>(d_model, d_model, false, gen));
  w_v = register_module("w_v", std::make_shared<Linear>(d_model, d_model, false, gen));
  w_o = register_module("w_o", std::make_shared<Linear>(d_model, d_model, false, gen));
  q_norm = register_module("q_norm", std::make_shared<RMSNorm>(d_k));
  k_norm = register_module("k_norm", std::make_shared<RMSNorm>(d_k));
}

xgrad::Tensor QKNormAttention::forward(const xgrad::Tensor& x) const {
  // The norms are applied inside the checked function through their weights; both were built with one eps.
  return qk_norm_attention(x, w_q->weight, w_k->weight, w_v->weight, w_o->weight, q_norm->weight, k_norm->weight,
                           n_heads, causal, q_norm->eps);
}

}  // namespace examples
