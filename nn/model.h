// The toy transformer the experiment trains: token + learned positional embeddings → blocks → LayerNorm → readout.
#pragma once

#include <memory>
#include <vector>

#include "nn/attention.h"
#include "nn/model_config.h"

namespace xgrad::nn {

/// Pre-LayerNorm block (as GPT-2; Xiong et al. 2020), its attention built from the attention-layer registry
/// (nn/attention_layer.h): x + attn(ln_1(x)), then + mlp(ln_2(x)); with layer_norm
/// off the LayerNorms are identities, with residual off the additions are dropped. x: [B, T, d_model] → same.
/// While training with config.dropout > 0 (as nanoGPT's Block), each sublayer's output is dropped out before the
/// addition (resid_dropout) and the attention weights too (AttentionLayer::attn_dropout); forward_step never drops.
class TransformerBlock : public Module {
 public:
  /// Weights are drawn from `gen`; the dropout masks from `dropout_generator` (the model's, shared by its sites).
  TransformerBlock(const ModelConfig& config, Generator& gen, std::shared_ptr<Generator> dropout_generator = nullptr);
  /// x [B, T, d_model] → [B, T, d_model].
  Tensor forward(const Tensor& x);
  /// The output at sequence positions `positions` only (sorted, distinct, < T): [B, len(positions), d_model].
  /// Attention reads every position's keys and values (AttentionLayer::forward_at); the residual, the MLP and its
  /// LayerNorm act on each row alone, so they run on the selected rows only.
  Tensor forward_at(const Tensor& x, const std::vector<std::size_t>& positions);
  /// Incremental decoding: x [B, n, d_model] at the n positions after those in `cache` → [B, n, d_model]
  /// (AttentionLayer::forward_step; the residual and the MLP act on each row alone).
  Tensor forward_step(const Tensor& x, AttentionCache& cache);
  std::shared_ptr<LayerNorm> ln_1, ln_2;   // null when config.layer_norm is false
  std::shared_ptr<AttentionLayer> attn;    // the registered layer config.attention names
  std::shared_ptr<MLP> mlp;                // null when config.mlp is false
  std::shared_ptr<Dropout> resid_dropout;  // on the attention's and the MLP's outputs
  bool residual = true;

