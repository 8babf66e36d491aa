// Basic layers. Shapes use B = batch, T = sequence length, and the feature sizes named in each constructor.
#pragma once

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

/// Inverted dropout (xgrad::dropout, as torch.nn.Dropout) while the module is training (Module::train): each element
/// is zeroed with probability p and the others are scaled by 1 / (1 - p). In eval mode or with p = 0 forward returns
/// its input itself (no mask drawn, no op). The masks come from `generator`, which the dropout sites of one model
/// share, so that reseeding it once (AttentionModel::set_dropout_generator) fixes every mask of the next forward pass.
/// x: any shape → same. Throws Error unless 0 <= p < 1, or (from forward) when a mask is due and generator is null.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.0, std::shared_ptr<Generator> generator = nullptr);
  Tensor forward(const Tensor& x) const;
  /// Whether forward draws a mask: training and p > 0.
  bool active() const { return p > 0 && is_training(); }
  double p;
  std::shared_ptr<Generator> generator;
};

}  // namespace xgrad::nn
