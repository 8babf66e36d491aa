// Multi-head self-attention with a run-time choice of how the attention scores are scaled (nn/scaling.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/attention_layer.h"
#include "nn/layers.h"
#include "nn/scaling.h"

namespace xgrad::nn {

/// softmax(q @ k^T * scale, masked) @ v. q, k, v: [B, H, T, d_k]; mask: null for none, or broadcastable to
/// [B, H, T, T], true where a query may NOT attend (filled with -inf before the softmax). A query row whose
/// every key is masked gets all-zero weights and a zero output (documented behaviour of xgrad::softmax).
/// If `record` is non-null the scores and weights are recorded there. Returns [B, H, T, d_k].
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const xt::xarray<bool>* mask,
                                    double scale, AttentionRecord* record = nullptr);

/// scaled_dot_product_attention with an additive score bias: softmax(q @ k^T * scale + bias, masked) @ v. bias:
/// broadcastable to [B, H, T, T] (e.g. [H, T, T] for ALiBi's per-head linear biases, Press et al. 2022, sec. 3, or
/// [T, T] shared by the heads); its gradient is computed when it requires one (a learned relative-position bias).
/// T = double is what a float64 gradcheck differentiates; `record` is filled for T = float only. Throws Error when
/// bias does not broadcast to the scores' shape.
template <class T>
basic_tensor<T> scaled_dot_product_attention(const basic_tensor<T>& q, const basic_tensor<T>& k,
                                             const basic_tensor<T>& v, const xt::xarray<bool>* mask, double scale,
                                             const basic_tensor<T>& bias, AttentionRecord* record = nullptr);

/// scaled_dot_product_attention with the score hooks of `scaling` (nn/scaling.h), from plain autograd ops: scores
/// = f(multiplier · r_i · q @ k^T + b), masked, softmax, @ v. q, k are taken as they enter q·k (after transform_qk; the
/// weight and q/k hooks are the caller's). The reference the fused attention of MultiHeadAttention is tested
/// against. Shapes and mask as above; throws what the ops throw on mismatched shapes.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const xt::xarray<bool>* mask,
                                    const AttentionScaling& scaling, AttentionRecord* record = nullptr);

/// Multi-head attention from plain autograd ops, on explicit weights, with every hook of `scaling`: W_q', W_k' =
/// transform_weights; q, k, v = x W_q', x W_k', x W_v viewed as [B, T, n_heads, d_k]; q, k = transform_qk; heads
/// permuted to [B, H, T, d_k]; scaled_dot_product_attention with the scaling (causal mask when `causal`); heads
/// concatenated, @ W_o (left out when W_o is undefined). x: [B, T, d_model]; W_q, W_k, W_v: [d_model, n_heads * d_k];
/// W_o: [n_heads * d_k, d_model];
/// params: the scaling's parameters in named_parameters() order. Returns [B, T, d_model]. T = float is
/// MultiHeadAttention::forward_reference; T = double is what a float64 gradcheck of a scaling differentiates.
/// Advances no state. Throws Error on mismatched shapes.
template <class T>
basic_tensor<T> multi_head_attention_reference(const basic_tensor<T>& x, const basic_tensor<T>& w_q,
                                               const basic_tensor<T>& w_k, const basic_tensor<T>& w_v,
                                               const basic_tensor<T>& w_o, const AttentionScaling& scaling,
                                               const std::vector<basic_tensor<T>>& params, std::size_t n_heads,
                                               bool causal);

/// [T, T] boolean mask, true above the diagonal: position i may attend to j <= i only.
xt::xarray<bool> causal_mask(std::size_t T);

/// The base of an attention layer that computes its own q, k and v and scales its scores with the run's scaling
/// (context.scale, nn/scaling.h), as the built-in attention does: a subclass registers its projections with
/// add_projection, and its forward computes q, k, v and returns attend(q, k, v) (or that through its own output
/// projection). attend runs the fused attention of MultiHeadAttention, so the scaling's multiplier, row
/// multipliers, score bias and score transform all apply at its speed, and fills `last` for the saturation
/// statistics when record_attention is set. Scalings that transform W_q and W_k together (sigma_reparam) are
/// refused: only the layer knows its weights' shapes. examples/downstream/multi_query_attention.cpp is one.
class ScaledAttentionLayer : public AttentionLayer {
 public:
  std::size_t n_heads() const override { return heads_; }
  /// The scaling's effective_multiplier.
  double effective_multiplier(std::size_t T) const override { return scaling->effective_multiplier(T); }

  /// Its parameters are named as this layer's own ("blocks.0.attn.qk_gain").
  std::shared_ptr<AttentionScaling> scaling;

 protected:
  /// Builds the scaling context.scale for n_heads heads of d_k (its settings from context.settings). Throws Error
  /// naming `layer` and the scaling when the scaling transforms weights, and what make_scaling throws.
  ScaledAttentionLayer(const AttentionLayerContext& context, const std::string& layer);
  /// A bias-free Linear [in, out] registered as `name`, LeCun normal init N(0, 1/in) times context.init_gain.
  std::shared_ptr<Linear> add_projection(const std::string& name, std::size_t in, std::size_t out, Generator& gen);
  /// q, k, v: [B, T, n_heads, d_k] each (a key or value head shared by the query heads expanded to n_heads) →
  /// [B, T, n_heads * d_k], the heads' outputs concatenated: the scaling's transform_qk, then per head
  /// softmax(f(c · r_i · q·k + b), causal mask when context.causal) · v. Throws Error naming the shapes otherwise.
  Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v);

  std::size_t d_model, d_k;
  bool causal;
  double init_gain;

 private:
  std::size_t heads_;
};

