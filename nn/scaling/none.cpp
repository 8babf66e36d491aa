// none: scores = q·k, no scaling. The unscaled baseline of the experiment (Vaswani et al. 2017, footnote 4, on why
// it saturates the softmax as d_k grows).
#include "nn/scaling.h"

namespace xgrad::nn {
namespace {

ScalingEntry make_entry() {
  ScalingEntry e;
  e.name = "none";
  e.description = "scores = q·k, unscaled (the baseline; Vaswani et al. 2017, footnote 4)";
  e.order = 0;
  e.build = [](const ScalingContext&) { return std::make_shared<ConstantScaling>(1.0); };
  e.colour = "#CC6677";
  e.dash = "solid";
  e.is_reference = true;
  return e;
}

const Registration<ScalingEntry> registration{make_entry()};

}  // namespace
}  // namespace xgrad::nn
