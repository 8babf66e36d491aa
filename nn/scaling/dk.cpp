// dk: scores = q·k / d_k, the attention scaling of muP (Yang et al. 2022, "Tensor Programs V", sec. 3 and App. J):
// with q and k correlated after training, q·k grows like d_k, not sqrt(d_k).
#include "nn/scaling.h"

namespace xgrad::nn {
namespace {

ScalingEntry make_entry() {
  ScalingEntry e;
  e.name = "dk";
  e.description = "scores = q·k / d_k (muP: Yang et al. 2022, \"Tensor Programs V\", sec. 3 and App. J)";
  e.order = 20;
  e.build = [](const ScalingContext& c) {
    return std::make_shared<ConstantScaling>(1.0 / static_cast<double>(c.d_k));
  };
  e.colour = "#117733";
  e.dash = "dotted";
  return e;
}

const Registration<ScalingEntry> registration{make_entry()};

}  // namespace
}  // namespace xgrad::nn
