// Elementwise ops: each builds its value and, beside it, the closure that maps the output gradient to inputs.
#include <cmath>

#include <xtensor/xmath.hpp>
#include <xtensor/xoperation.hpp>

#include "autograd/ops_elementwise.h"

namespace xgrad {

namespace {
template <class T>
shape_t shape_of(const Node<T>& n) {
  return shape_t(n.value.shape().begin(), n.value.shape().end());
}
template <class T>
void check_broadcast(const basic_tensor<T>& a, const basic_tensor<T>& b, const char* op) {
  broadcast_shapes(a.shape(), b.shape(), op);
}
}  // namespace

template <class T>
basic_tensor<T> add(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  check_broadcast(a, b, "add");
  return make_result<T>("add", a.value() + b.value(), {a, b}, [](Node<T>& self) {
    for (std::size_t i = 0; i < 2; ++i)
      if (needs_grad(self, i))
        accumulate_grad(*self.inputs[i], sum_to_shape(self.grad, shape_of(*self.inputs[i])), "add");
  });
}

template <class T>
basic_tensor<T> sub(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  check_broadcast(a, b, "sub");
  return make_result<T>("sub", a.value() - b.value(), {a, b}, [](Node<T>& self) {
    if (needs_grad(self, 0)) accumulate_grad(*self.inputs[0], sum_to_shape(self.grad, shape_of(*self.inputs[0])), "sub");
    if (needs_grad(self, 1)) {
      xt::xarray<T> g = -self.grad;
      accumulate_grad(*self.inputs[1], sum_to_shape(g, shape_of(*self.inputs[1])), "sub");
    }
  });
}

template <class T>
basic_tensor<T> mul(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  check_broadcast(a, b, "mul");
  return make_result<T>("mul", a.value() * b.value(), {a, b}, [](Node<T>& self) {
    const auto& x = self.inputs[0]->value;
    const auto& y = self.inputs[1]->value;
    if (needs_grad(self, 0)) {
      xt::xarray<T> g = self.grad * y;
      accumulate_grad(*self.inputs[0], sum_to_shape(g, shape_of(*self.inputs[0])), "mul");
    }
    if (needs_grad(self, 1)) {
      xt::xarray<T> g = self.grad * x;
      accumulate_grad(*self.inputs[1], sum_to_shape(g, shape_of(*self.inputs[1])), "mul");
    }
  });
}

template <class T>
basic_tensor<T> div(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  check_broadcast(a, b, "div");
  return make_result<T>("div", a.value() / b.value(), {a, b}, [](Node<T>& self) {
    const auto& x = self.inputs[0]->value;
    const auto& y = self.inputs[1]->value;
    if (needs_grad(self, 0)) {
      xt::xarray<T> g = self.grad / y;
      accumulate_grad(*self.inputs[0], sum_to_shape(g, shape_of(*self.inputs[0])), "div");
    }
    if (needs_grad(self, 1)) {  // d(x/y)/dy = -x / y^2
      xt::xarray<T> g = -self.grad * x / (y * y);
      accumulate_grad(*self.inputs[1], sum_to_shape(g, shape_of(*self.inputs[1])), "div");
    }
  });
}

template <class T>
basic_tensor<T> add_scalar(const basic_tensor<T>& a, double s) {
  return make_result<T>("add_scalar", a.value() + static_cast<T>(s), {a},
                        [](Node<T>& self) { accumulate_grad(*self.inputs[0], self.grad, "add_scalar"); });
}

template <class T>
basic_tensor<T> mul_scalar(const basic_tensor<T>& a, double s) {
  const T c = static_cast<T>(s);
  return make_result<T>("mul_scalar", a.value() * c, {a}, [c](Node<T>& self) {
    accumulate_grad(*self.inputs[0], xt::xarray<T>(self.grad * c), "mul_scalar");
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
  return make_result<T>("neg", -a.value(), {a}, [](Node<T>& self) {
    accumulate_grad(*self.inputs[0], xt::xarray<T>(-self.grad), "neg");
  });
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
  // 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = k (x + c x^3): one exp per element instead of a libm tanh.
  const T k = static_cast<T>(std::sqrt(2.0 / M_PI));
  const T c = static_cast<T>(0.044715);
  const auto& x = a.value();
  xt::xarray<T> out = xt::xarray<T>::from_shape(x.shape());
  xt::xarray<T> sig = xt::xarray<T>::from_shape(x.shape());  // sigmoid(2u), kept for backward
  for (std::size_t i = 0; i < x.size(); ++i) {
    const T xi = x.data()[i];
    const T s = T(1) / (T(1) + std::exp(T(-2) * k * (xi + c * xi * xi * xi)));
    sig.data()[i] = s;
    out.data()[i] = xi * s;
  }
  return make_result<T>("gelu", std::move(out), {a}, [k, c, sig = std::move(sig)](Node<T>& self) {
    // d/dx [x s(2u)] = s + x s (1 - s) 2 u',  u' = k (1 + 3 c x^2)
    const auto& x = self.inputs[0]->value;
    xt::xarray<T> g = xt::xarray<T>::from_shape(x.shape());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const T xi = x.data()[i], s = sig.data()[i];
      const T d = s + xi * s * (T(1) - s) * T(2) * k * (T(1) + T(3) * c * xi * xi);
      g.data()[i] = self.grad.data()[i] * d;
    }
    accumulate_grad(*self.inputs[0], std::move(g), "gelu");
  });
}

#define XGRAD_INSTANTIATE(T)                                                              \
  template basic_tensor<T> add<T>(const basic_tensor<T>&, const basic_tensor<T>&);        \
  template basic_tensor<T> sub<T>(const basic_tensor<T>&, const basic_tensor<T>&);        \
  template basic_tensor<T> mul<T>(const basic_tensor<T>&, const basic_tensor<T>&);        \
  template basic_tensor<T> div<T>(const basic_tensor<T>&, const basic_tensor<T>&);        \
  template basic_tensor<T> add_scalar<T>(const basic_tensor<T>&, double);                 \
  template basic_tensor<T> mul_scalar<T>(const basic_tensor<T>&, double);                 \
  template basic_tensor<T> pow_scalar<T>(const basic_tensor<T>&, double);                 \
  template basic_tensor<T> neg<T>(const basic_tensor<T>&);                                \
  template basic_tensor<T> exp<T>(const basic_tensor<T>&);                                \
  template basic_tensor<T> log<T>(const basic_tensor<T>&);                                \
  template basic_tensor<T> sqrt<T>(const basic_tensor<T>&);                               \
  template basic_tensor<T> tanh<T>(const basic_tensor<T>&);                               \
  template basic_tensor<T> sigmoid<T>(const basic_tensor<T>&);                            \
  template basic_tensor<T> relu<T>(const basic_tensor<T>&);                               \
  template basic_tensor<T> gelu<T>(const basic_tensor<T>&);
XGRAD_INSTANTIATE(float)
XGRAD_INSTANTIATE(double)
#undef XGRAD_INSTANTIATE

}  // namespace xgrad
