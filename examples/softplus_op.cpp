// softplus: forward value and backward closure side by side, built only from autograd/tensor.h's public API.
#include "examples/softplus_op.h"

#include <cmath>
#include <string>

namespace examples {

template <class T>
xgrad::basic_tensor<T> softplus(const xgrad::basic_tensor<T>& x, double beta, double threshold) {
  if (!(beta > 0) || std::isnan(threshold))
    throw xgrad::Error("softplus: beta must be > 0 and threshold a number, got beta " + std::to_string(beta) +
                       " and threshold " + std::to_string(threshold) + " for input " + xgrad::shape_str(x.shape()));
  const T b = static_cast<T>(beta), limit = static_cast<T>(threshold);

  // 1. The forward value.
  const xt::xarray<T>& in = x.value();
  xt::xarray<T> out = xt::xarray<T>::from_shape(in.shape());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const T z = b * in.data()[i];
    out.data()[i] = z > limit ? in.data()[i] : std::log1p(std::exp(z)) / b;
  }

  // 2. The output node and its backward closure; b and limit are saved by value (step 3 of the recipe).
  return xgrad::make_result<T>("softplus", std::move(out), {x}, [b, limit](xgrad::Node<T>& self) {
    if (!xgrad::needs_grad(self, 0)) return;
    const xt::xarray<T>& in = self.inputs[0]->value;
    xt::xarray<T> g = xt::xarray<T>::from_shape(in.shape());
    for (std::size_t i = 0; i < in.size(); ++i) {
      const T z = b * in.data()[i];
      // d/dx log(1 + e^(b x)) / b = e^(b x) / (1 + e^(b x)) = sigmoid(b x)
      const T slope = z > limit ? T(1) : T(1) / (T(1) + std::exp(-z));
      g.data()[i] = self.grad.data()[i] * slope;
    }
    xgrad::accumulate_grad(*self.inputs[0], std::move(g), "softplus");
  });
}

// 5. float for training, double for gradcheck.
template xgrad::basic_tensor<float> softplus(const xgrad::basic_tensor<float>&, double, double);
template xgrad::basic_tensor<double> softplus(const xgrad::basic_tensor<double>&, double, double);

}  // namespace examples
