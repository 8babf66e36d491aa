// The short form of a scaling that multiplies every score by one number: scores = multiplier · q·k, the number
// computed once per layer from its ScalingContext (its d_k, or the entry's own settings). none, sqrt_dk and dk are
// each one call; a scaling with learned scalars or other hooks subclasses AttentionScaling (nn/scaling.h) instead.
//
//   const xgrad::Registration<xgrad::nn::ScalingEntry> registration{xgrad::nn::constant_scaling(
//       "sqrt_dk", "scores = q·k / sqrt(d_k) (Vaswani et al. 2017, eq. 1)", 10,
//       [](const xgrad::nn::ScalingContext& c) { return 1.0 / std::sqrt(static_cast<double>(c.d_k)); },
//       {"#332288", "dashed"})};
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "nn/scaling.h"

namespace xgrad::nn {

/// The entry of scaling `name` (`description`: the formula and its source; `order`: its place in listings) whose
/// layers multiply every score by multiplier(context), a finite number > 0; `settings` are the entry's own (read in
/// multiplier as context.settings). The entry's other fields keep their defaults (not the reference). The built
/// scaling throws std::invalid_argument naming the entry when multiplier returns a value that is not finite and > 0.
ScalingEntry constant_scaling(std::string name, std::string description, int order,
                              std::function<double(const ScalingContext&)> multiplier, PlotStyle style,
                              std::vector<Setting> settings = {});

}  // namespace xgrad::nn
