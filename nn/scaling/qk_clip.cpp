// qk_clip: scores = q·k / sqrt(d_k) as sqrt_dk, and after each optimizer step QK-Clip (Kimi Team 2025, "Kimi K2:
// Open Agentic Intelligence", arXiv 2507.20534, sec. 2.1, MuonClip): a head whose largest logit S_max over the step
// exceeded tau has its W_q and W_k columns each multiplied by sqrt(gamma), gamma = tau / S_max. The scores are
// bilinear in W_q and W_k, so the same inputs would give that head's logits times gamma: its largest exactly tau.
// Heads at or under tau are untouched, and the optimizer's state is left as it is (as in the paper). S_max is the
// signed maximum of the scaled scores (the paper's max over the batch of q_i·k_j / sqrt(d)), masked entries left out.
#include <cmath>
#include <limits>

#include "nn/scaling.h"

namespace xgrad::nn {
namespace {

class QkClipScaling : public AttentionScaling {
 public:
  QkClipScaling(std::size_t n_heads, std::size_t d_k, double tau)
      : n_heads_(n_heads), d_k_(d_k), tau_(tau), multiplier_(1.0 / std::sqrt(static_cast<double>(d_k))) {}
  double multiplier() const override { return multiplier_; }
  bool acts_after_step() const override { return true; }

  void after_optimizer_step(Tensor& w_q, Tensor& w_k, const std::vector<float>& max_logits) override {
    for (std::size_t h = 0; h < n_heads_ && h < max_logits.size(); ++h) {
      if (!(max_logits[h] > tau_)) continue;  // NaN or at most tau: untouched
      const auto factor = static_cast<float>(std::sqrt(tau_ / static_cast<double>(max_logits[h])));
      for (Tensor* w : {&w_q, &w_k}) scale_head(w->mutable_value(), h, factor);
    }
  }

 private:
  // Columns h*d_k .. (h+1)*d_k - 1 of w: [d_model, n_heads * d_k], times factor.
  void scale_head(xt::xarray<float>& w, std::size_t h, float factor) const {
    const std::size_t rows = w.shape(0), cols = w.shape(1);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = h * d_k_; c < (h + 1) * d_k_ && c < cols; ++c) w(r, c) *= factor;
  }

  std::size_t n_heads_, d_k_;
  double tau_, multiplier_;
};

const Registration<ScalingEntry> qk_clip_registration{scaling_entry(
    "qk_clip",
    "scores = q·k / sqrt(d_k); after each step, W_q and W_k of a head whose largest logit passed qk_clip_tau are "
    "scaled by sqrt(tau / max logit) each (QK-Clip: Kimi Team 2025, \"Kimi K2\", sec. 2.1)",
    38,
    [](const ScalingContext& c) {
      return std::make_shared<QkClipScaling>(c.n_heads, c.d_k, c.settings.get<double>("qk_clip_tau"));
    },
    {"#004488", "dashed"},
    {number_setting("qk_clip_tau", 100.0, 0.0, std::numeric_limits<double>::infinity(),
                    "qk_clip's threshold tau on a head's largest logit (Kimi K2: 100)")
         .excluding_min()})};

}  // namespace
}  // namespace xgrad::nn
