#include "nn/attention.h"

#include <algorithm>
#include <cmath>

namespace xgrad::nn {

const std::vector<std::string>& scale_mode_names() {
  static const std::vector<std::string> names{"none", "sqrt_dk", "dk", "qk_layernorm", "learned"};
  return names;
}

ScaleMode parse_scale_mode(const std::string& name) {
  if (name == "none") return ScaleMode::none;
  if (name == "sqrt_dk") return ScaleMode::sqrt_dk;
  if (name == "dk") return ScaleMode::dk;
  if (name == "qk_layernorm") return ScaleMode::qk_layernorm;
  if (name == "learned") return ScaleMode::learned;
  throw Error("scale mode '" + name + "' is unknown (allowed: none, sqrt_dk, dk, qk_layernorm, learned)");
}

std::string to_string(ScaleMode mode) {
  switch (mode) {
    case ScaleMode::none: return "none";
    case ScaleMode::sqrt_dk: return "sqrt_dk";
    case ScaleMode::dk: return "dk";
    case ScaleMode::qk_layernorm: return "qk_layernorm";
    case ScaleMode::learned: return "learned";
  }
  return "?";
}

double scale_factor(ScaleMode mode, std::size_t d_k) {
  switch (mode) {
    case ScaleMode::none: return 1.0;
    case ScaleMode::sqrt_dk: return 1.0 / std::sqrt(static_cast<double>(d_k));
    case ScaleMode::dk: return 1.0 / static_cast<double>(d_k);
    case ScaleMode::qk_layernorm: return 1.0 / std::sqrt(static_cast<double>(d_k));
    case ScaleMode::learned: return 1.0;
  }
  return 1.0;
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const xt::xarray<bool>* mask,
                                    double scale, AttentionRecord* record) {
  Tensor scores = matmul(q, transpose(k, -2, -1));
  if (scale != 1.0) scores = scores * scale;
  if (mask) scores = masked_fill(scores, *mask, -INFINITY);
  Tensor probs = softmax(scores);
  if (record) {
    if (scores.requires_grad()) scores.retain_grad();
    record->scores = scores;
    record->probs = probs.value();
  }
  return matmul(probs, v);
}

xt::xarray<bool> causal_mask(std::size_t T) {
  xt::xarray<bool> m = xt::xarray<bool>::from_shape({T, T});
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t j = 0; j < T; ++j) m(i, j) = j > i;
  return m;
}

MultiHeadAttention::MultiHeadAttention(std::size_t d_model_, std::size_t n_heads_, ScaleMode scale_, bool causal_,
                                       Generator& gen, std::size_t max_seq_len, double init_gain, std::size_t d_k_)
    : d_model(d_model_), n_heads(n_heads_), d_k(d_k_), scale(scale_), causal(causal_) {
  if (d_model == 0 || n_heads == 0 || (d_k == 0 && d_model % n_heads != 0))
    throw Error("MultiHeadAttention: d_model (" + std::to_string(d_model) + ") must be a positive multiple of n_heads (" +
                std::to_string(n_heads) + ") unless d_k is given");
  if (d_k == 0) d_k = d_model / n_heads;
  const std::size_t inner = n_heads * d_k;
  w_q = register_module("w_q", std::make_shared<Linear>(d_model, inner, false, gen));
  w_k = register_module("w_k", std::make_shared<Linear>(d_model, inner, false, gen));
  w_v = register_module("w_v", std::make_shared<Linear>(d_model, inner, false, gen));
  w_o = register_module("w_o", std::make_shared<Linear>(inner, d_model, false, gen));
  if (init_gain != 1.0)
    for (auto* w : {&w_q->weight, &w_k->weight, &w_v->weight, &w_o->weight}) w->mutable_value() *= static_cast<float>(init_gain);
  if (scale == ScaleMode::qk_layernorm) {
    q_norm = register_module("q_norm", std::make_shared<LayerNorm>(d_k));
    k_norm = register_module("k_norm", std::make_shared<LayerNorm>(d_k));
  }
  if (scale == ScaleMode::learned) {
    const double T = static_cast<double>(std::max<std::size_t>(max_seq_len, 2));
    qk_gain = register_parameter("qk_gain", full<float>({1}, std::log2(T * T - T)));
  }
}

Tensor MultiHeadAttention::forward(const Tensor& x) {
  if (x.dim() != 3 || x.size(2) != d_model)
    throw Error("MultiHeadAttention: input must be [B, T, " + std::to_string(d_model) + "], got " +
                shape_str(x.shape()));
  const auto B = static_cast<std::int64_t>(x.size(0)), T = static_cast<std::int64_t>(x.size(1));
  const auto H = static_cast<std::int64_t>(n_heads), D = static_cast<std::int64_t>(d_k);
  auto heads = [&](const Tensor& t) { return permute(reshape(t, {B, T, H, D}), {0, 2, 1, 3}); };  // [B, H, T, d_k]
  Tensor q = heads(w_q->forward(x)), k = heads(w_k->forward(x)), v = heads(w_v->forward(x));
  if (scale == ScaleMode::qk_layernorm) {
    q = q_norm->forward(q);
    k = k_norm->forward(k);
  } else if (scale == ScaleMode::learned) {
    // q/|q| scaled by the learned temperature g, so (g q̂)·k̂ = g cos(q, k). eps keeps a zero vector finite.
    auto unit = [](const Tensor& t) { return t / sqrt(sum(t * t, {-1}, true) + 1e-12); };
    q = unit(q) * qk_gain;
    k = unit(k);
  }
  if (record_attention) {
    last.q = q.value();
    last.k = k.value();
  }
  const xt::xarray<bool> mask = causal_mask(static_cast<std::size_t>(T));
  Tensor out = scaled_dot_product_attention(q, k, v, causal ? &mask : nullptr, scale_factor(scale, d_k),
                                            record_attention ? &last : nullptr);
  out = reshape(permute(out, {0, 2, 1, 3}), {B, T, H * D});
  return w_o->forward(out);
}

}  // namespace xgrad::nn
