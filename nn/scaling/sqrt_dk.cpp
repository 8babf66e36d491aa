// sqrt_dk: scores = q·k / sqrt(d_k), the scaled dot-product attention of Vaswani et al. 2017, "Attention Is All You
// Need", sec. 3.2.1, eq. 1.
#include <cmath>

#include "nn/scaling.h"

namespace xgrad::nn {
namespace {

ScalingEntry make_entry() {
  ScalingEntry e;
  e.name = "sqrt_dk";
  e.description = "scores = q·k / sqrt(d_k) (Vaswani et al. 2017, \"Attention Is All You Need\", eq. 1)";
  e.order = 10;
  e.build = [](const ScalingContext& c) {
    return std::make_shared<ConstantScaling>(1.0 / std::sqrt(static_cast<double>(c.d_k)));
  };
  e.colour = "#332288";
  e.dash = "dashed";
  return e;
}

const Registration<ScalingEntry> registration{make_entry()};

}  // namespace
}  // namespace xgrad::nn
