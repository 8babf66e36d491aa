// dk_power: scores = q·k / d_k^p, with the exponent p a setting (default 0.75). p = 0.5 is the 1/sqrt(d_k) of
// Vaswani et al. 2017 ("Attention Is All You Need", eq. 1), p = 1 the 1/d_k of muP (Yang et al. 2022, "Tensor
// Programs V", sec. 3); values between interpolate, to ask where between the two a model trains best.
// The whole extension is this file: the static registration below adds it to --scale, sweeps, compare and probe.
#include <cmath>
#include <memory>

#include "nn/scaling.h"

namespace {

class DkPowerScaling : public xgrad::nn::AttentionScaling {
 public:
  DkPowerScaling(std::size_t d_k, double exponent)
      : multiplier_(std::pow(static_cast<double>(d_k), -exponent)) {}
  double multiplier() const override { return multiplier_; }

 private:
  double multiplier_;
};

xgrad::nn::ScalingEntry dk_power_entry() {
  xgrad::nn::ScalingEntry e;
  e.name = "dk_power";
  e.description = "scores = q·k / d_k^p: p = 0.5 is Vaswani et al. 2017 (eq. 1), p = 1 muP (Yang et al. 2022, sec. 3)";
  e.order = 1000;  // after the built-in scalings in listings and reports
  e.settings = {xgrad::number_setting("dk_power_exponent", 0.75, 0.0, 2.0, "the exponent p of d_k^-p")};
  e.build = [](const xgrad::nn::ScalingContext& c) {
    return std::make_shared<DkPowerScaling>(c.d_k, c.settings.get<double>("dk_power_exponent"));
  };
  e.colour = "#8E44AD";
  e.dash = "dashed";
  return e;
}

const xgrad::Registration<xgrad::nn::ScalingEntry> registration{dk_power_entry()};

}  // namespace
