// Reductions over all elements or a set of axes; backward broadcasts the gradient back over the reduced axes.
#include <algorithm>

#include <xtensor/xbroadcast.hpp>
#include <xtensor/xreducer.hpp>

#include "autograd/ops_reduce.h"

namespace xgrad {

namespace {
std::vector<std::size_t> normalize_axes(const std::vector<int>& axes, std::size_t ndim, const char* op) {
  std::vector<std::size_t> out;
  for (int a : axes) out.push_back(normalize_axis(a, ndim, op));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    throw Error(std::string(op) + ": an axis is repeated in the list of axes");
  return out;
}

shape_t keepdim_shape(const shape_t& in, const std::vector<std::size_t>& axes) {
  shape_t s = in;
  for (auto a : axes) s[a] = 1;
  return s;
}

// Sum over `axes` scaled by `factor`; shared by sum and mean.
template <class T>
basic_tensor<T> reduce_sum(const basic_tensor<T>& a, const std::vector<std::size_t>& axes, bool keepdim,
                           double factor, const char* op) {
  const shape_t in_shape = a.shape();
  xt::xarray<T> value = xt::sum(a.value(), axes, xt::evaluation_strategy::immediate);
  if (factor != 1.0) value *= static_cast<T>(factor);
  const shape_t kshape = keepdim_shape(in_shape, axes);
  if (keepdim) value.reshape(kshape);
  return make_result<T>(op, std::move(value), {a}, [in_shape, kshape, factor, op](Node<T>& self) {
    xt::xarray<T> g = self.grad;
    g.reshape(kshape);
    xt::xarray<T> full = xt::broadcast(g, in_shape);
    if (factor != 1.0) full *= static_cast<T>(factor);
    accumulate_grad(*self.inputs[0], std::move(full), op);
  });
}

std::vector<std::size_t> all_axes(std::size_t ndim) {
  std::vector<std::size_t> axes(ndim);
  for (std::size_t i = 0; i < ndim; ++i) axes[i] = i;
  return axes;
}

double count_over(const shape_t& shape, const std::vector<std::size_t>& axes) {
  double n = 1;
  for (auto a : axes) n *= static_cast<double>(shape[a]);
  return n;
}
}  // namespace

template <class T>
basic_tensor<T> sum(const basic_tensor<T>& a) {
  return reduce_sum(a, all_axes(a.dim()), false, 1.0, "sum");
}

template <class T>
basic_tensor<T> sum(const basic_tensor<T>& a, std::vector<int> axes, bool keepdim) {
  return reduce_sum(a, normalize_axes(axes, a.dim(), "sum"), keepdim, 1.0, "sum");
}

template <class T>
basic_tensor<T> mean(const basic_tensor<T>& a) {
  if (a.numel() == 0) throw Error("mean: tensor of shape " + shape_str(a.shape()) + " has no elements");
  return reduce_sum(a, all_axes(a.dim()), false, 1.0 / static_cast<double>(a.numel()), "mean");
}

template <class T>
basic_tensor<T> mean(const basic_tensor<T>& a, std::vector<int> axes, bool keepdim) {
  const auto ax = normalize_axes(axes, a.dim(), "mean");
  const double n = count_over(a.shape(), ax);
  if (n == 0) throw Error("mean: reducing over an axis of size 0 in shape " + shape_str(a.shape()));
  return reduce_sum(a, ax, keepdim, 1.0 / n, "mean");
}

#define XGRAD_INSTANTIATE(T)                                                              \
  template basic_tensor<T> sum<T>(const basic_tensor<T>&);                                \
  template basic_tensor<T> sum<T>(const basic_tensor<T>&, std::vector<int>, bool);        \
  template basic_tensor<T> mean<T>(const basic_tensor<T>&);                               \
  template basic_tensor<T> mean<T>(const basic_tensor<T>&, std::vector<int>, bool);
XGRAD_INSTANTIATE(float)
XGRAD_INSTANTIATE(double)
#undef XGRAD_INSTANTIATE

}  // namespace xgrad
