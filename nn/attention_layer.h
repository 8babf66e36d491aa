// Attention layers: what a transformer block uses for attention. Each layer registers an AttentionLayerEntry from
// its own file (the built-in "multi_head" from nn/attention.cpp; a user's from theirs); AttentionModel builds each
// block's attention from the entry its config names. Any layer that fills an AttentionRecord when record_attention
// is set gets the trainer's saturation statistics and probe's table.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/random.h"
#include "common/registry.h"
#include "common/setting.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace xgrad::nn {

/// What an attention call recorded for saturation statistics, beside the graph: the softmax input (scaled scores,
/// -inf where masked) as a tensor whose gradient backward fills in (on a graph of autograd ops, the live scores
/// tensor kept by retain_grad), and the attention weights. Shapes [B, H, Tq, T]: every query (Tq = T) from
/// forward(), the queries at query_positions from forward_at().
struct AttentionRecord {
  Tensor scores;
  xt::xarray<float> probs;
  xt::xarray<float> q, k;  // [B, H, Tq, d_k] and [B, H, T, d_k], as they enter q·k (after any normalisation,
                           // before multipliers)
  std::vector<double> qk_spectral_norms;  // per head, AttentionLayer::qk_spectral_norms of the weights this call used
  /// Empty: row i of scores, probs and q is sequence position i. Otherwise row i is position query_positions[i].
  std::vector<std::size_t> query_positions;
};

/// One attention layer's part of a KvCache (nn/model.h): what it keeps of the `length` positions decoded so far.
/// MultiHeadAttention keeps their keys (after the scaling's q/k transform) and values; the default
/// AttentionLayer::forward_step keeps the layer's inputs and recomputes the window from them.
struct AttentionCache {
  std::size_t length = 0;  ///< positions held
  Tensor inputs;           ///< [B, length, d_model], or undefined (the default forward_step's)
  Tensor keys, values;     ///< [B, length, n_heads * d_k] each, or undefined (MultiHeadAttention's)
};

/// A block's attention: x [B, T, d_model] → [B, T, d_model].
class AttentionLayer : public Module {
 public:
  /// Registers attn_dropout (p = 0: the identity).
  AttentionLayer();
  /// Throws Error on an input of another shape.
  virtual Tensor forward(const Tensor& x) = 0;
  /// The output at the sequence positions `positions` only (sorted, distinct, each < T): x [B, T, d_model] →
  /// [B, len(positions), d_model], equal to rows `positions` of forward(x) up to float summation order. The last
  /// block calls it with the positions that carry a target, so a layer can compute its queries only there (the
  /// trainer's statistics of the last layer read only those queries). The default runs forward(x) and selects the
  /// rows, recording every query; a layer that overrides it records the queries it computed and sets
  /// last.query_positions. Throws Error for no positions, positions that are unsorted, repeated or >= T, and what
  /// forward throws.
  virtual Tensor forward_at(const Tensor& x, const std::vector<std::size_t>& positions);
  /// Incremental (causal) decoding: x [B, n, d_model] holds the layer's inputs at the n positions after the
  /// cache.length held in `cache`; returns [B, n, d_model], equal to the last n rows of forward() on the whole
  /// sequence up to float summation order, and adds the n positions to `cache`. The default keeps the inputs and
  /// runs forward_at on the whole sequence (what a layer without a cache of its own still computes correctly); a
  /// layer overrides it to keep what it needs instead (MultiHeadAttention: keys and values). Throws what
  /// forward_at throws (then `cache` is undefined: clear it).
  virtual Tensor forward_step(const Tensor& x, AttentionCache& cache);
  virtual std::size_t n_heads() const = 0;
  /// The factor between q·k of the recorded q and k and the recorded scores (before any elementwise transform), for
  /// a length-T sequence: probe's theory line (1/sqrt(d_k) for the attention of Vaswani et al. 2017, eq. 1).
  virtual double effective_multiplier(std::size_t T) const = 0;

  /// Per head, the spectral norm of the bilinear form that gives the head's scores before any per-row multiplier or
  /// elementwise transform: c · ||W_q,h W_k,h^T||_2, with W_q, W_k as the forward pass uses them and c the scaling's
  /// constant multiplier (1/sqrt(d_k) for sqrt_dk, 1 for none), by power iteration (nn/attention_stats.h). For
  /// inputs x_i (after the block's LayerNorm) it bounds |score_ij| <= norm · |x_i| |x_j| unless the scaling
  /// normalises q and k (qk_layernorm), multiplies rows (ssmax) or transforms scores (softcap). Empty (the metrics
  /// column holds NaN) for a layer without query and key projections of that form.
  virtual std::vector<double> qk_spectral_norms() const { return {}; }

