// lerp: a three-input broadcasting op from the public API of autograd/tensor.h.
#include "examples/lerp_op.h"

#include <xtensor/xbroadcast.hpp>

namespace examples {

template <class T>
xgrad::basic_tensor<T> lerp(const xgrad::basic_tensor<T>& start, const xgrad::basic_tensor<T>& end,
                            const xgrad::basic_tensor<T>& weight) {
  // broadcast_shapes throws an Error naming "lerp" and both shapes; the three-way shape is built pairwise.
  const xgrad::shape_t out_shape =
      xgrad::broadcast_shapes(xgrad::broadcast_shapes(start.shape(), end.shape(), "lerp"), weight.shape(), "lerp");
  // Materialise the operands at the output shape so the loops index all three alike.
  const xt::xarray<T> s = xt::broadcast(start.value(), out_shape), e = xt::broadcast(end.value(), out_shape),
                      w = xt::broadcast(weight.value(), out_shape);
  xt::xarray<T> out = xt::xarray<T>::from_shape(out_shape);
  for (std::size_t i = 0; i < out.size(); ++i) out.data()[i] = s.data()[i] + w.data()[i] * (e.data()[i] - s.data()[i]);

  return xgrad::make_result<T>("lerp", std::move(out), {start, end, weight}, [out_shape](xgrad::Node<T>& self) {
    const xt::xarray<T> s = xt::broadcast(self.inputs[0]->value, out_shape);
    const xt::xarray<T> e = xt::broadcast(self.inputs[1]->value, out_shape);
    const xt::xarray<T> w = xt::broadcast(self.inputs[2]->value, out_shape);
    const T* G = self.grad.data();
    // dL/d(input i) at the output shape; then summed over the axes that input was broadcast along.
    auto accumulate = [&](std::size_t i, auto partial) {
      if (!xgrad::needs_grad(self, i)) return;  // e.g. a constant weight: skip its loop entirely
      xt::xarray<T> g = xt::xarray<T>::from_shape(out_shape);
      for (std::size_t j = 0; j < g.size(); ++j) g.data()[j] = G[j] * partial(j);
      const auto& in_shape = self.inputs[i]->value.shape();
      xgrad::accumulate_grad(*self.inputs[i], xgrad::sum_to_shape(g, xgrad::shape_t(in_shape.begin(), in_shape.end())),
                             "lerp");
    };
    accumulate(0, [&](std::size_t j) { return T(1) - w.data()[j]; });
    accumulate(1, [&](std::size_t j) { return w.data()[j]; });
    accumulate(2, [&](std::size_t j) { return e.data()[j] - s.data()[j]; });
  });
}

template xgrad::basic_tensor<float> lerp(const xgrad::basic_tensor<float>&, const xgrad::basic_tensor<float>&,
                                         const xgrad::basic_tensor<float>&);
template xgrad::basic_tensor<double> lerp(const xgrad::basic_tensor<double>&, const xgrad::basic_tensor<double>&,
                                          const xgrad::basic_tensor<double>&);

}  // namespace examples
