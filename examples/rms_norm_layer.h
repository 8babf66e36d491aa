// A new layer written outside nn/: RMSNorm as a Module around the engine's rms_norm op. The smallest template for
// a layer: register each parameter in the constructor (its name is what named_parameters(), optimizers and
// checkpoints see), and write forward() with engine ops; backward comes from the ops.
#pragma once

#include <cstddef>

#include "autograd/ops.h"
#include "nn/module.h"

namespace examples {

/// RMS normalisation over the last axis (Zhang & Sennrich 2019, eq. 4) with a learned gain `weight` [d], init 1:
/// y = x / sqrt(mean(x^2) + eps) * weight. x: [..., d] → same shape. Throws xgrad::Error (from rms_norm) if the
/// last axis of x is not d.
class RMSNorm : public xgrad::nn::Module {
 public:
  explicit RMSNorm(std::size_t d, double eps = 1e-6) : eps(eps) {
    weight = register_parameter("weight", xgrad::ones<float>({d}));
  }
  xgrad::Tensor forward(const xgrad::Tensor& x) const { return xgrad::rms_norm(x, weight, eps); }

  xgrad::Tensor weight;
  double eps;
};

}  // namespace examples
