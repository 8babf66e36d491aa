// Elementwise ops: each builds its value and, beside it, the closure that maps the output gradient to inputs.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <type_traits>

#include <xtensor/xbroadcast.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xoperation.hpp>

#include "autograd/kernels/activations.h"
#include "autograd/kernels/gradient_buffers.h"
#include "autograd/kernels/loops.h"
#include "autograd/ops_elementwise.h"

namespace xgrad {

namespace {
template <class T>
shape_t shape_of(const Node<T>& n) {
  return shape_t(n.value.shape().begin(), n.value.shape().end());
}

using kernels::broadcast_map;

// A unary op from two scalar functions: value(x), and derivative(x, y) given y = value(x) (so an op whose
// derivative is cheap in terms of its output need not recompute it).
template <class T, class Value, class Derivative>
basic_tensor<T> unary_op(const char* op, const basic_tensor<T>& a, Value value, Derivative derivative) {
  const auto& x = a.value();
  xt::xarray<T> out = xt::xarray<T>::from_shape(x.shape());
  kernels::for_each_element(x.size(), [&](std::size_t i) { out.data()[i] = value(x.data()[i]); });
  return make_result<T>(op, std::move(out), {a}, [op, derivative](Node<T>& self) {
    const auto& x = self.inputs[0]->value;
    xt::xarray<T> g = xt::xarray<T>::from_shape(x.shape());
    kernels::for_each_element(x.size(), [&](std::size_t i) {
      g.data()[i] = self.grad.data()[i] * derivative(x.data()[i], self.value.data()[i]);
    });
    accumulate_grad(*self.inputs[0], std::move(g), op);
  });
}

// A broadcasting binary op from scalar functions: value(x, y) and the partial derivatives dx(x, y, z), dy(x, y, z)
// given z = value(x, y). Both operands are materialised at the broadcast shape, so the loops stay plain.
template <class T, class Value, class Dx, class Dy>
basic_tensor<T> binary_op(const char* op, const basic_tensor<T>& a, const basic_tensor<T>& b, Value value, Dx dx,
                          Dy dy) {
  const shape_t out_shape = broadcast_shapes(a.shape(), b.shape(), op);
  return make_result<T>(op, broadcast_map(a.value(), b.value(), out_shape, value), {a, b},
                        [op, out_shape, dx, dy](Node<T>& self) {
                          const xt::xarray<T> x = xt::broadcast(self.inputs[0]->value, out_shape);
                          const xt::xarray<T> y = xt::broadcast(self.inputs[1]->value, out_shape);
                          const T* G = self.grad.data();
                          const T* Z = self.value.data();
                          xt::xarray<T> g = xt::xarray<T>::from_shape(out_shape);
                          if (needs_grad(self, 0)) {
                            for (std::size_t i = 0; i < g.size(); ++i)
                              g.data()[i] = G[i] * dx(x.data()[i], y.data()[i], Z[i]);
                            accumulate_grad(*self.inputs[0], sum_to_shape(g, shape_of(*self.inputs[0])), op);
                          }
                          if (needs_grad(self, 1)) {
                            for (std::size_t i = 0; i < g.size(); ++i)
                              g.data()[i] = G[i] * dy(x.data()[i], y.data()[i], Z[i]);
                            accumulate_grad(*self.inputs[1], sum_to_shape(g, shape_of(*self.inputs[1])), op);
                          }
                        });
}

// A comparison as a mask at the broadcast shape; the shape check comes first so the error names the op.
template <class T, class Compare>
xt::xarray<bool> compare(const char* op, const basic_tensor<T>& a, const basic_tensor<T>& b, Compare cmp) {
  const shape_t out_shape = broadcast_shapes(a.shape(), b.shape(), op);
  const xt::xarray<T> x = xt::broadcast(a.value(), out_shape), y = xt::broadcast(b.value(), out_shape);
  xt::xarray<bool> out = xt::xarray<bool>::from_shape(out_shape);
  for (std::size_t i = 0; i < out.size(); ++i) out.data()[i] = cmp(x.data()[i], y.data()[i]);
  return out;
}
}  // namespace

template <class T>
basic_tensor<T> add(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  const shape_t out_shape = broadcast_shapes(a.shape(), b.shape(), "add");
  return make_result<T>("add", broadcast_map(a.value(), b.value(), out_shape, std::plus<T>()), {a, b},
                        [](Node<T>& self) {
                          pass_sum_grad<T>(self, {T(1), T(1)}, "add");
                        });
}

template <class T>
basic_tensor<T> sub(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  const shape_t out_shape = broadcast_shapes(a.shape(), b.shape(), "sub");
  return make_result<T>("sub", broadcast_map(a.value(), b.value(), out_shape, std::minus<T>()), {a, b},
                        [](Node<T>& self) {
                          pass_sum_grad<T>(self, {T(1), T(-1)}, "sub");
                        });
}

template <class T>
basic_tensor<T> mul(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  const shape_t out_shape = broadcast_shapes(a.shape(), b.shape(), "mul");
  return make_result<T>("mul", broadcast_map(a.value(), b.value(), out_shape, std::multiplies<T>()), {a, b},
                        [out_shape](Node<T>& self) {
                          const auto& x = self.inputs[0]->value;
                          const auto& y = self.inputs[1]->value;
                          if (needs_grad(self, 0)) {  // d(xy)/dx = y
                            xt::xarray<T> g = broadcast_map(self.grad, y, out_shape, std::multiplies<T>());
                            accumulate_grad(*self.inputs[0], sum_to_shape(g, shape_of(*self.inputs[0])), "mul");
                          }
                          if (needs_grad(self, 1)) {  // d(xy)/dy = x
                            xt::xarray<T> g = broadcast_map(self.grad, x, out_shape, std::multiplies<T>());
                            accumulate_grad(*self.inputs[1], sum_to_shape(g, shape_of(*self.inputs[1])), "mul");
                          }
                        });
}

template <class T>
basic_tensor<T> div(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  const shape_t out_shape = broadcast_shapes(a.shape(), b.shape(), "div");
  return make_result<T>("div", broadcast_map(a.value(), b.value(), out_shape, std::divides<T>()), {a, b},
                        [out_shape](Node<T>& self) {
                          const auto& y = self.inputs[1]->value;
                          if (needs_grad(self, 0)) {  // d(x/y)/dx = 1/y
                            xt::xarray<T> g = broadcast_map(self.grad, y, out_shape, std::divides<T>());
                            accumulate_grad(*self.inputs[0], sum_to_shape(g, shape_of(*self.inputs[0])), "div");
                          }
                          if (needs_grad(self, 1)) {  // d(x/y)/dy = -(x/y) / y = -z / y
                            xt::xarray<T> gz = broadcast_map(self.grad, self.value, out_shape, std::multiplies<T>());
                            xt::xarray<T> g = broadcast_map(gz, y, out_shape, [](T u, T v) { return -u / v; });
                            accumulate_grad(*self.inputs[1], sum_to_shape(g, shape_of(*self.inputs[1])), "div");
                          }
                        });
}

template <class T>
basic_tensor<T> add_scalar(const basic_tensor<T>& a, double s) {
  return make_result<T>("add_scalar", a.value() + static_cast<T>(s), {a},
                        [](Node<T>& self) { accumulate_grad(*self.inputs[0], take_grad(self), "add_scalar"); });
}

template <class T>
basic_tensor<T> mul_scalar(const basic_tensor<T>& a, double s) {
  const T c = static_cast<T>(s);
  const auto& x = a.value();
  xt::xarray<T> out = xt::xarray<T>::from_shape(x.shape());
  kernels::for_each_element(x.size(), [&](std::size_t i) { out.data()[i] = x.data()[i] * c; });
  return make_result<T>("mul_scalar", std::move(out), {a}, [c](Node<T>& self) {
    xt::xarray<T> g = take_grad(self);  // d(cx)/dx = c, scaling the output gradient in place
    kernels::for_each_element(g.size(), [&](std::size_t i) { g.data()[i] *= c; });
    accumulate_grad(*self.inputs[0], std::move(g), "mul_scalar");
  });
}

template <class T>
basic_tensor<T> pow_scalar(const basic_tensor<T>& a, double p) {
  const T e = static_cast<T>(p);
  return make_result<T>("pow_scalar", xt::pow(a.value(), e), {a}, [e](Node<T>& self) {
    if (e == T(0)) {  // x^0 = 1 everywhere: zero gradient, also at x = 0 (where e * x^(e-1) would be 0 * inf)
      accumulate_grad(*self.inputs[0], xt::xarray<T>(xt::zeros<T>(self.grad.shape())), "pow_scalar");
      return;
    }
    const auto& x = self.inputs[0]->value;
    accumulate_grad(*self.inputs[0], xt::xarray<T>(self.grad * e * xt::pow(x, e - T(1))), "pow_scalar");
  });
}

template <class T>
basic_tensor<T> neg(const basic_tensor<T>& a) {
  return make_result<T>("neg", -a.value(), {a},
                        [](Node<T>& self) { accumulate_grad(*self.inputs[0], xt::xarray<T>(-self.grad), "neg"); });
}

template <class T>
basic_tensor<T> exp(const basic_tensor<T>& a) {
  return make_result<T>("exp", xt::exp(a.value()), {a}, [](Node<T>& self) {
    accumulate_grad(*self.inputs[0], xt::xarray<T>(self.grad * self.value), "exp");
  });
}

template <class T>
basic_tensor<T> log(const basic_tensor<T>& a) {
  return make_result<T>("log", xt::log(a.value()), {a}, [](Node<T>& self) {
    accumulate_grad(*self.inputs[0], xt::xarray<T>(self.grad / self.inputs[0]->value), "log");
  });
}

template <class T>
basic_tensor<T> sqrt(const basic_tensor<T>& a) {
  return make_result<T>("sqrt", xt::sqrt(a.value()), {a}, [](Node<T>& self) {
    accumulate_grad(*self.inputs[0], xt::xarray<T>(self.grad / (T(2) * self.value)), "sqrt");
  });
}

template <class T>
basic_tensor<T> tanh(const basic_tensor<T>& a) {
  return make_result<T>("tanh", xt::tanh(a.value()), {a}, [](Node<T>& self) {
    accumulate_grad(*self.inputs[0], xt::xarray<T>(self.grad * (T(1) - self.value * self.value)), "tanh");
  });
}

template <class T>
basic_tensor<T> sigmoid(const basic_tensor<T>& a) {
  return make_result<T>("sigmoid", T(1) / (T(1) + xt::exp(-a.value())), {a}, [](Node<T>& self) {
    accumulate_grad(*self.inputs[0], xt::xarray<T>(self.grad * self.value * (T(1) - self.value)), "sigmoid");
  });
}

template <class T>
basic_tensor<T> relu(const basic_tensor<T>& a) {
  return make_result<T>("relu", xt::maximum(a.value(), T(0)), {a}, [](Node<T>& self) {
    const auto& x = self.inputs[0]->value;
    accumulate_grad(*self.inputs[0], xt::xarray<T>(xt::where(x > T(0), self.grad, T(0))), "relu");
  });
}

template <class T>
basic_tensor<T> gelu(const basic_tensor<T>& a) {
  // gelu(x) = 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = k (x + c x^3), k = sqrt(2 / pi), c = 0.044715: one exp per
  // element instead of a tanh. sig = sigmoid(2u) is kept for backward.
  const auto& x = a.value();
  xt::xarray<T> out = xt::xarray<T>::from_shape(x.shape());
  xt::xarray<T> sig = xt::xarray<T>::from_shape(x.shape());
  simd::gelu(x.data(), out.data(), sig.data(), x.size());
  return make_result<T>("gelu", std::move(out), {a}, [sig = std::move(sig)](Node<T>& self) {
    // d/dx [x sig] = sig + x sig (1 - sig) 2 u',  u' = k (1 + 3 c x^2); the output gradient is scaled in place.
    xt::xarray<T> g = take_grad(self);
    simd::gelu_backward(self.inputs[0]->value.data(), sig.data(), g.data(), g.size());
    accumulate_grad(*self.inputs[0], std::move(g), "gelu");
  });
}

template <class T>
basic_tensor<T> gelu_erf(const basic_tensor<T>& a) {
  const T inv_sqrt2 = static_cast<T>(1.0 / std::sqrt(2.0));
  const T inv_sqrt_2pi = static_cast<T>(1.0 / std::sqrt(2.0 * M_PI));
  return unary_op<T>(
      "gelu_erf", a, [=](T x) { return T(0.5) * x * (T(1) + std::erf(x * inv_sqrt2)); },
      // d/dx [x Φ(x)] = Φ(x) + x φ(x)
      [=](T x, T) { return T(0.5) * (T(1) + std::erf(x * inv_sqrt2)) + x * inv_sqrt_2pi * std::exp(T(-0.5) * x * x); });
}

template <class T>
basic_tensor<T> silu(const basic_tensor<T>& a) {
  return unary_op<T>(
      "silu", a, [](T x) { return x / (T(1) + std::exp(-x)); },
      // d/dx [x s(x)] = s (1 + x (1 - s))
      [](T x, T) {
        const T s = T(1) / (T(1) + std::exp(-x));
        return s * (T(1) + x * (T(1) - s));
      });
}

template <class T>
basic_tensor<T> rsqrt(const basic_tensor<T>& a) {
  return unary_op<T>(
      "rsqrt", a, [](T x) { return T(1) / std::sqrt(x); },
      // d/dx x^(-1/2) = -x^(-3/2) / 2 = -y^3 / 2
      [](T, T y) { return T(-0.5) * y * y * y; });
}

template <class T>
basic_tensor<T> abs(const basic_tensor<T>& a) {
  return unary_op<T>(
      "abs", a, [](T x) { return std::abs(x); }, [](T x, T) { return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0)); });
}

