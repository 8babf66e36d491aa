// alibi: attention with linear biases (Press et al. 2022, "Train Short, Test Long: Attention with Linear Biases
// Enables Input Length Extrapolation", sec. 3): scores = q·k / sqrt(d_k) - m_h · (i - j), a penalty linear in the
// distance from query i back to key j, with one slope per head, m_h = 2^(-8 (h + 1) / n_heads) (their geometric
// sequence). Without the causal mask the distance is |i - j|. The bias is the scaling's score_bias hook, so the
// fused attention adds it in place; no gradient flows into it.
// The whole extension is this file: the static registration below adds it to --scale, sweeps and compare.
#include <cmath>
#include <cstdlib>
#include <memory>

#include "nn/scaling.h"

namespace {

using namespace xgrad;

class AlibiScaling : public nn::AttentionScaling {
 public:
  explicit AlibiScaling(const nn::ScalingContext& c) : d_k_(c.d_k), n_heads_(c.n_heads) {}
  double multiplier() const override { return 1.0 / std::sqrt(static_cast<double>(d_k_)); }
  bool adds_score_bias() const override { return true; }
  /// [n_heads, T, T]: b[h, i, j] = -m_h |i - j| (only j <= i survive the causal mask).
  xt::xarray<float> score_bias(std::size_t T) const override {
    xt::xarray<float> b = xt::xarray<float>::from_shape({n_heads_, T, T});
    for (std::size_t h = 0; h < n_heads_; ++h) {
      const double slope = std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(n_heads_));
      for (std::size_t i = 0; i < T; ++i)
        for (std::size_t j = 0; j < T; ++j) b(h, i, j) = static_cast<float>(-slope * (i > j ? i - j : j - i));
    }
    return b;
  }

 private:
  std::size_t d_k_, n_heads_;
};

const Registration<nn::ScalingEntry> registration{nn::scaling_entry(
    "alibi", "scores = q·k / sqrt(d_k) - m_h·|i - j|, slope m_h = 2^(-8(h+1)/n_heads) (ALiBi: Press et al. 2022)",
    1001,  // after the built-in scalings and dk_power
    [](const nn::ScalingContext& c) { return std::make_shared<AlibiScaling>(c); }, {"#117733", "dotted"})};

}  // namespace
