// dk_power: scores = q·k / d_k^p, with the exponent p a setting (default 0.75). p = 0.5 is the 1/sqrt(d_k) of
// Vaswani et al. 2017 ("Attention Is All You Need", eq. 1), p = 1 the 1/d_k of muP (Yang et al. 2022, "Tensor
// Programs V", sec. 3); values between interpolate, to ask where between the two a model trains best.
// The whole extension is this file: the static registration below adds it to --scale, sweeps and compare.
#include <cmath>

#include "nn/constant_scaling.h"

namespace {

const xgrad::Registration<xgrad::nn::ScalingEntry> registration{xgrad::nn::constant_scaling(
    "dk_power", "scores = q·k / d_k^p: p = 0.5 is Vaswani et al. 2017 (eq. 1), p = 1 muP (Yang et al. 2022, sec. 3)",
    1000,  // after the built-in scalings in listings and reports
    [](const xgrad::nn::ScalingContext& c) {
      return std::pow(static_cast<double>(c.d_k), -c.settings.get<double>("dk_power_exponent"));
    },
    {"#8E44AD", "dashed"}, {xgrad::number_setting("dk_power_exponent", 0.75, 0.0, 2.0, "the exponent p of d_k^-p")})};

}  // namespace
