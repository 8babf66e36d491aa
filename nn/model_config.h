// The model's settings as a plain struct, apart from the model (nn/model.h), so that code which only reads or writes
// settings (train/config.h and everything that includes it) does not parse the engine's headers.
#pragma once

#include <cstddef>
#include <string>

#include "common/enum_names.h"
#include "common/setting.h"

namespace xgrad::nn {

/// How the model's init and readout scale with width: sp, the standard parametrization, or mup, muP's readout
/// multiplier and readout init (nn/mup.h).
enum class Parametrization { sp, mup };
/// The names of Parametrization (config.json's and --parametrization's text).
inline constexpr EnumName<Parametrization> kParametrizationNames[] = {{Parametrization::sp, "sp"},
                                                                      {Parametrization::mup, "mup"}};

/// The model's settings. The defaults here are also `xgrad train`'s (train/settings.cpp binds each flag to its member
/// here and declares this default); vocab_size and max_seq_len come from the task, `settings` from the components.
struct ModelConfig {
  std::size_t vocab_size = 0;   // input tokens and output classes
  std::size_t max_seq_len = 0;  // positions with a learned embedding
  std::size_t d_model = 64;
  std::size_t n_heads = 1;
  std::size_t d_k = 0;  // head size; 0 means d_model / n_heads
  std::size_t n_layers = 1;
  std::size_t d_ff = 0;    // MLP hidden size; 0 means 4 * d_model
  bool mlp = true;         // false: attention-only blocks
  bool layer_norm = true;  // false: no LayerNorm in the blocks nor before the readout
  bool residual = true;    // false: each sublayer's output replaces its input instead of adding to it
  bool causal = true;
  std::string scale = "sqrt_dk";         // a registered scaling (nn/scaling.h)
  std::string attention = "multi_head";  // a registered attention layer
  SettingValues settings;                // the scaling's and attention layer's own settings (defaults for missing keys)
  double emb_init_std = 1.0;             // std of the token and positional embeddings at init
  double proj_init_gain = 1.0;           // multiplies the LeCun std N(0, 1/fan_in) of the attention projections
  Parametrization parametrization = Parametrization::sp;
  std::size_t base_width = 64;       // mup: the d_model at which mup and sp coincide
  double dropout = 0.0;              // in [0, 1): the probability of every dropout site while training (0 = none)
  bool tie_word_embeddings = false;  // the readout uses tok_emb.weight (no head.weight); not with mup
  bool bias = true;                  // false: no bias in the MLP's Linears, the readout and the LayerNorms
  double layer_norm_eps = 1e-5;      // added to the variance in every LayerNorm (torch.nn.LayerNorm's eps)
};

}  // namespace xgrad::nn
