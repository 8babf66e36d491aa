// QK-norm attention: the function template (checked in double by test_examples) and the Module that calls it.
#include "examples/qk_norm_attention.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "nn/attention.h"

namespace examples {

template <class T>
xgrad::basic_tensor<T> qk_norm_attention(const xgrad::basic_tensor<T>& x, const xgrad::basic_tensor<T>& w_q,
                                         const xgrad::basic_tensor<T>& w_k, const xgrad::basic_tensor<T>& w_v,
                                         const xgrad::basic_tensor<T>& w_o, const xgrad::basic_tensor<T>& q_norm_weight,
                                         const xgrad::basic_tensor<T>& k_norm_weight, std::size_t n_heads, bool causal,
                                         double eps, xgrad::nn::AttentionRecord* record) {
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
  const auto probs = xgrad::softmax(scores, -1);
  if constexpr (std::is_same_v<T, float>) {
    if (record) {
      if (scores.requires_grad()) scores.retain_grad();
      record->scores = scores;
      record->probs = probs.value();
      record->q = q.value();
      record->k = k.value();
    }
  }
  const auto out = xgrad::matmul(probs, v);  // [B, H, T, d_k]
  return xgrad::matmul(xgrad::reshape(xgrad::permute(out, {0, 2, 1, 3}), {B, T_, H * Dk}), w_o);
}

template xgrad::basic_tensor<float> qk_norm_attention(
    const xgrad::basic_tensor<float>&, const xgrad::basic_tensor<float>&, const xgrad::basic_tensor<float>&,
    const xgrad::basic_tensor<float>&, const xgrad::basic_tensor<float>&, const xgrad::basic_tensor<float>&,
    const xgrad::basic_tensor<float>&, std::size_t, bool, double, xgrad::nn::AttentionRecord*);
template xgrad::basic_tensor<double> qk_norm_attention(
    const xgrad::basic_tensor<double>&, const xgrad::basic_tensor<double>&, const xgrad::basic_tensor<double>&,
    const xgrad::basic_tensor<double>&, const xgrad::basic_tensor<double>&, const xgrad::basic_tensor<double>&,
    const xgrad::basic_tensor<double>&, std::size_t, bool, double, xgrad::nn::AttentionRecord*);

QKNormAttention::QKNormAttention(std::size_t d_model_, std::size_t n_heads_, bool causal_, xgrad::Generator& gen)
    : d_model(d_model_), d_k(0), causal(causal_), heads_(n_heads_) {
  const std::size_t n_heads = heads_;
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

xgrad::Tensor QKNormAttention::forward(const xgrad::Tensor& x) {
  // The norms are applied inside the checked function through their weights; both were built with one eps.
  return qk_norm_attention(x, w_q->weight, w_k->weight, w_v->weight, w_o->weight, q_norm->weight, k_norm->weight,
                           heads_, causal, q_norm->eps, record_attention ? &last : nullptr);
}

double QKNormAttention::effective_multiplier(std::size_t) const { return 1.0 / std::sqrt(static_cast<double>(d_k)); }

namespace {

// The layer in xgrad's attention-layer registry: `--attention qk_norm`. It keeps its own 1/sqrt(d_k) and its own
// projections (d_k = d_model / n_heads, LeCun init), so it refuses settings it would silently ignore.
xgrad::nn::AttentionLayerEntry make_entry() {
  xgrad::nn::AttentionLayerEntry e;
  e.name = "qk_norm";
  e.description =
      "multi-head attention with RMSNorm on each head's q and k, scores / sqrt(d_k) (QK-norm: Dehghani et al. 2023, "
      "sec. 2.1, in its RMSNorm form)";
  e.order = 100;
  e.build = [](const xgrad::nn::AttentionLayerContext& c, xgrad::Generator& gen) {
    if (c.d_k * c.n_heads != c.d_model)
      throw xgrad::Error("--attention qk_norm: d_k must be d_model / n_heads (" + std::to_string(c.d_model) + " / " +
                         std::to_string(c.n_heads) + "), got " + std::to_string(c.d_k));
    if (c.scale != "sqrt_dk")
      throw xgrad::Error("--attention qk_norm scales its scores by 1/sqrt(d_k) itself: --scale must be sqrt_dk, got " +
                         c.scale);
    if (c.init_gain != 1.0) throw xgrad::Error("--attention qk_norm: --proj-init-gain must be 1");
    return std::make_shared<QKNormAttention>(c.d_model, c.n_heads, c.causal, gen);
  };
  return e;
}

const xgrad::Registration<xgrad::nn::AttentionLayerEntry> registration{make_entry()};

}  // namespace

}  // namespace examples
