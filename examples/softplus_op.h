// A custom op written outside the engine, as torch.autograd.Function: softplus. Copy this file (and its .cpp)
// as the template for a new op; nothing in autograd/ or nn/ needs to change.
//
// The recipe (see softplus_op.cpp for each step in code):
//   1. Forward: read the inputs' values (`x.value()`, an xt::xarray<T>) and compute the output value, with plain
//      loops over `.data()` where that is clearest.
//   2. Return `xgrad::make_result<T>(name, value, {inputs...}, backward)`. `backward` is called once, during
//      backward(), with the output's node `self`: `self.grad` is dL/d(output) (the output's shape),
//      `self.inputs[i]->value` the i-th input's value, `self.value` the output's value. For every input with
//      `xgrad::needs_grad(self, i)`, it computes dL/d(input i) and hands it to `xgrad::accumulate_grad`
//      (which adds it in and throws if the shape is wrong). With no input requiring a gradient, or under
//      NoGradGuard, make_result records nothing and the closure is dropped.
//   3. What backward needs beyond the inputs' values (torch's ctx.save_for_backward) is captured by value in the
//      closure. Never capture the returned tensor itself: the node would own a closure owning the node, a
//      reference cycle that is never freed.
//   4. If an input was broadcast, reduce its gradient back with `xgrad::sum_to_shape` (see lerp_op.cpp).
//   5. Write it as a template on the scalar type T and instantiate it for float (training) and double (so that
//      xgrad::gradcheck, which runs in float64, can check the backward against finite differences).
#pragma once

#include "autograd/tensor.h"

namespace examples {

/// softplus(x) = log(1 + exp(beta x)) / beta, elementwise, as torch.nn.functional.softplus: where beta x >
/// threshold the output is x itself (log(1 + e^z) = z to within e^-z there, and exp would overflow for large z).
/// Gradient: sigmoid(beta x), and 1 where beta x > threshold. Shapes: any → the same shape.
/// Throws xgrad::Error naming the op unless beta > 0 and threshold is not NaN.
template <class T>
xgrad::basic_tensor<T> softplus(const xgrad::basic_tensor<T>& x, double beta = 1.0, double threshold = 20.0);

}  // namespace examples
