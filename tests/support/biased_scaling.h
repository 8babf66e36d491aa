// A scaling that uses every per-score hook at once, registered as "test_biased" in each test binary that includes
// this header: the tests that iterate the registry (gradcheck, fused against composed, forward_at, a short run)
// then check the order of the hooks, z = c·r_i·q·k + b_hij and s = f(z), with a bias that differs per head, row and
// key.
#pragma once

#include <cmath>
#include <memory>

#include "autograd/ops.h"
#include "nn/scaling.h"

namespace xgrad::testing {

/// c = 1/sqrt(d_k), r_i = 1 + i/4, b[h, i, j] = 0.3 (h + 1) sin(i - 2j), f(z) = 3 tanh(z / 3): a cap small enough
/// that f is far from the identity where the bias is large.
class BiasedScaling : public nn::AttentionScaling {
 public:
  BiasedScaling(std::size_t n_heads, std::size_t d_k) : n_heads_(n_heads), d_k_(d_k) {}
  double multiplier() const override { return 1.0 / std::sqrt(static_cast<double>(d_k_)); }
  std::vector<float> row_multipliers(std::size_t T) const override {
    std::vector<float> r(T);
    for (std::size_t i = 0; i < T; ++i) r[i] = 1.0f + static_cast<float>(i) / 4.0f;
    return r;
  }
  bool adds_score_bias() const override { return true; }
  xt::xarray<float> score_bias(std::size_t T) const override {
    xt::xarray<float> b = xt::xarray<float>::from_shape({n_heads_, T, T});
    for (std::size_t h = 0; h < n_heads_; ++h)
      for (std::size_t i = 0; i < T; ++i)
        for (std::size_t j = 0; j < T; ++j)
          b(h, i, j) = static_cast<float>(0.3 * static_cast<double>(h + 1) *
                                          std::sin(static_cast<double>(i) - 2.0 * static_cast<double>(j)));
    return b;
  }
  bool transforms_scores() const override { return true; }
  Tensor transform_scores(const Tensor& z) const override { return tanh(z * (1.0 / 3.0)) * 3.0; }
  DTensor transform_scores(const DTensor& z) const override { return tanh(z * (1.0 / 3.0)) * 3.0; }
  void transform_scores(const float* z, float* s, std::size_t n) const override {
    for (std::size_t i = 0; i < n; ++i) s[i] = 3.0f * std::tanh(z[i] * (1.0f / 3.0f));
  }
  void transform_scores_backward(const float* z, float* grad, std::size_t n) const override {
    for (std::size_t i = 0; i < n; ++i) {
      const float t = std::tanh(z[i] * (1.0f / 3.0f));
      grad[i] *= 1.0f - t * t;
    }
  }

 private:
  std::size_t n_heads_, d_k_;
};

inline const Registration<nn::ScalingEntry> biased_scaling_registration{
    nn::scaling_entry("test_biased", "test only: row multipliers, a per-head score bias and a tanh cap together", 1000,
                      [](const nn::ScalingContext& c) { return std::make_shared<BiasedScaling>(c.n_heads, c.d_k); },
                      {"#000000", "solid"})};

}  // namespace xgrad::testing