 private:
  // h, then + mlp(ln_2(h)) (without the residual: mlp(ln_2(h))); h itself without an MLP. `drop`: the MLP's output
  // goes through resid_dropout.
  Tensor mlp_sublayer(const Tensor& h, bool drop);
};

/// What an AttentionModel keeps of the positions it has decoded so far (AttentionModel::forward_step): one
/// AttentionCache per block, first block first. Empty when built or cleared.
struct KvCache {
  std::vector<AttentionCache> layers;
  /// Positions held (0 when empty).
  std::size_t length() const { return layers.empty() ? 0 : layers.front().length; }
  void clear() { layers.clear(); }
};

/// tokens [B, T] → logits [B, T, vocab_size], or only the rows that carry a target (forward(tokens, positions)).
/// tokens may also be [B, T, S]: each position's input is then the sum of its S token embeddings (plus its
/// position's), as kv_recall's `sum` encoding (key + value) gives them. Parameters: tok_emb.weight, pos_emb.weight,
/// blocks.<i>.*, ln_f.*, head.weight/bias. Init: embeddings N(0, emb_init_std^2), projections LeCun normal N(0,
/// 1/fan_in) (attention projections times proj_init_gain). With LayerNorm on, every q and k component then has variance
/// ~1 at init. Two models built from the same config and seed have identical weights whatever the scaling: scalings
/// draw no random numbers (ScalingEntry::build). Under parametrization "mup" (nn/mup.h) the readout weight's init std
/// is multiplied by sqrt(d_model / base_width) after the same draws, and the readout multiplies its input by base_width
/// / d_model; every other weight is drawn as under "sp".
///
/// tie_word_embeddings (as Hugging Face's config; Press & Wolf 2017): the readout is h @ tok_emb.weight^T (+
/// head.bias), one tensor for both uses, so there is no head.weight and the table's gradient is the sum of both uses'
/// gradients. The table keeps its embedding init N(0, emb_init_std^2); the other weights are the untied model's of the
/// same seed (the readout weight was the last draw). bias false (nanoGPT's GPTConfig.bias): no head.bias, no MLP biases
/// and LayerNorms without a bias (the attention projections have none either way; a scaling's own LayerNorms, as
/// qk_layernorm's, are the scaling's and keep theirs).
/// Dropout (config.dropout > 0, while training; nanoGPT's GPT): on the sum of token and position embeddings, on the
/// attention weights and on each sublayer's output before its residual addition (TransformerBlock). Its masks are
/// drawn from one generator, Generator(seed, kDropoutStream) when built; set_dropout_generator replaces it. In eval
/// mode, with dropout 0 and in forward_step nothing is dropped and no mask is drawn.
class AttentionModel : public Module {
 public:
  /// The stream of Generator(seed, stream, index) the dropout masks are drawn from ("drop").
  static constexpr std::uint64_t kDropoutStream = 0x64726f70;
  /// Throws Error on a zero size or d_model not divisible by n_heads, tie_word_embeddings under parametrization mup
  /// (its readout has an init and a multiplier of its own), RegistryError on an unknown scaling or attention layer.
  AttentionModel(const ModelConfig& config, std::uint64_t seed);
  /// tokens [B, T] or [B, T, S] → logits [B, T, vocab_size] at every position (evaluation per position, probes).
  /// Throws Error for another rank or T above max_seq_len.
  Tensor forward(const index_array& tokens);
  /// The logits at the flat positions `positions` [N] (b * T + t, each in [0, B * T)) only: [N, vocab_size]. The
  /// last block computes only the sequence positions t that some row needs (its queries, residual and MLP), and the
  /// final LayerNorm and the readout run on those N rows, so a loss that needs one position per sequence pays for
  /// about one. Row i equals forward(tokens)[b, t] up to float summation order. Throws Error for a position outside
  /// [0, B * T) and what forward throws.
  Tensor forward(const index_array& tokens, const index_array& positions);
  /// Incremental decoding of a causal model: tokens [B, n] at positions cache.length() .. cache.length() + n - 1 →
  /// logits [B, n, vocab_size] there, equal to the last n rows of forward() on the whole sequence so far up to float
  /// summation order; the n positions are added to `cache` (keys and values: each position's are computed once).
  /// Call it first with the prompt, then with each new token. Throws Error for a model that is not causal (a
  /// position's keys would change with the positions after it), tokens that are not [B, n] with n >= 1 and
  /// cache.length() + n above max_seq_len (positions past the learned table;
  /// slide the window and start a new cache instead); after a throw from a layer the cache is undefined: clear it.
  Tensor forward_step(const index_array& tokens, KvCache& cache);
  /// The last block's output, before the final LayerNorm: tokens [B, T] or [B, T, S] → [B, T, d_model].
  Tensor hidden(const index_array& tokens);
  /// hidden(tokens) at sequence positions `positions` only (sorted, distinct, < T): [B, len(positions), d_model].
  /// The blocks before the last run in full; the last computes only those rows (TransformerBlock::forward_at).
  Tensor hidden_at(const index_array& tokens, const std::vector<std::size_t>& positions);
  /// Final LayerNorm (when on) and readout (head, or tok_emb.weight^T when tied): [..., d_model] → [..., vocab_size].
  Tensor readout(const Tensor& h);
  /// The attention layers, first block first (for saturation statistics).
  std::vector<std::shared_ptr<AttentionLayer>> attention_layers() const;
  const ModelConfig& config() const { return config_; }
  /// What the readout multiplies its input by: 1 under sp, base_width / d_model under mup (nn/mup.h).
  double readout_multiplier() const { return readout_multiplier_; }
  /// The dropout masks of the following forward passes are drawn from `gen` (the trainer sets one per step, so the
  /// masks of a step depend on the seed and the step alone).
  void set_dropout_generator(const Generator& gen) { *dropout_generator_ = gen; }

 private:
  // hidden (select false) or hidden_at (select true).
  Tensor hidden_at(const index_array& tokens, const std::vector<std::size_t>& positions, bool select);
  ModelConfig config_;
  std::shared_ptr<Embedding> tok_emb_, pos_emb_;
  std::shared_ptr<ModuleList<TransformerBlock>> blocks_;
  std::shared_ptr<LayerNorm> ln_f_;
  std::shared_ptr<Linear> head_;  // null when tied: the readout is tok_emb_->weight^T and head_bias_
  Tensor head_bias_;              // [vocab_size], the tied readout's bias (undefined without one)
  std::shared_ptr<Generator> dropout_generator_;
  std::shared_ptr<Dropout> drop_;  // on the embeddings' sum
  double readout_multiplier_ = 1.0;
};

/// A batch's logits and cross-entropy, computed only at the positions that carry a target. A batch with a target at
/// no position or at every one gets the full readout instead: logits [B, T, vocab_size], targets [B, T] (loss 0 for
/// no target).
struct TargetLoss {
  Tensor logits;        ///< [N, vocab_size]: the rows of the N positions whose target is not -1, row-major order
  index_array targets;  ///< [N]: their targets
  Tensor loss;          ///< 0-d: mean cross-entropy over the N rows, nats
};

/// The flat positions b * T + t of targets [B, T] that carry a target (not -1, the ignore index), in row-major
/// order: [N].
index_array target_positions(const index_array& targets);

/// `model` on inputs [B, T] (or [B, T, S]) with targets [B, T] (-1: no loss there): the readout and cross_entropy at
/// the target positions only. Loss and gradients equal cross_entropy(model.forward(inputs), targets) up to float
/// summation order (tests/test_readout.cpp). Throws Error when targets is not [B, T] of the inputs, and what
/// forward and cross_entropy throw (a target outside [0, vocab_size) other than -1).
TargetLoss loss_at_targets(AttentionModel& model, const index_array& inputs, const index_array& targets);

}  // namespace xgrad::nn
