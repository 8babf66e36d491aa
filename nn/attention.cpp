#include "nn/attention.h"

#include <cmath>

namespace xgrad::nn {

const std::vector<std::string>& scale_mode_names() {
  static const std::vector<std::string> names{"none", "sqrt_dk", "dk"};
  return names;
}

ScaleMode parse_scale_mode(const std::string& name) {
  if (name == "none") return ScaleMode::none;
  if (name == "sqrt_dk") return ScaleMode::sqrt_dk;
  if (name == "dk") return ScaleMode::dk;
  throw Error("scale mode '" + name + "' is unknown (allowed: none, sqrt_dk, dk)");
}

std::string to_string(ScaleMode mode) {
  switch (mode) {
    case ScaleMode::none: return "none";
    case ScaleMode::sqrt_dk: return "sqrt_dk";
    case ScaleMode::dk: return "dk";
  }
  return "?";
}

double scale_factor(ScaleMode mode, std::size_t d_k) {
  switch (mode) {
    case ScaleMode::none: return 1.0;
    case ScaleMode::sqrt_dk: return 1.0 / std::sqrt(static_cast<double>(d_k));
    case ScaleMode::dk: return 1.0 / static_cast<double>(d_k);
  }
  return 1.0;
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const xt::xarray<bool>* mask,
                                    double scale, xt::xarray<float>* probs_out, xt::xarray<float>* scores_out) {
  Tensor scores = matmul(q, transpose(k, -2, -1));
  if (scale != 1.0) scores = scores * scale;
  if (mask) scores = masked_fill(scores, *mask, -INFINITY);
  if (scores_out) *scores_out = scores.value();
  Tensor probs = softmax(scores);
  if (probs_out) *probs_out = probs.value();
  return matmul(probs, v);
}

xt::xarray<bool> causal_mask(std::size_t T) {
  xt::xarray<bool> m = xt::xarray<bool>::from_shape({T, T});
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t j = 0; j < T; ++j) m(i, j) = j > i;
  return m;
}

MultiHeadAttention::MultiHeadAttention(std::size_t d_model_, std::size_t n_heads_, ScaleMode scale_, bool causal_,
                                       Generator& gen)
    : d_model(d_model_), n_heads(n_heads_), d_k(0), scale(scale_), causal(causal_) {
  if (d_model == 0 || n_heads == 0 || d_model % n_heads != 0)
    throw Error("MultiHeadAttention: d_model (" + std::to_string(d_model) + ") must be a positive multiple of n_heads (" +
                std::to_string(n_heads) + ")");
  d_k = d_model / n_heads;
  w_q = register_module("w_q", std::make_shared<Linear>(d_model, d_model, false, gen));
  w_k = register_module("w_k", std::make_shared<Linear>(d_model, d_model, false, gen));
  w_v = register_module("w_v", std::make_shared<Linear>(d_model, d_model, false, gen));
  w_o = register_module("w_o", std::make_shared<Linear>(d_model, d_model, false, gen));
}

Tensor MultiHeadAttention::forward(const Tensor& x) {
  if (x.dim() != 3 || x.size(2) != d_model)
    throw Error("MultiHeadAttention: input must be [B, T, " + std::to_string(d_model) + "], got " +
                shape_str(x.shape()));
  const auto B = static_cast<std::int64_t>(x.size(0)), T = static_cast<std::int64_t>(x.size(1));
  const auto H = static_cast<std::int64_t>(n_heads), D = static_cast<std::int64_t>(d_k);
  auto heads = [&](const Tensor& t) { return permute(reshape(t, {B, T, H, D}), {0, 2, 1, 3}); };  // [B, H, T, d_k]
  Tensor q = heads(w_q->forward(x)), k = heads(w_k->forward(x)), v = heads(w_v->forward(x));
  const xt::xarray<bool> mask = causal_mask(static_cast<std::size_t>(T));
  Tensor out = scaled_dot_product_attention(q, k, v, causal ? &mask : nullptr, scale_factor(scale, d_k),
                                            record_attention ? &last_probs : nullptr,
                                            record_attention ? &last_scores : nullptr);
  out = reshape(permute(out, {0, 2, 1, 3}), {B, T, H * D});
  return w_o->forward(out);
}

}  // namespace xgrad::nn
