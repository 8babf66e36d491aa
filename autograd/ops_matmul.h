// Matrix product (numpy.matmul rules) on BLAS. Implemented in ops_matmul.cpp, instantiated for float and double.
#pragma once

#include "autograd/tensor.h"

namespace xgrad {

/// Matrix product with numpy.matmul rules. [..., M, K] @ [..., K, N] → [broadcast(...), M, N], batched over the
/// leading dims with broadcasting. A 1-D operand is promoted and the added axis removed from the result:
/// [K] @ [..., K, N] → [..., N] (a 1 prepended), [..., M, K] @ [K] → [..., M] (a 1 appended), and [K] @ [K] is the
/// dot product, a 0-d tensor. Runs cblas_sgemm / cblas_dgemm once per matrix of the batch (once in all when the
/// right operand is a single matrix or vector).
/// Throws Error if an operand is 0-d, the inner sizes differ or the batch dims do not broadcast.
template <class T>
basic_tensor<T> matmul(const basic_tensor<T>& a, const basic_tensor<T>& b);

}  // namespace xgrad
