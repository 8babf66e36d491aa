// A model configuration of given sizes for the tests that build an nn::AttentionModel directly.
#pragma once

#include <cstddef>
#include <tuple>

#include "nn/model.h"

namespace xgrad::testing {

/// These sizes, every other field at its default (pre-LN, causal, sqrt_dk, GELU MLP with d_ff = 4 d_model).
inline nn::ModelConfig model_config(std::size_t vocab_size, std::size_t max_seq_len, std::size_t d_model,
                                    std::size_t n_heads, std::size_t n_layers = 1) {
  nn::ModelConfig c;
  std::tie(c.vocab_size, c.max_seq_len, c.d_model, c.n_heads, c.n_layers) =
      std::tie(vocab_size, max_seq_len, d_model, n_heads, n_layers);
  return c;
}

}  // namespace xgrad::testing
