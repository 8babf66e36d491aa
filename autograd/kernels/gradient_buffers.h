// In-place gradient helpers: they save a temporary array and an addition pass per accumulation by handing an op
// the output gradient itself, or an input's gradient array to write into. The plain alternative, which every use
// must equal, is accumulate_grad(input, computed gradient) (autograd/tensor.h).
#pragma once

#include <utility>

#include "autograd/tensor.h"

namespace xgrad {

/// The output gradient of `self`, for a closure that hands it on (possibly scaled in place): moved out when the
/// engine would drop it after the closure anyway (self does not retain its gradient), copied otherwise. Call it at
/// most once per closure, after every other read of self.grad.
template <class T>
xt::xarray<T> take_grad(Node<T>& self) {
  if (self.retains_grad) return self.grad;
  return std::move(self.grad);
}

/// For an op that writes an input's gradient in place (a GEMM with beta = 1, a scatter-add): the input's gradient
/// array, allocated at the input's shape on first use. `fresh` is set when it holds no earlier gradient — its
/// elements are then uninitialised and the op must overwrite every one (or zero it first).
template <class T>
xt::xarray<T>& grad_slot(Node<T>& node, bool& fresh) {
  fresh = !node.has_grad;
  if (fresh) {
    node.grad = xt::xarray<T>::from_shape(node.value.shape());
    node.has_grad = true;
  }
  return node.grad;
}

/// The backward of a sum of two inputs (add: sign {1, 1}; sub: {1, -1}): input i receives sign[i] * the output
/// gradient, summed back to its shape (sum_to_shape). A receiver of the full shape that already holds a gradient
/// adds into it in place; the last full-shape receiver gets the gradient array itself (take_grad) instead of a
/// copy.
template <class T>
void pass_sum_grad(Node<T>& self, const T (&sign)[2], const char* op) {
  const shape_t out(self.value.shape().begin(), self.value.shape().end());
  bool full[2], need[2];
  int last_full = -1;
  for (int i = 0; i < 2; ++i) {
    need[i] = needs_grad(self, static_cast<std::size_t>(i));
    full[i] = need[i] && shape_t(self.inputs[i]->value.shape().begin(), self.inputs[i]->value.shape().end()) == out;
    if (full[i]) last_full = i;
  }
  for (int i = 0; i < 2; ++i) {  // broadcast inputs first: they read self.grad, which the last full one may take
    if (!need[i] || full[i]) continue;
    const auto& in_shape = self.inputs[i]->value.shape();
    xt::xarray<T> g = sum_to_shape(self.grad, shape_t(in_shape.begin(), in_shape.end()));
    if (sign[i] != T(1))
      for (std::size_t j = 0; j < g.size(); ++j) g.data()[j] *= sign[i];
    accumulate_grad(*self.inputs[i], std::move(g), op);
  }
  for (int i = 0; i < 2; ++i) {
    if (!full[i]) continue;
    Node<T>& in = *self.inputs[i];
    if (sign[i] == T(1) && (i != last_full || in.has_grad)) {
      accumulate_grad(in, self.grad, op);  // adds in place, or copies into a fresh gradient
      continue;
    }
    xt::xarray<T> g = i == last_full ? take_grad(self) : self.grad;
    if (sign[i] != T(1))
      for (std::size_t j = 0; j < g.size(); ++j) g.data()[j] *= sign[i];
    accumulate_grad(in, std::move(g), op);
  }
}

}  // namespace xgrad
