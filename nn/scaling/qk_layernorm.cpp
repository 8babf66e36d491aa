// qk_layernorm: scores = LN(q)·LN(k) / sqrt(d_k), LayerNorm over each head's d_k with a learned weight and bias shared
// by the heads (Dehghani et al. 2023, "Scaling Vision Transformers to 22 Billion Parameters", sec. 2.1). The
// parameters are q_norm.{weight,bias} and k_norm.{weight,bias}, [d_k] each.
#include <cmath>

#include "nn/layers.h"
#include "nn/scaling.h"

namespace xgrad::nn {
namespace {

class QkLayerNormScaling : public AttentionScaling {
 public:
  explicit QkLayerNormScaling(std::size_t d_k) : multiplier_(1.0 / std::sqrt(static_cast<double>(d_k))) {
    q_norm = register_module("q_norm", std::make_shared<LayerNorm>(d_k));
    k_norm = register_module("k_norm", std::make_shared<LayerNorm>(d_k));
  }
  double multiplier() const override { return multiplier_; }
  bool transforms_qk() const override { return true; }
  std::pair<Tensor, Tensor> transform_qk(const Tensor& q, const Tensor& k) const override {
    return {q_norm->forward(q), k_norm->forward(k)};
  }

 private:
  double multiplier_;
  std::shared_ptr<LayerNorm> q_norm, k_norm;
};

ScalingEntry make_entry() {
  ScalingEntry e;
  e.name = "qk_layernorm";
  e.description =
      "scores = LN(q)·LN(k) / sqrt(d_k), LayerNorm over d_k (Dehghani et al. 2023, \"Scaling Vision Transformers to "
      "22 Billion Parameters\", sec. 2.1)";
  e.order = 30;
  e.build = [](const ScalingContext& c) { return std::make_shared<QkLayerNormScaling>(c.d_k); };
  e.colour = "#7D3C98";
  return e;
}

const Registration<ScalingEntry> registration{make_entry()};

}  // namespace
}  // namespace xgrad::nn
