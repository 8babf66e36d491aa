// A custom op with several broadcasting inputs, written outside the engine: lerp. It completes the template of
// softplus_op.h with the two things a multi-input op adds: skipping inputs that need no gradient
// (xgrad::needs_grad) and reducing a broadcast gradient back to its input's shape (xgrad::sum_to_shape).
#pragma once

#include "autograd/tensor.h"

namespace examples {

/// lerp(start, end, weight) = start + weight (end - start), elementwise with NumPy broadcasting of all three, as
/// torch.lerp with a tensor weight. Gradients: d/dstart = 1 - weight, d/dend = weight, d/dweight = end - start,
/// each summed back to its input's shape. Throws xgrad::Error naming the op and the shapes if they do not
/// broadcast.
template <class T>
xgrad::basic_tensor<T> lerp(const xgrad::basic_tensor<T>& start, const xgrad::basic_tensor<T>& end,
                            const xgrad::basic_tensor<T>& weight);

}  // namespace examples
