// qk_layernorm: scores = LN(q)·LN(k) / sqrt(d_k), LayerNorm over each head's d_k with a learned weight and bias shared
// by the heads (Dehghani et al. 2023, "Scaling Vision Transformers to 22 Billion Parameters", sec. 2.1). The
// parameters are q_norm.{weight,bias} and k_norm.{weight,bias}, [d_k] each.
#include <cmath>

#include "autograd/ops.h"
#include "nn/layers.h"
#include "nn/scaling.h"

namespace xgrad::nn {
namespace {

class QkLayerNormScaling : public QkTransformScaling<QkLayerNormScaling> {
 public:
  explicit QkLayerNormScaling(std::size_t d_k) : multiplier_(1.0 / std::sqrt(static_cast<double>(d_k))) {
    register_module("q_norm", std::make_shared<LayerNorm>(d_k));
    register_module("k_norm", std::make_shared<LayerNorm>(d_k));
  }
  double multiplier() const override { return multiplier_; }
  // p: q_norm.weight, q_norm.bias, k_norm.weight, k_norm.bias (registration order), [d_k] each.
  template <class T>
  static TensorPair<T> qk(const basic_tensor<T>& q, const basic_tensor<T>& k, const std::vector<basic_tensor<T>>& p) {
    constexpr double eps = 1e-5;  // LayerNorm's default, as torch.nn.LayerNorm
    return {layer_norm(q, p[0], p[1], eps), layer_norm(k, p[2], p[3], eps)};
  }

 private:
  double multiplier_;
};

const Registration<ScalingEntry> qk_layernorm_registration{scaling_entry(
    "qk_layernorm",
    "scores = LN(q)·LN(k) / sqrt(d_k), LayerNorm over d_k (Dehghani et al. 2023, \"Scaling Vision Transformers to "
    "22 Billion Parameters\", sec. 2.1)",
    30, [](const ScalingContext& c) { return std::make_shared<QkLayerNormScaling>(c.d_k); },
    {"#882255", "longdashdot"})};

}  // namespace
}  // namespace xgrad::nn
