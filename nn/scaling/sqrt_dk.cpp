// sqrt_dk: scores = q·k / sqrt(d_k), the scaled dot-product attention of Vaswani et al. 2017, "Attention Is All You
// Need", sec. 3.2.1, eq. 1.
#include <cmath>

#include "nn/constant_scaling.h"

namespace xgrad::nn {
namespace {

const Registration<ScalingEntry> sqrt_dk_registration{constant_scaling(
    "sqrt_dk", "scores = q·k / sqrt(d_k) (Vaswani et al. 2017, \"Attention Is All You Need\", eq. 1)", 10,
    [](const ScalingContext& c) { return 1.0 / std::sqrt(static_cast<double>(c.d_k)); }, {"#332288", "dashed"})};

}  // namespace
}  // namespace xgrad::nn
