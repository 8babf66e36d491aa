// Shape ops: reshape, permute, transpose (values are copied into contiguous row-major arrays). Implemented in ops_shape.cpp, instantiated for float and double.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/tensor.h"

namespace xgrad {

/// Same elements, new shape; one entry may be -1 (inferred). Throws Error if the element counts differ.
template <class T> basic_tensor<T> reshape(const basic_tensor<T>& a, const std::vector<std::int64_t>& shape);
/// Reorders axes: output axis i is input axis dims[i] (negative allowed). Throws Error unless dims is a
/// permutation of the input's axes.
template <class T> basic_tensor<T> permute(const basic_tensor<T>& a, std::vector<int> dims);
/// Swaps two axes.
template <class T> basic_tensor<T> transpose(const basic_tensor<T>& a, int dim0, int dim1);

}  // namespace xgrad
