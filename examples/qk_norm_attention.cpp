// QK-norm attention: the Module that calls the function template of the header (checked in double by
// test_examples), and its registration.
#include "examples/qk_norm_attention.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "nn/attention.h"

namespace examples {

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
                           heads_, causal, q_norm->eps, record_attention ? &last : nullptr, attn_dropout.get());
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
