// Basic layers. Shapes use B = batch, T = sequence length, and the feature sizes named in each constructor.
#pragma once

#include <cstdint>
#include <memory>

#include "autograd/ops.h"
#include "nn/init.h"
#include "nn/module.h"

namespace xgrad::nn {

/// y = x @ weight + bias. weight is stored [in_features, out_features] (the transpose of PyTorch's layout, so the
/// forward is one GEMM without a transpose); bias [out_features]. x: [..., in_features] → [..., out_features].
/// Init: weight LeCun normal N(0, 1/in_features), bias 0.
class Linear : public Module {
 public:
  Linear(std::size_t in_features, std::size_t out_features, bool bias, Generator& gen);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;  // bias undefined when constructed without one
};

/// Rows of a [num_embeddings, embedding_dim] table. indices: any shape S → [S..., embedding_dim].
/// Init: N(0, init_std^2); the default 1 matches torch.nn.Embedding.
class Embedding : public Module {
 public:
  Embedding(std::size_t num_embeddings, std::size_t embedding_dim, Generator& gen, double init_std = 1.0);
  Tensor forward(const index_array& indices) const;
  Tensor weight;
};

/// Layer normalisation over the last axis (Ba et al. 2016) with learned weight (init 1) and, unless constructed with
/// bias false (as torch.nn.LayerNorm(d, bias=False)), bias (init 0), [d] each. x: [..., d] → [..., d].
class LayerNorm : public Module {
 public:
  explicit LayerNorm(std::size_t d, double eps = 1e-5, bool bias = true);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;  // bias undefined when constructed without one
  double eps;
};

/// Position-wise feed-forward network: Linear(d_model, d_ff) → GELU → Linear(d_ff, d_model), both Linears with a
/// bias unless `bias` is false. x: [..., d_model] → [..., d_model].
class MLP : public Module {
 public:
  MLP(std::size_t d_model, std::size_t d_ff, Generator& gen, bool bias = true);
  Tensor forward(const Tensor& x) const;
  std::shared_ptr<Linear> fc_in, fc_out;
};

}  // namespace xgrad::nn
