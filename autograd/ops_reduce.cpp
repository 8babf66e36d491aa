// Reductions over all elements or a set of axes. sum and mean go through xtensor reducers; max, min, var and
// logsumexp walk the input once per pass with a (input index, output index) odometer, in plain loops (logsumexp over
// the last axis alone goes row by row, with the SIMD exp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "autograd/kernels/loops.h"
#include "autograd/kernels/softmax.h"
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
basic_tensor<T> reduce_sum(const basic_tensor<T>& a, const std::vector<std::size_t>& axes, bool keepdim, double factor,
                           const char* op) {
  const shape_t in_shape = a.shape();
  xt::xarray<T> value = sum_over_axes(a.value(), axes);  // keepdim shape
  if (factor != 1.0) value *= static_cast<T>(factor);
  const shape_t kshape = keepdim_shape(in_shape, axes);
  if (!keepdim) {
    shape_t dropped;
    for (std::size_t i = 0; i < in_shape.size(); ++i)
      if (std::find(axes.begin(), axes.end(), i) == axes.end()) dropped.push_back(in_shape[i]);
    value.reshape(dropped);
  }
  return make_result<T>(op, std::move(value), {a}, [in_shape, kshape, axes, factor, op](Node<T>& self) {
    xt::xarray<T> g = self.grad;
    g.reshape(kshape);
    xt::xarray<T> full = broadcast_over_axes(g, in_shape, axes);
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

// Where every element of an input goes in a reduction over sorted `axes`: the output shape, and a walk over the
// input in row-major order yielding (input flat index, output flat index) pairs. The output index is that of the
// keepdim shape, which has the same flat order as the squeezed one, so one walk serves both.
struct ReductionWalk {
  shape_t in_shape;
  std::vector<std::size_t> axes;
  shape_t out_shape;         // keepdim or squeezed, as asked
  std::size_t out_size = 1;  // elements of the output
  std::size_t count = 1;     // elements reduced into each output element

  ReductionWalk(const shape_t& shape, std::vector<std::size_t> reduced_axes, bool keepdim, const char* op)
      : in_shape(shape), axes(std::move(reduced_axes)) {
    for (std::size_t d = 0; d < in_shape.size(); ++d) {
      if (std::binary_search(axes.begin(), axes.end(), d)) {
        count *= in_shape[d];
        if (keepdim) out_shape.push_back(1);
      } else {
        out_size *= in_shape[d];
        out_shape.push_back(in_shape[d]);
      }
    }
    if (count == 0) throw Error(std::string(op) + ": reducing over an axis of size 0 in shape " + shape_str(in_shape));
  }

  // Calls f(i, o) for every input flat index i, o the output flat index it reduces into.
  template <class F>
  void for_each(F&& f) const {
    const std::size_t nd = in_shape.size();
    std::vector<std::size_t> out_stride(nd, 0);  // reduced axes do not move the output index
    std::size_t stride = 1;
    for (std::size_t d = nd; d-- > 0;)
      if (!std::binary_search(axes.begin(), axes.end(), d)) {
        out_stride[d] = stride;
        stride *= in_shape[d];
      }
    const std::size_t n = out_size * count;
    std::vector<std::size_t> index(nd, 0);
    std::size_t o = 0;
    for (std::size_t i = 0; i < n; ++i) {
      f(i, o);
      for (std::size_t d = nd; d-- > 0;) {  // odometer step
        if (++index[d] < in_shape[d]) {
          o += out_stride[d];
          break;
        }
        o -= out_stride[d] * (in_shape[d] - 1);
        index[d] = 0;
      }
    }
  }
};

// max (is_max) or min over a reduction; the gradient is split evenly among the elements equal to the result.
template <class T>
basic_tensor<T> reduce_extreme(const basic_tensor<T>& a, std::vector<std::size_t> axes, bool keepdim, bool is_max,
                               const char* op) {
  const ReductionWalk red(a.shape(), std::move(axes), keepdim, op);
  const T* X = a.value().data();
  xt::xarray<T> out = xt::xarray<T>::from_shape(red.out_shape);
  std::fill(out.begin(), out.end(), (is_max ? -1 : 1) * std::numeric_limits<T>::infinity());
  T* M = out.data();
  red.for_each([&](std::size_t i, std::size_t o) {
    // Once M[o] is NaN no comparison succeeds, so a NaN anywhere in the slice sticks.
    if ((is_max ? X[i] > M[o] : X[i] < M[o]) || std::isnan(X[i])) M[o] = X[i];
  });
  return make_result<T>(op, std::move(out), {a}, [red, op](Node<T>& self) {
    const T* X = self.inputs[0]->value.data();
    const T* M = self.value.data();
    const T* G = self.grad.data();
    std::vector<std::size_t> ties(red.out_size, 0);
    red.for_each([&](std::size_t i, std::size_t o) { ties[o] += X[i] == M[o]; });
    xt::xarray<T> gx = xt::xarray<T>::from_shape(red.in_shape);
    red.for_each(
        [&](std::size_t i, std::size_t o) { gx.data()[i] = X[i] == M[o] ? G[o] / static_cast<T>(ties[o]) : T(0); });
    accumulate_grad(*self.inputs[0], std::move(gx), op);
  });
}

template <class T>
basic_tensor<T> reduce_var(const basic_tensor<T>& a, std::vector<std::size_t> axes, bool keepdim, double correction) {
  if (!(correction >= 0)) throw Error("var: correction must be >= 0, got " + std::to_string(correction));
  const ReductionWalk red(a.shape(), std::move(axes), keepdim, "var");
  const T* X = a.value().data();
  // Two passes (mean, then squared deviations) in double: one-pass sum-of-squares formulas cancel badly.
  std::vector<double> mean(red.out_size, 0.0), squares(red.out_size, 0.0);
  red.for_each([&](std::size_t i, std::size_t o) { mean[o] += X[i]; });
  for (auto& m : mean) m /= static_cast<double>(red.count);
  red.for_each([&](std::size_t i, std::size_t o) { squares[o] += (X[i] - mean[o]) * (X[i] - mean[o]); });
  // As torch.var: a non-positive number of degrees of freedom divides by 0 (inf, or NaN for 0/0).
  const double dof = std::max(0.0, static_cast<double>(red.count) - correction);
  xt::xarray<T> out = xt::xarray<T>::from_shape(red.out_shape);
  for (std::size_t o = 0; o < red.out_size; ++o) out.data()[o] = static_cast<T>(squares[o] / dof);
  return make_result<T>("var", std::move(out), {a}, [red, dof, mean = std::move(mean)](Node<T>& self) {
    const T* X = self.inputs[0]->value.data();
    const T* G = self.grad.data();
    xt::xarray<T> gx = xt::xarray<T>::from_shape(red.in_shape);
    red.for_each(
        [&](std::size_t i, std::size_t o) { gx.data()[i] = static_cast<T>(G[o] * 2.0 * (X[i] - mean[o]) / dof); });
    accumulate_grad(*self.inputs[0], std::move(gx), "var");
  });
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

template <class T>
basic_tensor<T> max(const basic_tensor<T>& a) {
  return reduce_extreme(a, all_axes(a.dim()), false, true, "max");
}

template <class T>
basic_tensor<T> max(const basic_tensor<T>& a, std::vector<int> axes, bool keepdim) {
  return reduce_extreme(a, normalize_axes(axes, a.dim(), "max"), keepdim, true, "max");
}

template <class T>
basic_tensor<T> min(const basic_tensor<T>& a) {
  return reduce_extreme(a, all_axes(a.dim()), false, false, "min");
}

template <class T>
basic_tensor<T> min(const basic_tensor<T>& a, std::vector<int> axes, bool keepdim) {
  return reduce_extreme(a, normalize_axes(axes, a.dim(), "min"), keepdim, false, "min");
}

template <class T>
basic_tensor<T> var(const basic_tensor<T>& a) {
  return reduce_var(a, all_axes(a.dim()), false, 1.0);
}

template <class T>
basic_tensor<T> var(const basic_tensor<T>& a, std::vector<int> axes, bool keepdim, double correction) {
  return reduce_var(a, normalize_axes(axes, a.dim(), "var"), keepdim, correction);
}

namespace {
// The largest of x[0, n), NaN when one is NaN: eight running maxima and a NaN flag, so that no compare waits on the
// one before it (one running maximum with a NaN test was a chain of dependent branches, ~4 cycles per element).
template <class T>
T row_max(const T* x, std::size_t n) {
  T m[8];
  std::fill(m, m + 8, -std::numeric_limits<T>::infinity());
  bool nan = false;
  std::size_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (std::size_t k = 0; k < 8; ++k) {
      m[k] = x[j + k] > m[k] ? x[j + k] : m[k];
      nan |= x[j + k] != x[j + k];
    }
  for (; j < n; ++j) {
    m[0] = x[j] > m[0] ? x[j] : m[0];
    nan |= x[j] != x[j];
  }
  return nan ? std::numeric_limits<T>::quiet_NaN() : *std::max_element(m, m + 8);
}

// logsumexp over the last axis, one row at a time: the row's max, its shifted exps by the SIMD kernel
// (simd::exp_shifted), their sum in double; rows in parallel, each written by one thread. The readout's log Z
// (z_loss, every step) takes this path; logsumexp_walk is its reference (tests/test_ops_more.cpp).
template <class T>
basic_tensor<T> logsumexp_rows(const basic_tensor<T>& a, const shape_t& out_shape) {
  const std::size_t cols = a.shape().back(), rows = a.numel() / cols;
  const T* X = a.value().data();
  xt::xarray<T> out = xt::xarray<T>::from_shape(out_shape);
  parallel_for(0, rows, grain_for(8 * cols), [&](std::size_t lo, std::size_t hi) {
    std::vector<T> e(cols);  // the shifted exps of one row
    for (std::size_t i = lo; i < hi; ++i) {
      const T* x = X + i * cols;
      const T m = row_max(x, cols);
      if (!std::isfinite(m)) {  // an infinite max is the answer itself (all -inf, or a +inf)
        out.data()[i] = m;
        continue;
      }
      simd::exp_shifted(x, m, e.data(), cols);
      double s = 0;  // summed in double: many small terms beside one of size 1
      for (std::size_t j = 0; j < cols; ++j) s += static_cast<double>(e[j]);
      out.data()[i] = static_cast<T>(m + std::log(s));
    }
  });
  return make_result<T>("logsumexp", std::move(out), {a}, [rows, cols](Node<T>& self) {
    const T* X = self.inputs[0]->value.data();
    xt::xarray<T> gx = xt::xarray<T>::from_shape(self.inputs[0]->value.shape());
    kernels::for_each_row(rows, 8 * cols, [&](std::size_t i) {
      const T lse = self.value.data()[i], g = self.grad.data()[i];
      T* d = gx.data() + i * cols;
      if (lse == -std::numeric_limits<T>::infinity()) {  // an all -inf row passes zero gradient, not NaN
        std::fill(d, d + cols, T(0));
        return;
      }
      simd::exp_shifted(X + i * cols, lse, d, cols);  // d lse / dx_j = exp(x_j - lse): the softmax of the row
      for (std::size_t j = 0; j < cols; ++j) d[j] *= g;
    });
    accumulate_grad(*self.inputs[0], std::move(gx), "logsumexp");
  });
}

// logsumexp over any axes, walking the input once per pass in plain loops.
template <class T>
basic_tensor<T> logsumexp_walk(const basic_tensor<T>& a, const ReductionWalk& red) {
  const T* X = a.value().data();
  std::vector<T> m(red.out_size, -std::numeric_limits<T>::infinity());
  red.for_each([&](std::size_t i, std::size_t o) {
    if (X[i] > m[o] || std::isnan(X[i])) m[o] = X[i];  // NaN sticks, so the result is NaN
  });
  std::vector<double> s(red.out_size, 0.0);  // summed in double: many small terms beside one of size 1
  red.for_each([&](std::size_t i, std::size_t o) {
    if (std::isfinite(m[o])) s[o] += std::exp(static_cast<double>(X[i] - m[o]));
  });
  xt::xarray<T> out = xt::xarray<T>::from_shape(red.out_shape);
  for (std::size_t o = 0; o < red.out_size; ++o)  // an infinite max is the answer itself (all -inf, or a +inf)
    out.data()[o] = std::isfinite(m[o]) ? static_cast<T>(m[o] + std::log(s[o])) : m[o];
  return make_result<T>("logsumexp", std::move(out), {a}, [red](Node<T>& self) {
    // d lse / dx_i = exp(x_i - lse): the softmax of the slice
    const T* X = self.inputs[0]->value.data();
    const T* L = self.value.data();
    const T* G = self.grad.data();
    xt::xarray<T> gx = xt::xarray<T>::from_shape(red.in_shape);
    red.for_each([&](std::size_t i, std::size_t o) {
      gx.data()[i] = L[o] == -std::numeric_limits<T>::infinity() ? T(0) : G[o] * std::exp(X[i] - L[o]);
    });
    accumulate_grad(*self.inputs[0], std::move(gx), "logsumexp");
  });
}
}  // namespace

template <class T>
basic_tensor<T> logsumexp(const basic_tensor<T>& a, std::vector<int> axes, bool keepdim) {
  const ReductionWalk red(a.shape(), normalize_axes(axes, a.dim(), "logsumexp"), keepdim, "logsumexp");
  const bool last_axis_only = red.axes.size() == 1 && red.axes[0] + 1 == a.dim();
  return last_axis_only ? logsumexp_rows(a, red.out_shape) : logsumexp_walk(a, red);
}

#define XGRAD_INSTANTIATE(T)                                                               \
  template basic_tensor<T> sum<T>(const basic_tensor<T>&);                                 \
  template basic_tensor<T> sum<T>(const basic_tensor<T>&, std::vector<int>, bool);         \
  template basic_tensor<T> mean<T>(const basic_tensor<T>&);                                \
  template basic_tensor<T> mean<T>(const basic_tensor<T>&, std::vector<int>, bool);        \
  template basic_tensor<T> max<T>(const basic_tensor<T>&);                                 \
  template basic_tensor<T> max<T>(const basic_tensor<T>&, std::vector<int>, bool);         \
  template basic_tensor<T> min<T>(const basic_tensor<T>&);                                 \
  template basic_tensor<T> min<T>(const basic_tensor<T>&, std::vector<int>, bool);         \
  template basic_tensor<T> var<T>(const basic_tensor<T>&);                                 \
  template basic_tensor<T> var<T>(const basic_tensor<T>&, std::vector<int>, bool, double); \
  template basic_tensor<T> logsumexp<T>(const basic_tensor<T>&, std::vector<int>, bool);
XGRAD_INSTANTIATE(float)
XGRAD_INSTANTIATE(double)
#undef XGRAD_INSTANTIATE

}  // namespace xgrad
