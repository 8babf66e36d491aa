// Multi-head self-attention with a run-time choice of how the attention scores are scaled.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/layers.h"

namespace xgrad::nn {

/// How q·k scores are scaled before the softmax.
enum class ScaleMode {
  none,     ///< scores = q·k (no scaling)
  sqrt_dk,  ///< scores = q·k / sqrt(d_k) (Vaswani et al. 2017, "Attention Is All You Need", eq. 1)
  dk,       ///< scores = q·k / d_k (muP, Yang et al. 2022, "Tensor Programs V", sec. 3 / App. J)
};

/// "none" | "sqrt_dk" | "dk" → ScaleMode; throws Error naming the allowed values otherwise.
ScaleMode parse_scale_mode(const std::string& name);
std::string to_string(ScaleMode mode);
/// The names accepted by parse_scale_mode, in order.
const std::vector<std::string>& scale_mode_names();
/// The multiplier applied to q·k for this mode at this head size.
double scale_factor(ScaleMode mode, std::size_t d_k);

/// softmax(q @ k^T * scale, masked) @ v. q, k, v: [B, H, T, d_k]; mask: null for none, or broadcastable to
/// [B, H, T, T], true where a query may NOT attend (filled with -inf before the softmax). A query row whose
/// every key is masked gets all-zero weights and a zero output (documented behaviour of xgrad::softmax).
/// If `probs_out` is non-null the attention weights [B, H, T, T] are copied there (beside the graph, not in it).
/// Returns [B, H, T, d_k].
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const xt::xarray<bool>* mask,
                                    double scale, xt::xarray<float>* probs_out = nullptr,
                                    xt::xarray<float>* scores_out = nullptr);

/// [T, T] boolean mask, true above the diagonal: position i may attend to j <= i only.
xt::xarray<bool> causal_mask(std::size_t T);

/// Multi-head self-attention: q, k, v = x W_q, x W_k, x W_v split into n_heads heads of d_k = d_model / n_heads,
/// attention per head, heads concatenated, then W_o. x: [B, T, d_model] → [B, T, d_model].
/// Projections have no bias; init LeCun normal N(0, 1/d_model), so for unit-variance inputs (after LayerNorm) each
/// q and k component has variance ~1 and an unscaled score q·k has standard deviation ~sqrt(d_k) — the premise of
/// Vaswani et al.'s footnote 4.
class MultiHeadAttention : public Module {
 public:
  /// Throws Error unless d_model > 0, n_heads > 0 and d_model % n_heads == 0.
  MultiHeadAttention(std::size_t d_model, std::size_t n_heads, ScaleMode scale, bool causal, Generator& gen);
  Tensor forward(const Tensor& x);

  std::size_t d_model, n_heads, d_k;
  ScaleMode scale;
  bool causal;
  std::shared_ptr<Linear> w_q, w_k, w_v, w_o;

  /// When true, forward() keeps a copy of the last scaled scores and attention weights, [B, H, T, T] each.
  bool record_attention = false;
  xt::xarray<float> last_scores, last_probs;
};

}  // namespace xgrad::nn
