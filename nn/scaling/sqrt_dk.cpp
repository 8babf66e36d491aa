// sqrt_dk: scores = q·k / sqrt(d_k), the scaled dot-product attention of Vaswani et al. 2017, "Attention Is All You
// Need", sec. 3.2.1, eq. 1.
#include <cmath>

#include "nn/scaling.h"

namespace xgrad::nn {
namespace {

class SqrtDkScaling : public AttentionScaling {
 public:
  explicit SqrtDkScaling(std::size_t d_k) : multiplier_(1.0 / std::sqrt(static_cast<double>(d_k))) {}
  double multiplier() const override { return multiplier_; }

 private:
  double multiplier_;
};

ScalingEntry make_entry() {
  ScalingEntry e;
  e.name = "sqrt_dk";
  e.description = "scores = q·k / sqrt(d_k) (Vaswani et al. 2017, \"Attention Is All You Need\", eq. 1)";
  e.order = 10;
  e.build = [](const ScalingContext& c) { return std::make_shared<SqrtDkScaling>(c.d_k); };
  e.colour = "#1F4E9C";
  return e;
}

const Registration<ScalingEntry> registration{make_entry()};

}  // namespace
}  // namespace xgrad::nn