template <class T>
basic_tensor<T> clamp(const basic_tensor<T>& a, double min, double max) {
  if (std::isnan(min) || std::isnan(max) || min > max)
    throw Error("clamp: needs min <= max (either may be infinite, neither NaN), got min " + std::to_string(min) +
                " and max " + std::to_string(max));
  const T lo = static_cast<T>(min), hi = static_cast<T>(max);
  return unary_op<T>(
      // std::max/std::min return their first argument when comparisons fail, so NaN propagates.
      "clamp", a, [=](T x) { return std::min(std::max(x, lo), hi); },
      [=](T x, T) { return lo < x && x < hi ? T(1) : T(0); });
}

template <class T>
basic_tensor<T> pow(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  return binary_op<T>(
      "pow", a, b, [](T x, T y) { return std::pow(x, y); },
      [](T x, T y, T) { return y == T(0) ? T(0) : y * std::pow(x, y - T(1)); },
      [](T x, T y, T z) { return x == T(0) && y >= T(0) ? T(0) : z * std::log(x); });
}

template <class T>
basic_tensor<T> maximum(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  return binary_op<T>(
      "maximum", a, b, [](T x, T y) { return x >= y || std::isnan(x) ? x : y; },  // NaN propagates
      [](T x, T y, T) { return x > y ? T(1) : (x == y ? T(0.5) : T(0)); },
      [](T x, T y, T) { return y > x ? T(1) : (x == y ? T(0.5) : T(0)); });
}

