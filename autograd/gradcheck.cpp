#include "autograd/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace xgrad {

namespace {
// Fixed weights in [0.5, 1.5): deterministic (a hash of the position), never zero, never symmetric.
xt::xarray<double> projection_weights(const xt::xarray<double>& like) {
  xt::xarray<double> w = xt::xarray<double>::from_shape(like.shape());
  for (std::size_t i = 0; i < w.size(); ++i) {
    std::uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    w.data()[i] = 0.5 + static_cast<double>(h % 1000003) / 1000003.0;
  }
  return w;
}

double weighted_sum(const xt::xarray<double>& out, const xt::xarray<double>& w) {
  double s = 0;
  for (std::size_t i = 0; i < out.size(); ++i) s += out.data()[i] * w.data()[i];
  return s;
}
}  // namespace

GradcheckResult gradcheck(const std::function<DTensor(const std::vector<DTensor>&)>& f,
                          const std::vector<DTensor>& inputs, const GradcheckOptions& opt) {
  for (const auto& in : inputs) in.zero_grad();
  DTensor out = f(inputs);
  if (!out.requires_grad()) throw Error("gradcheck: the output does not depend on any input with requires_grad");
  const xt::xarray<double> w = projection_weights(out.value());
  out.backward(w);

  GradcheckResult result;
  result.error = -INFINITY;
  NoGradGuard no_grad;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    DTensor x = inputs[k];
    if (!x.requires_grad()) continue;
    xt::xarray<double> analytic = x.has_grad() ? x.grad() : xt::xarray<double>(xt::zeros<double>(x.value().shape()));
    double* v = x.mutable_value().data();
    for (std::size_t i = 0; i < x.numel(); ++i) {
      const double saved = v[i];
      const double f0 = weighted_sum(f(inputs).value(), w);
      v[i] = saved + opt.eps;
      const double fp = weighted_sum(f(inputs).value(), w);
      v[i] = saved - opt.eps;
      const double fm = weighted_sum(f(inputs).value(), w);
      v[i] = saved;
      const double numeric = (fp - fm) / (2 * opt.eps);
      const double left = (f0 - fm) / opt.eps, right = (fp - f0) / opt.eps;
      const double a = analytic.data()[i];
      const double tol = opt.atol + opt.rtol * std::abs(numeric);
      double err = std::abs(a - numeric) - tol;
      // One-sided differences disagreeing beyond what curvature explains marks a kink.
      const double curvature_slack = 1e3 * (opt.atol + opt.rtol * std::max(std::abs(left), std::abs(right)));
      if (std::abs(left - right) > curvature_slack) {
        ++result.kinks;
        const double lo = std::min(left, right), hi = std::max(left, right);
        err = (a >= lo - tol && a <= hi + tol) ? -tol : std::min(std::abs(a - lo), std::abs(a - hi)) - tol;
      }
      if (!(err <= 0)) result.ok = false;  // NaN fails too
      if (err > result.error || std::isnan(err)) {
        result.error = err;
        result.input = k;
        result.element = i;
        result.analytic = a;
        result.numeric = numeric;
      }
    }
  }
  std::ostringstream msg;
  msg << (result.ok ? "gradcheck passed" : "gradcheck FAILED") << "; worst element: input " << result.input
      << ", flat index " << result.element << ", analytic " << result.analytic << ", numeric " << result.numeric
      << " (kinks skipped: " << result.kinks << ")";
  result.message = msg.str();
  for (const auto& in : inputs) in.zero_grad();
  return result;
}

}  // namespace xgrad
