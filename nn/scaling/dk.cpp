// dk: scores = q·k / d_k, the attention scaling of muP (Yang et al. 2022, "Tensor Programs V", sec. 3 and App. J):
// with q and k correlated after training, q·k grows like d_k, not sqrt(d_k).
#include "nn/constant_scaling.h"

namespace xgrad::nn {
namespace {

const Registration<ScalingEntry> dk_registration{
    constant_scaling("dk", "scores = q·k / d_k (muP: Yang et al. 2022, \"Tensor Programs V\", sec. 3 and App. J)", 20,
                     [](const ScalingContext& c) { return 1.0 / static_cast<double>(c.d_k); }, {"#117733", "dotted"})};

}  // namespace
}  // namespace xgrad::nn
