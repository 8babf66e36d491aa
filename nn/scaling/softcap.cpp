// softcap: scores = c · tanh(q·k / (sqrt(d_k) · c)), the sqrt_dk scores soft-capped to (-c, c): near-identity for
// |z| << c, so it changes nothing at init and only stops the logits from growing without bound (attention logit
// soft-capping, Gemma Team 2024, "Gemma 2: Improving Open Language Models at a Practical Size", sec. 2, which uses
// c = 50 for attention). The cap is the setting softcap_cap.
#include <cmath>
#include <limits>

#include "autograd/ops.h"
#include "nn/scaling.h"

namespace xgrad::nn {
namespace {

class SoftcapScaling : public AttentionScaling {
 public:
  SoftcapScaling(std::size_t d_k, double cap)
      : multiplier_(1.0 / std::sqrt(static_cast<double>(d_k))), cap_(cap), inverse_cap_(1.0 / cap) {}
  double multiplier() const override { return multiplier_; }
  bool transforms_scores() const override { return true; }
  Tensor transform_scores(const Tensor& z) const override { return capped(z); }
  DTensor transform_scores(const DTensor& z) const override { return capped(z); }
  void transform_scores(const float* z, float* s, std::size_t n) const override {
    const float c = static_cast<float>(cap_), inverse = static_cast<float>(inverse_cap_);
    for (std::size_t i = 0; i < n; ++i) s[i] = c * std::tanh(z[i] * inverse);
  }
  // d/dz c tanh(z / c) = 1 - tanh(z / c)^2.
  void transform_scores_backward(const float* z, float* grad, std::size_t n) const override {
    const float inverse = static_cast<float>(inverse_cap_);
    for (std::size_t i = 0; i < n; ++i) {
      const float t = std::tanh(z[i] * inverse);
      grad[i] *= 1.0f - t * t;
    }
  }

 private:
  template <class T>
  basic_tensor<T> capped(const basic_tensor<T>& z) const {
    return tanh(z * inverse_cap_) * cap_;
  }
  double multiplier_, cap_, inverse_cap_;
};

const Registration<ScalingEntry> softcap_registration{scaling_entry(
    "softcap",
    "scores = c·tanh(q·k / (sqrt(d_k)·c)), cap c = softcap_cap (Gemma Team 2024, \"Gemma 2\", sec. 2, logit "
    "soft-capping)",
    50,
    [](const ScalingContext& c) {
      return std::make_shared<SoftcapScaling>(c.d_k, c.settings.get<double>("softcap_cap"));
    },
    {"#999933", "longdash"},
    {number_setting("softcap_cap", 50.0, 0.0, std::numeric_limits<double>::infinity(),
                    "the cap c of the attention scores, c·tanh(z / c) (Gemma 2 uses 50)")
         .excluding_min()})};

}  // namespace
}  // namespace xgrad::nn