/// Multi-head self-attention, the attention layer "multi_head" (the default): q, k, v = x W_q, x W_k, x W_v split
/// into n_heads heads of d_k each (default d_model / n_heads; a given d_k decouples the head size from the width,
/// W_q: [d_model, n_heads * d_k]), attention per head with the scores of its scaling (nn/scaling.h), heads
/// concatenated, then W_o: [n_heads * d_k, d_model]. x: [B, T, d_model] → same. Without W_o (`out_proj` false,
/// setting attn_out_proj) the concatenated heads are the output, so n_heads * d_k must equal d_model: one layer is
/// then exactly softmax(q·kᵀ·scale)·v, as in the textbook analyses.
/// Projections have no bias; init LeCun normal N(0, 1/d_model), so for unit-variance inputs (after LayerNorm) each
/// q and k component has variance ~1 and an unscaled score q·k has standard deviation ~sqrt(d_k) — the premise of
/// Vaswani et al.'s footnote 4. The attention itself runs as one fused op over the heads in place (no permuted
/// copies); it computes what multi_head_attention_reference computes from plain autograd ops.
class MultiHeadAttention : public AttentionLayer {
 public:
  /// `scale` names a registered scaling (nn/scaling.h), built with its settings from `settings` (defaults for
  /// missing keys). Throws Error unless d_model > 0, n_heads > 0 and (d_k > 0 or d_model % n_heads == 0);
  /// RegistryError listing the registered scalings for an unknown `scale`. `max_seq_len` is the longest sequence
  /// forward takes (some scalings size their state by it); `init_gain` multiplies the std of the projections'
  /// LeCun init; d_k = 0 means d_model / n_heads. `out_proj` false leaves out W_o and throws std::invalid_argument
  /// unless n_heads * d_k == d_model.
  MultiHeadAttention(std::size_t d_model, std::size_t n_heads, const std::string& scale, bool causal, Generator& gen,
                     std::size_t max_seq_len = 16, double init_gain = 1.0, std::size_t d_k = 0,
                     const SettingValues& settings = SettingValues(), bool out_proj = true);
  /// x: [B, T, d_model] → [B, T, d_model], through the fused attention op. Throws Error on another input shape.
  Tensor forward(const Tensor& x) override;
  /// AttentionLayer::forward_at: queries (and W_o) only at `positions`; keys and values at every position. With
  /// record_attention set, `last` holds those queries' rows and last.query_positions = positions.
  Tensor forward_at(const Tensor& x, const std::vector<std::size_t>& positions) override;
  /// AttentionLayer::forward_step with a key-value cache: projects only the n new positions, appends their keys
  /// and values to cache.keys and cache.values, and attends from their queries to every cached position (the
  /// scaling's row multipliers and score bias taken at each query's position of the length-(cache.length + n)
  /// sequence, as forward() on that sequence takes them). Exact for scalings whose q/k transform acts on each
  /// position alone, as forward_at assumes. With record_attention set, `last` holds the new queries' rows.
  Tensor forward_step(const Tensor& x, AttentionCache& cache) override;
  std::size_t n_heads() const override { return heads_; }
  /// The scaling's effective_multiplier.
  double effective_multiplier(std::size_t T) const override;
  /// AttentionLayer::qk_spectral_norms: multiplier() · ||W_q',h W_k',h^T||_2 per head, W' = the scaling's
  /// transform_weights of W_q, W_k (the stored weights unless it transforms them).
  std::vector<double> qk_spectral_norms() const override;
  /// The same function from plain autograd ops (multi_head_attention_reference on this layer's weights): the
  /// reference forward() is tested against. Records nothing; advances a scaling's state as forward() does.
  Tensor forward_reference(const Tensor& x);
  /// AttentionLayer::after_optimizer_step: the scaling's after_optimizer_step on W_q, W_k (stored).
  void after_optimizer_step(bool updated) override;

  std::size_t d_model, d_k;
  std::string scale;  // the scaling's registry name
  bool causal;
  std::shared_ptr<Linear> w_q, w_k, w_v, w_o;  // w_o null without the output projection
  /// Its parameters are named as this layer's own ("blocks.0.attn.qk_gain").
  std::shared_ptr<AttentionScaling> scaling;

 private:
  std::size_t heads_;
  /// q, k after the weight and q/k hooks, v: each [B, T, n_heads * d_k]; with `query_positions`, q only at those
  /// positions: [B, Tq, n_heads * d_k].
  void project(const Tensor& x, const std::vector<std::size_t>* query_positions, Tensor& q, Tensor& k, Tensor& v);
  /// &step_max_logits when this forward pass counts toward them (the scaling acts after the step, training mode,
  /// gradients enabled); null otherwise.
  std::vector<float>* max_logits_to_track();
  /// forward(), with only the queries at `max_logit_rows` (sorted; every query when null) counted toward
  /// step_max_logits: forward_at's dropout path computes every query but counts those it returns.
  Tensor attend(const Tensor& x, const std::vector<std::size_t>* max_logit_rows);
};

}  // namespace xgrad::nn
