// qk_norm: scores = c · RMSNorm(q)·RMSNorm(k), RMSNorm over each head's d_k with a learned gain per dimension, the
// multiplier c the setting qk_norm_scale: inv_sqrt_dk (1/sqrt(d_k), as OLMo 2 and Qwen3 keep after the norm), 1
// (Gemma 4's attention scaling of 1.0) or a fixed number (modded-nanogpt's 0.12). RMSNorm as Zhang & Sennrich 2019,
// "Root Mean Square Layer Normalization", eq. 4, eps 1e-6 inside the root as T5, LLaMA and Gemma. The gains are
// q_norm.weight and k_norm.weight, [d_k] each, shared by the heads of the layer as those models' q_norm/k_norm
// (and qk_layernorm here) share theirs; initialised to 1, so at init q and k have unit RMS per head and c alone sets
// how sharp attention starts: |score| ~ c · sqrt(d_k) for random directions.
#include <cmath>
#include <cstdlib>
#include <limits>

#include "autograd/ops.h"
#include "nn/scaling.h"

namespace xgrad::nn {
namespace {

// The learned gain of one RMSNorm: its parameter `weight`, [d], starting at 1 (torch.nn.RMSNorm's).
class RmsNormGain : public Module {
 public:
  explicit RmsNormGain(std::size_t d) { register_parameter("weight", full<float>({d}, 1.0)); }
};

class QkNormScaling : public QkTransformScaling<QkNormScaling> {
 public:
  QkNormScaling(std::size_t d_k, const std::string& scale)
      : multiplier_(scale == "inv_sqrt_dk" ? 1.0 / std::sqrt(static_cast<double>(d_k))
                                           : std::strtod(scale.c_str(), nullptr)) {
    register_module("q_norm", std::make_shared<RmsNormGain>(d_k));
    register_module("k_norm", std::make_shared<RmsNormGain>(d_k));
  }
  double multiplier() const override { return multiplier_; }
  // p: q_norm.weight, k_norm.weight (registration order), [d_k] each.
  template <class T>
  static TensorPair<T> qk(const basic_tensor<T>& q, const basic_tensor<T>& k, const std::vector<basic_tensor<T>>& p) {
    constexpr double eps = 1e-6;
    return {rms_norm(q, p[0], eps), rms_norm(k, p[1], eps)};
  }

 private:
  double multiplier_;
};

const Registration<ScalingEntry> qk_norm_registration{scaling_entry(
    "qk_norm",
    "scores = c·RMSNorm(q)·RMSNorm(k), RMSNorm over d_k with a learned gain, c = qk_norm_scale (Gemma 4: 1; "
    "modded-nanogpt: 0.12; RMSNorm: Zhang & Sennrich 2019, eq. 4)",
    35,
    [](const ScalingContext& c) {
      return std::make_shared<QkNormScaling>(c.d_k, c.settings.get<std::string>("qk_norm_scale"));
    },
    {"#DDCC77", "longdashdot"},
    {name_or_number_setting("qk_norm_scale", "inv_sqrt_dk", {"inv_sqrt_dk"}, 0.0,
                            std::numeric_limits<double>::infinity(),
                            "the multiplier c of qk_norm's scores: inv_sqrt_dk (1/sqrt(d_k)), 1 (Gemma 4) or a "
                            "number (modded-nanogpt: 0.12)")
         .excluding_min()})};

}  // namespace
}  // namespace xgrad::nn
