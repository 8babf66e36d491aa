#include "nn/layers.h"

#include <string>
#include <utility>

namespace xgrad::nn {

Linear::Linear(std::size_t in_features, std::size_t out_features, bool has_bias, Generator& gen) {
  if (in_features == 0 || out_features == 0)
    throw Error("Linear: in_features and out_features must be > 0, got " + std::to_string(in_features) + " and " +
                std::to_string(out_features));
  weight = register_parameter("weight", zeros<float>({in_features, out_features}));
  lecun_normal_(weight, in_features, gen);
  if (has_bias) bias = register_parameter("bias", zeros<float>({out_features}));
}

Tensor Linear::forward(const Tensor& x) const {
  Tensor y = matmul(x, weight);
  return bias.defined() ? y + bias : y;
}

Embedding::Embedding(std::size_t num_embeddings, std::size_t embedding_dim, Generator& gen, double init_std) {
  if (num_embeddings == 0 || embedding_dim == 0) throw Error("Embedding: sizes must be > 0");
  weight = register_parameter("weight", zeros<float>({num_embeddings, embedding_dim}));
  normal_(weight, init_std, gen);
}

Tensor Embedding::forward(const index_array& indices) const { return embedding(weight, indices); }

LayerNorm::LayerNorm(std::size_t d, double eps_, bool has_bias) : eps(eps_) {
  weight = register_parameter("weight", ones<float>({d}));
  if (has_bias) bias = register_parameter("bias", zeros<float>({d}));
}

Tensor LayerNorm::forward(const Tensor& x) const { return layer_norm(x, weight, bias, eps); }

MLP::MLP(std::size_t d_model, std::size_t d_ff, Generator& gen, bool bias) {
  fc_in = register_module("fc_in", std::make_shared<Linear>(d_model, d_ff, bias, gen));
  fc_out = register_module("fc_out", std::make_shared<Linear>(d_ff, d_model, bias, gen));
}

Tensor MLP::forward(const Tensor& x) const { return fc_out->forward(gelu(fc_in->forward(x))); }

Dropout::Dropout(double p_, std::shared_ptr<Generator> generator_) : p(p_), generator(std::move(generator_)) {
  if (!(p >= 0.0 && p < 1.0)) throw Error("Dropout: p must be in [0, 1), got " + std::to_string(p));
}

Tensor Dropout::forward(const Tensor& x) const {
  if (!active()) return x;
  if (!generator) throw Error("Dropout: p = " + std::to_string(p) + " while training needs a generator for its masks");
  return dropout(x, p, true, *generator);
}

}  // namespace xgrad::nn
