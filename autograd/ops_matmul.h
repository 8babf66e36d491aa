// Batched matrix product on BLAS. Implemented in ops_matmul.cpp, instantiated for float and double.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/tensor.h"

namespace xgrad {

/// Batched matrix product with numpy.matmul rules for operands of 2 or more dims: [..., M, K] @ [..., K, N] →
/// [broadcast(...), M, N]. Runs cblas_sgemm / cblas_dgemm once per matrix of the batch.
/// Throws Error if an operand has fewer than 2 dims, the inner sizes differ or the batch dims do not broadcast.
template <class T> basic_tensor<T> matmul(const basic_tensor<T>& a, const basic_tensor<T>& b);

}  // namespace xgrad
