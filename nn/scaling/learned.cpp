// learned: scores = g · (q/|q|)·(k/|k|), unit-normalised q and k times a learned scalar temperature g (parameter
// qk_gain, [1]), initialised to log2(T^2 - T) for T = max_seq_len (QKNorm: Henry et al. 2020, "Query-Key
// Normalization for Transformers", sec. 3, eq. 5).
#include <algorithm>
#include <cmath>

#include "autograd/ops.h"
#include "nn/scaling.h"

namespace xgrad::nn {
namespace {

class LearnedScaling : public AttentionScaling {
 public:
  explicit LearnedScaling(std::size_t max_seq_len) {
    const double T = static_cast<double>(std::max<std::size_t>(max_seq_len, 2));
    register_parameter("qk_gain", full<float>({1}, std::log2(T * T - T)));
  }
  // g rides on q, (g q̂)·k̂ = g cos(q, k), so it is a parameter of the graph, not the constant multiplier.
  double multiplier() const override { return 1.0; }
  bool transforms_qk() const override { return true; }
  TensorPair<float> transform_qk(const Tensor& q, const Tensor& k, const std::vector<Tensor>& p) const override {
    return normalise(q, k, p);
  }
  TensorPair<double> transform_qk(const DTensor& q, const DTensor& k, const std::vector<DTensor>& p) const override {
    return normalise(q, k, p);
  }

 private:
  // p: qk_gain, [1].
  template <class T>
  static TensorPair<T> normalise(const basic_tensor<T>& q, const basic_tensor<T>& k,
                                 const std::vector<basic_tensor<T>>& p) {
    // eps keeps a zero vector finite.
    auto unit = [](const basic_tensor<T>& t) { return t / sqrt(sum(t * t, {-1}, true) + 1e-12); };
    return {unit(q) * p[0], unit(k)};
  }
};

ScalingEntry make_entry() {
  ScalingEntry e;
  e.name = "learned";
  e.description =
      "scores = g·(q/|q|)·(k/|k|), learned temperature g, init log2(T^2 - T) (QKNorm: Henry et al. 2020, sec. 3, "
      "eq. 5)";
  e.order = 40;
  e.build = [](const ScalingContext& c) { return std::make_shared<LearnedScaling>(c.max_seq_len); };
  e.colour = "#44AA99";
  e.dash = "dashdashdot";
  e.scalars = {"qk_gain"};
  return e;
}

const Registration<ScalingEntry> registration{make_entry()};

}  // namespace
}  // namespace xgrad::nn
