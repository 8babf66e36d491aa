// learned: scores = g · (q/|q|)·(k/|k|), unit-normalised q and k times a learned scalar temperature g (parameter
// qk_gain, [1]), initialised to log2(T^2 - T) for T = max_seq_len (QKNorm: Henry et al. 2020, "Query-Key
// Normalization for Transformers", sec. 3, eq. 5).
#include <algorithm>
#include <cmath>

#include "autograd/ops.h"
#include "nn/scaling.h"

namespace xgrad::nn {
namespace {

class LearnedScaling : public QkTransformScaling<LearnedScaling> {
 public:
  explicit LearnedScaling(std::size_t max_seq_len) {
    const double T = static_cast<double>(std::max<std::size_t>(max_seq_len, 2));
    register_parameter("qk_gain", full<float>({1}, std::log2(T * T - T)));
  }
  // g rides on q, (g q̂)·k̂ = g cos(q, k), so it is a parameter of the graph, not the constant multiplier.
  double multiplier() const override { return 1.0; }
  // p: qk_gain, [1].
  template <class T>
  static TensorPair<T> qk(const basic_tensor<T>& q, const basic_tensor<T>& k, const std::vector<basic_tensor<T>>& p) {
    // eps keeps a zero vector finite.
    auto unit = [](const basic_tensor<T>& t) { return t / sqrt(sum(t * t, {-1}, true) + 1e-12); };
    return {unit(q) * p[0], unit(k)};
  }
};

const Registration<ScalingEntry> learned_registration{scaling_entry(
    "learned",
    "scores = g·(q/|q|)·(k/|k|), learned temperature g, init log2(T^2 - T) (QKNorm: Henry et al. 2020, sec. 3, "
    "eq. 5)",
    40, [](const ScalingContext& c) { return std::make_shared<LearnedScaling>(c.max_seq_len); },
    {"#44AA99", "dashdashdot"}, {}, {"qk_gain"})};

}  // namespace
}  // namespace xgrad::nn