template <class T>
basic_tensor<T> minimum(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  return binary_op<T>(
      "minimum", a, b, [](T x, T y) { return x <= y || std::isnan(x) ? x : y; },  // NaN propagates
      [](T x, T y, T) { return x < y ? T(1) : (x == y ? T(0.5) : T(0)); },
      [](T x, T y, T) { return y < x ? T(1) : (x == y ? T(0.5) : T(0)); });
}

template <class T>
xt::xarray<bool> eq(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  return compare("eq", a, b, [](T x, T y) { return x == y; });
}
template <class T>
xt::xarray<bool> ne(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  return compare("ne", a, b, [](T x, T y) { return x != y; });
}
template <class T>
xt::xarray<bool> lt(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  return compare("lt", a, b, [](T x, T y) { return x < y; });
}
template <class T>
xt::xarray<bool> le(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  return compare("le", a, b, [](T x, T y) { return x <= y; });
}
template <class T>
xt::xarray<bool> gt(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  return compare("gt", a, b, [](T x, T y) { return x > y; });
}
template <class T>
xt::xarray<bool> ge(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  return compare("ge", a, b, [](T x, T y) { return x >= y; });
}

template <class T>
basic_tensor<T> where(const xt::xarray<bool>& cond, const basic_tensor<T>& a, const basic_tensor<T>& b) {
  const shape_t cond_shape(cond.shape().begin(), cond.shape().end());
  const shape_t out_shape = broadcast_shapes(broadcast_shapes(cond_shape, a.shape(), "where"), b.shape(), "where");
  xt::xarray<bool> c = xt::broadcast(cond, out_shape);
  xt::xarray<T> out = xt::where(c, xt::broadcast(a.value(), out_shape), xt::broadcast(b.value(), out_shape));
  return make_result<T>("where", std::move(out), {a, b}, [c = std::move(c)](Node<T>& self) {
    if (needs_grad(self, 0)) {
      xt::xarray<T> g = xt::where(c, self.grad, T(0));
      accumulate_grad(*self.inputs[0], sum_to_shape(g, shape_of(*self.inputs[0])), "where");
    }
    if (needs_grad(self, 1)) {
      xt::xarray<T> g = xt::where(c, T(0), self.grad);
      accumulate_grad(*self.inputs[1], sum_to_shape(g, shape_of(*self.inputs[1])), "where");
    }
  });
}

