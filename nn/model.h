// The toy transformer the experiment trains: token + learned positional embeddings → blocks → LayerNorm → readout.
#pragma once

#include <memory>
#include <vector>

#include "nn/attention.h"

namespace xgrad::nn {

struct ModelConfig {
  std::size_t vocab_size = 0;   // input tokens and output classes
  std::size_t max_seq_len = 0;  // positions with a learned embedding
  std::size_t d_model = 64;
  std::size_t n_heads = 1;
  std::size_t d_k = 0;          // head size; 0 means d_model / n_heads
  std::size_t n_layers = 1;
  std::size_t d_ff = 0;         // MLP hidden size; 0 means 4 * d_model
  bool mlp = true;              // false: attention-only blocks
  bool layer_norm = true;       // false: no LayerNorm in the blocks nor before the readout
  bool residual = true;         // false: each sublayer's output replaces its input instead of adding to it
  bool causal = true;
  std::string scale = "sqrt_dk";         // a registered scaling (nn/scaling.h)
  std::string attention = "multi_head";  // a registered attention layer
  SettingValues settings;  // the scaling's and attention layer's own settings (defaults for missing keys)
  double emb_init_std = 1.0;    // std of the token and positional embeddings at init
  double proj_init_gain = 1.0;  // multiplies the LeCun std N(0, 1/fan_in) of the attention projections
};

/// Pre-LayerNorm block (as GPT-2; Xiong et al. 2020), its attention built from the attention-layer registry
/// (nn/attention_layer.h): x + attn(ln_1(x)), then + mlp(ln_2(x)); with layer_norm
/// off the LayerNorms are identities, with residual off the additions are dropped. x: [B, T, d_model] → same.
class TransformerBlock : public Module {
 public:
  TransformerBlock(const ModelConfig& config, Generator& gen);
  Tensor forward(const Tensor& x);
  std::shared_ptr<LayerNorm> ln_1, ln_2;  // null when config.layer_norm is false
  std::shared_ptr<AttentionLayer> attn;  // the registered layer config.attention names
  std::shared_ptr<MLP> mlp;  // null when config.mlp is false
  bool residual = true;
};

/// tokens [B, T] → logits [B, T, vocab_size]. Parameters: tok_emb.weight, pos_emb.weight, blocks.<i>.*, ln_f.*,
/// head.weight/bias. Init: embeddings N(0, emb_init_std^2), projections LeCun normal N(0, 1/fan_in) (attention
/// projections times proj_init_gain). With LayerNorm on, every q and k component then has variance ~1 at init.
/// Two models built from the same config and seed have identical weights whatever the scaling: scalings draw no
/// random numbers (ScalingEntry::build).
class AttentionModel : public Module {
 public:
  /// Throws Error on a zero size or d_model not divisible by n_heads, RegistryError on an unknown scaling or
  /// attention layer.
  AttentionModel(const ModelConfig& config, std::uint64_t seed);
  Tensor forward(const index_array& tokens);
  /// The attention layers, first block first (for saturation statistics).
  std::vector<std::shared_ptr<AttentionLayer>> attention_layers() const;
  const ModelConfig& config() const { return config_; }

 private:
  ModelConfig config_;
  std::shared_ptr<Embedding> tok_emb_, pos_emb_;
  std::shared_ptr<ModuleList<TransformerBlock>> blocks_;
  std::shared_ptr<LayerNorm> ln_f_;
  std::shared_ptr<Linear> head_;
};

}  // namespace xgrad::nn
