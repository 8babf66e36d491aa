// Reductions over all elements or a set of axes. Implemented in ops_reduce.cpp, instantiated for float and double.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/tensor.h"

namespace xgrad {

/// Sum of all elements → 0-d tensor.
template <class T> basic_tensor<T> sum(const basic_tensor<T>& a);
/// Sum over `axes` (negative axes count from the end); keeps reduced axes as size 1 when keepdim.
/// Throws Error on an axis out of range or repeated.
template <class T> basic_tensor<T> sum(const basic_tensor<T>& a, std::vector<int> axes, bool keepdim = false);
/// Mean of all elements → 0-d tensor.
template <class T> basic_tensor<T> mean(const basic_tensor<T>& a);
/// Mean over `axes`, as sum.
template <class T> basic_tensor<T> mean(const basic_tensor<T>& a, std::vector<int> axes, bool keepdim = false);

}  // namespace xgrad
