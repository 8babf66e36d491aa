// ssmax: scores = s · log(n) · q·k / sqrt(d_k), n the number of keys the query may attend to (i + 1 for query i
// under the causal mask, T without it), s a learned scalar per head (Scalable-Softmax: Nakanishi 2025,
// "Scalable-Softmax Is Superior for Attention": softmax((s log n) z) keeps the largest weight from fading as n
// grows, where softmax(z) flattens). s is the parameter ssmax_s, [n_heads], applied to q; log(n) is a row
// multiplier of the fused op.
//
// Init s = 1 / log(max_seq_len): at the full training length s log(n) = 1, so at init the longest rows are exactly
// the sqrt_dk attention the experiment compares with, and shorter (causal) rows are softer, as SSMax intends (a
// sharpness that depends on n only through log n). The paper's illustration (Figure 1) uses s = 0.43; this init
// makes ssmax differ from sqrt_dk at init only through n, so what it learns shows in s.
#include <algorithm>
#include <cmath>

#include "autograd/ops.h"
#include "nn/scaling.h"

namespace xgrad::nn {
namespace {

class SsmaxScaling : public QkTransformScaling<SsmaxScaling> {
 public:
  SsmaxScaling(std::size_t n_heads, std::size_t d_k, std::size_t max_seq_len, bool causal)
      : multiplier_(1.0 / std::sqrt(static_cast<double>(d_k))), n_heads_(n_heads), causal_(causal) {
    const double longest = static_cast<double>(std::max<std::size_t>(max_seq_len, 2));
    register_parameter("ssmax_s", full<float>({n_heads}, 1.0 / std::log(longest)));
  }
  double multiplier() const override { return multiplier_; }
  std::vector<float> row_multipliers(std::size_t T) const override {
    std::vector<float> r(T);
    for (std::size_t i = 0; i < T; ++i) r[i] = static_cast<float>(std::log(static_cast<double>(causal_ ? i + 1 : T)));
    return r;
  }
  // q: [B, T, H, d_k] times s per head (p[0]: ssmax_s, [H], viewed as [H, 1]).
  template <class T>
  TensorPair<T> qk(const basic_tensor<T>& q, const basic_tensor<T>& k, const std::vector<basic_tensor<T>>& p) const {
    return {q * reshape(p[0], {static_cast<std::int64_t>(n_heads_), 1}), k};
  }

 private:
  double multiplier_;
  std::size_t n_heads_;
  bool causal_;
};

const Registration<ScalingEntry> ssmax_registration{scaling_entry(
    "ssmax",
    "scores = s·log(n)·q·k / sqrt(d_k), n = keys the query may attend to, learned s per head, init 1/log(T) "
    "(Nakanishi 2025, \"Scalable-Softmax Is Superior for Attention\")",
    60,
    [](const ScalingContext& c) { return std::make_shared<SsmaxScaling>(c.n_heads, c.d_k, c.max_seq_len, c.causal); },
    {"#AA4499", "dashdot"}, {}, {"ssmax_s"})};

}  // namespace
}  // namespace xgrad::nn
