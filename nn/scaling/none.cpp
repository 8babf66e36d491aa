// none: scores = q·k, no scaling. The unscaled baseline of the experiment (Vaswani et al. 2017, footnote 4, on why
// it saturates the softmax as d_k grows).
#include "nn/constant_scaling.h"

namespace xgrad::nn {
namespace {

ScalingEntry unscaled() {
  ScalingEntry e = constant_scaling("none", "scores = q·k, unscaled (the baseline; Vaswani et al. 2017, footnote 4)", 0,
                                    [](const ScalingContext&) { return 1.0; }, {"#CC6677", "solid"});
  e.is_reference = true;  // the report compares every other scaling with this one
  return e;
}

const Registration<ScalingEntry> none_registration{unscaled()};

}  // namespace
}  // namespace xgrad::nn
