// Multi-head self-attention with a run-time choice of how the attention scores are scaled.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/layers.h"

namespace xgrad::nn {

/// How q·k scores are scaled before the softmax.
enum class ScaleMode {
  none,          ///< scores = q·k (no scaling)
  sqrt_dk,       ///< scores = q·k / sqrt(d_k) (Vaswani et al. 2017, "Attention Is All You Need", eq. 1)
  dk,            ///< scores = q·k / d_k (muP: Yang et al. 2022, "Tensor Programs V", sec. 3 and App. J)
  qk_layernorm,  ///< scores = LN(q)·LN(k) / sqrt(d_k), LayerNorm over d_k with learned weight and bias shared by the
                 ///< heads (Dehghani et al. 2023, "Scaling Vision Transformers to 22 Billion Parameters", sec. 2.1)
  learned,       ///< scores = g · (q/|q|)·(k/|k|): unit-normalised q and k times a learned scalar temperature g,
                 ///< initialised to log2(T^2 - T) for T = max_seq_len (QKNorm: Henry et al. 2020, sec. 3, eq. 5)
};

/// "none" | "sqrt_dk" | "dk" | "qk_layernorm" | "learned" → ScaleMode; throws Error naming the allowed values.
ScaleMode parse_scale_mode(const std::string& name);
std::string to_string(ScaleMode mode);
/// The names accepted by parse_scale_mode, in order.
const std::vector<std::string>& scale_mode_names();
/// The constant multiplier applied to q·k for this mode at this head size (1/sqrt(d_k) for qk_layernorm; 1 for
/// learned, whose temperature is a parameter).
double scale_factor(ScaleMode mode, std::size_t d_k);

/// What an attention call recorded for saturation statistics, beside the graph: the softmax input (scaled scores,
/// -inf where masked) as a tensor whose gradient backward fills in (on scaled_dot_product_attention's graph it is the
/// live scores tensor, kept by retain_grad), and the attention weights. Shapes [B, H, T, T].
struct AttentionRecord {
  Tensor scores;
  xt::xarray<float> probs;
  xt::xarray<float> q, k;  // [B, H, T, d_k], as they enter q·k (after the mode's normalisation, before the scale)
};

/// softmax(q @ k^T * scale, masked) @ v. q, k, v: [B, H, T, d_k]; mask: null for none, or broadcastable to
/// [B, H, T, T], true where a query may NOT attend (filled with -inf before the softmax). A query row whose
/// every key is masked gets all-zero weights and a zero output (documented behaviour of xgrad::softmax).
/// If `record` is non-null the scores and weights are recorded there. Returns [B, H, T, d_k].
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const xt::xarray<bool>* mask,
                                    double scale, AttentionRecord* record = nullptr);

/// [T, T] boolean mask, true above the diagonal: position i may attend to j <= i only.
xt::xarray<bool> causal_mask(std::size_t T);

/// Multi-head self-attention: q, k, v = x W_q, x W_k, x W_v split into n_heads heads of d_k each (default
/// d_model / n_heads; a given d_k decouples the head size from the width, W_q: [d_model, n_heads * d_k]),
/// attention per head, heads concatenated, then W_o: [n_heads * d_k, d_model]. x: [B, T, d_model] → same.
/// Projections have no bias; init LeCun normal N(0, 1/d_model), so for unit-variance inputs (after LayerNorm) each
/// q and k component has variance ~1 and an unscaled score q·k has standard deviation ~sqrt(d_k) — the premise of
/// Vaswani et al.'s footnote 4. The attention itself runs as one fused op over the heads in place (no permuted
/// copies); it computes what scaled_dot_product_attention computes on the heads permuted to [B, H, T, d_k].
class MultiHeadAttention : public Module {
 public:
  /// Throws Error unless d_model > 0, n_heads > 0 and (d_k > 0 or d_model % n_heads == 0). `max_seq_len` sets the
  /// initial temperature of the learned mode; `init_gain` multiplies the std of the projections' LeCun init;
  /// d_k = 0 means d_model / n_heads.
  MultiHeadAttention(std::size_t d_model, std::size_t n_heads, ScaleMode scale, bool causal, Generator& gen,
                     std::size_t max_seq_len = 16, double init_gain = 1.0, std::size_t d_k = 0);
  Tensor forward(const Tensor& x);

  std::size_t d_model, n_heads, d_k;
  ScaleMode scale;
  bool causal;
  std::shared_ptr<Linear> w_q, w_k, w_v, w_o;
  std::shared_ptr<LayerNorm> q_norm, k_norm;  // qk_layernorm only, over d_k
  Tensor qk_gain;                             // learned only, shape [1]

  /// When true, forward() records its scores and weights in `last` (see AttentionRecord).
  bool record_attention = false;
  AttentionRecord last;
};

}  // namespace xgrad::nn