  /// When true, forward() records its scores, weights, q and k, and the heads' qk_spectral_norms, in `last` (see
  /// AttentionRecord).
  bool record_attention = false;
  /// When false, a recorded call leaves last.qk_spectral_norms empty: their power iterations are most of a record's
  /// cost, and a reader that does not use them (`xgrad explain`) need not pay it.
  bool record_spectral_norms = true;
  AttentionRecord last;
  /// Per head, the largest logit (the score softmax takes: after the multipliers, bias and transform, masked entries
  /// left out; the queries forward_at computed) over the forward passes in training mode with gradients enabled since
  /// the last after_optimizer_step: [n_heads], -inf before any. Kept only while the layer's scaling acts after the
  /// optimizer step (AttentionScaling::acts_after_step, QK-Clip); empty otherwise.
  std::vector<float> step_max_logits;
  /// Called by the trainer after each training step with step_max_logits over the whole step (under data
  /// parallelism, the maximum over every process's rows): when `updated` (the optimizer applied an update), runs the
  /// scaling's after_optimizer_step on the stored W_q and W_k; then resets step_max_logits to -inf. The default (a
  /// layer whose scaling does not act after the step) does nothing.
  virtual void after_optimizer_step(bool updated);
  /// Dropout on the attention weights, after the softmax and before they multiply v (nanoGPT's attn_dropout): a
  /// layer that computes its own weights applies it there. p = 0 until the model sets its p and generator
  /// (ModelConfig::dropout); recorded weights are those before the dropout.
  std::shared_ptr<Dropout> attn_dropout;
};

/// Throws Error unless `positions` is non-empty, sorted, without repeats, and every entry is < T (the message names
/// the entry).
void check_positions(const std::vector<std::size_t>& positions, std::size_t T);

/// x [B, T, d] → [B, len(positions), d]: the rows at sequence positions `positions` (index_select along dim 1).
Tensor select_positions(const Tensor& x, const std::vector<std::size_t>& positions);

/// What an attention layer is built from.
struct AttentionLayerContext {
  std::size_t d_model = 0;
  std::size_t n_heads = 1;
  std::size_t d_k = 0;          ///< head size, never 0 here (make_attention_layer resolves d_model / n_heads)
  std::size_t max_seq_len = 0;  ///< longest sequence forward takes
  bool causal = true;
  double init_gain = 1.0;  ///< multiplies the std of the projections' LeCun init
  std::string scale;       ///< the run's scaling (nn/scaling.h), for layers that take theirs from the registry
  SettingValues settings;  ///< the layer's own settings (every declared key present) and the scaling's
};

/// A registered attention layer. Register one from its own file:
///   static const xgrad::Registration<xgrad::nn::AttentionLayerEntry> registration{make_entry()};
struct AttentionLayerEntry {
  static constexpr const char* kind = "attention layer";
  std::string name;               ///< what users type (--attention NAME); also the config.json value
  std::string description;        ///< one line: what it computes and its source
  int order = 0;                  ///< place in listings
  std::vector<Setting> settings;  ///< its own settings; keys prefixed with the name unless a standard term
  /// Builds one block's attention, drawing its initial weights from `gen`. Throws Error for a context it cannot
  /// serve, naming the setting.
  std::function<std::shared_ptr<AttentionLayer>(const AttentionLayerContext&, Generator&)> build;
  /// Optional: refuses a context the layer cannot serve before any weight is drawn (the trainer checks a run's
  /// settings with it, so the CLI exits 2). Throws std::invalid_argument naming the flags and their values.
  std::function<void(const AttentionLayerContext&)> check;
};

/// Builds the registered attention layer `name`: context.d_k 0 becomes d_model / n_heads, and the entry's settings
/// missing from context.settings get their defaults. Throws RegistryError listing the registered layers for an
/// unknown name, Error for d_k 0 with n_heads not dividing d_model or what the layer's build throws.
std::shared_ptr<AttentionLayer> make_attention_layer(const std::string& name, AttentionLayerContext context,
                                                     Generator& gen);

/// The entry's check of `context` (resolved as make_attention_layer resolves it), without building the layer.
/// Throws what make_attention_layer throws before building, and std::invalid_argument from the entry's check.
void check_attention_layer(const std::string& name, AttentionLayerContext context);

}  // namespace xgrad::nn
