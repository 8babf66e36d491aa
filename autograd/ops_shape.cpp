// Shape ops: the values are copied into contiguous row-major arrays, so every op downstream sees dense data.
#include <algorithm>

#include <xtensor/xmanipulation.hpp>

#include "autograd/ops_shape.h"

namespace xgrad {

template <class T>
basic_tensor<T> reshape(const basic_tensor<T>& a, const std::vector<std::int64_t>& shape) {
  const shape_t in_shape = a.shape();
  shape_t out(shape.size());
  std::size_t known = 1;
  int infer = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw Error("reshape: more than one -1 in the target shape");
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw Error("reshape: negative size " + std::to_string(shape[i]) + " (allowed: sizes >= 0, or one -1)");
    } else {
      out[i] = static_cast<std::size_t>(shape[i]);
      known *= out[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || a.numel() % known != 0)
      throw Error("reshape: cannot infer -1 to reshape " + shape_str(in_shape) + " of " + std::to_string(a.numel()) +
                  " elements");
    out[static_cast<std::size_t>(infer)] = a.numel() / known;
    known *= out[static_cast<std::size_t>(infer)];
  }
  if (known != a.numel())
    throw Error("reshape: cannot reshape " + shape_str(in_shape) + " (" + std::to_string(a.numel()) +
                " elements) to " + shape_str(out));
  xt::xarray<T> value = a.value();
  value.reshape(out);
  return make_result<T>("reshape", std::move(value), {a}, [in_shape](Node<T>& self) {
    xt::xarray<T> g = self.grad;
    g.reshape(in_shape);
    accumulate_grad(*self.inputs[0], std::move(g), "reshape");
  });
}

template <class T>
basic_tensor<T> permute(const basic_tensor<T>& a, std::vector<int> dims) {
  const std::size_t n = a.dim();
  if (dims.size() != n)
    throw Error("permute: got " + std::to_string(dims.size()) + " dims for a tensor of shape " +
                shape_str(a.shape()));
  std::vector<std::size_t> perm(n), inverse(n);
  std::vector<bool> seen(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    perm[i] = normalize_axis(dims[i], n, "permute");
    if (seen[perm[i]]) throw Error("permute: axis " + std::to_string(dims[i]) + " appears twice");
    seen[perm[i]] = true;
    inverse[perm[i]] = i;
  }
  xt::xarray<T> value = xt::transpose(a.value(), perm);
  return make_result<T>("permute", std::move(value), {a}, [inverse](Node<T>& self) {
    accumulate_grad(*self.inputs[0], xt::xarray<T>(xt::transpose(self.grad, inverse)), "permute");
  });
}

template <class T>
basic_tensor<T> transpose(const basic_tensor<T>& a, int dim0, int dim1) {
  const std::size_t n = a.dim();
  std::vector<int> dims(n);
  for (std::size_t i = 0; i < n; ++i) dims[i] = static_cast<int>(i);
  std::swap(dims[normalize_axis(dim0, n, "transpose")], dims[normalize_axis(dim1, n, "transpose")]);
  return permute(a, dims);
}

#define XGRAD_INSTANTIATE(T)                                                                          \
  template basic_tensor<T> reshape<T>(const basic_tensor<T>&, const std::vector<std::int64_t>&);      \
  template basic_tensor<T> permute<T>(const basic_tensor<T>&, std::vector<int>);                      \
  template basic_tensor<T> transpose<T>(const basic_tensor<T>&, int, int);
XGRAD_INSTANTIATE(float)
XGRAD_INSTANTIATE(double)
#undef XGRAD_INSTANTIATE

}  // namespace xgrad