#define XGRAD_INSTANTIATE(T)                                                           \
  template basic_tensor<T> add<T>(const basic_tensor<T>&, const basic_tensor<T>&);     \
  template basic_tensor<T> sub<T>(const basic_tensor<T>&, const basic_tensor<T>&);     \
  template basic_tensor<T> mul<T>(const basic_tensor<T>&, const basic_tensor<T>&);     \
  template basic_tensor<T> div<T>(const basic_tensor<T>&, const basic_tensor<T>&);     \
  template basic_tensor<T> add_scalar<T>(const basic_tensor<T>&, double);              \
  template basic_tensor<T> mul_scalar<T>(const basic_tensor<T>&, double);              \
  template basic_tensor<T> pow_scalar<T>(const basic_tensor<T>&, double);              \
  template basic_tensor<T> neg<T>(const basic_tensor<T>&);                             \
  template basic_tensor<T> exp<T>(const basic_tensor<T>&);                             \
  template basic_tensor<T> log<T>(const basic_tensor<T>&);                             \
  template basic_tensor<T> sqrt<T>(const basic_tensor<T>&);                            \
  template basic_tensor<T> tanh<T>(const basic_tensor<T>&);                            \
  template basic_tensor<T> sigmoid<T>(const basic_tensor<T>&);                         \
  template basic_tensor<T> relu<T>(const basic_tensor<T>&);                            \
  template basic_tensor<T> gelu<T>(const basic_tensor<T>&);                            \
  template basic_tensor<T> gelu_erf<T>(const basic_tensor<T>&);                        \
  template basic_tensor<T> silu<T>(const basic_tensor<T>&);                            \
  template basic_tensor<T> rsqrt<T>(const basic_tensor<T>&);                           \
  template basic_tensor<T> abs<T>(const basic_tensor<T>&);                             \
  template basic_tensor<T> clamp<T>(const basic_tensor<T>&, double, double);           \
  template basic_tensor<T> pow<T>(const basic_tensor<T>&, const basic_tensor<T>&);     \
  template basic_tensor<T> maximum<T>(const basic_tensor<T>&, const basic_tensor<T>&); \
  template basic_tensor<T> minimum<T>(const basic_tensor<T>&, const basic_tensor<T>&); \
  template xt::xarray<bool> eq<T>(const basic_tensor<T>&, const basic_tensor<T>&);     \
  template xt::xarray<bool> ne<T>(const basic_tensor<T>&, const basic_tensor<T>&);     \
  template xt::xarray<bool> lt<T>(const basic_tensor<T>&, const basic_tensor<T>&);     \
  template xt::xarray<bool> le<T>(const basic_tensor<T>&, const basic_tensor<T>&);     \
  template xt::xarray<bool> gt<T>(const basic_tensor<T>&, const basic_tensor<T>&);     \
  template xt::xarray<bool> ge<T>(const basic_tensor<T>&, const basic_tensor<T>&);     \
  template basic_tensor<T> where<T>(const xt::xarray<bool>&, const basic_tensor<T>&, const basic_tensor<T>&);
XGRAD_INSTANTIATE(float)
XGRAD_INSTANTIATE(double)
#undef XGRAD_INSTANTIATE

}  // namespace xgrad
