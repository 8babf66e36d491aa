// Shape ops: reshape, permute, transpose, unsqueeze, squeeze, expand, flatten, and joining/splitting along a dim
// (concat, stack, split, chunk, slice). Values are copied into contiguous row-major arrays. Semantics follow
// PyTorch unless a docstring says otherwise. Implemented in ops_shape.cpp, instantiated for float and double.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <vector>

#include "autograd/tensor.h"

namespace xgrad {

/// Same elements, new shape; one entry may be -1 (inferred). Throws Error if the element counts differ.
template <class T>
basic_tensor<T> reshape(const basic_tensor<T>& a, const std::vector<std::int64_t>& shape);
/// Reorders axes: output axis i is input axis dims[i] (negative allowed). Throws Error unless dims is a
/// permutation of the input's axes.
template <class T>
basic_tensor<T> permute(const basic_tensor<T>& a, std::vector<int> dims);
/// Swaps two axes.
template <class T>
basic_tensor<T> transpose(const basic_tensor<T>& a, int dim0, int dim1);

/// Inserts a size-1 axis so that it becomes axis `dim` of the output: [2, 3] with dim 1 → [2, 1, 3].
/// dim lies in [-(ndim + 1), ndim]; -1 appends. Throws Error outside that range.
template <class T>
basic_tensor<T> unsqueeze(const basic_tensor<T>& a, int dim);
/// Removes every size-1 axis: [1, 3, 1, 2] → [3, 2]; [1, 1] → 0-d.
template <class T>
basic_tensor<T> squeeze(const basic_tensor<T>& a);
/// Removes axis `dim` if its size is 1. As torch.squeeze, an axis of any other size is left in place (the
/// result is a copy of `a` with the same shape), not an error. A 0-d tensor accepts dim 0 or -1 and stays 0-d.
/// Throws Error if dim is out of range.
template <class T>
basic_tensor<T> squeeze(const basic_tensor<T>& a, int dim);
/// Broadcasts `a` to `shape` with NumPy rules, as torch.Tensor.expand: the target may have more (leading) axes;
/// each existing axis must equal the target size or be 1; -1 keeps an existing axis's size (not allowed for new
/// leading axes). The backward pass sums the gradient back over the broadcast axes (sum_to_shape).
/// Throws Error naming both shapes when `a` does not broadcast to `shape`.
template <class T>
basic_tensor<T> expand(const basic_tensor<T>& a, const std::vector<std::int64_t>& shape);
/// Merges axes start_dim..end_dim (inclusive, negative allowed) into one: [2, 3, 4] with (1, 2) → [2, 12].
/// A 0-d input becomes [1] (as torch.flatten). Throws Error on a dim out of range or start_dim after end_dim.
template <class T>
basic_tensor<T> flatten(const basic_tensor<T>& a, int start_dim = 0, int end_dim = -1);

/// Joins tensors along an existing axis `dim`: every input has the same number of axes and the same sizes except
/// along `dim`; the output's `dim` is the sum of theirs. Throws Error on an empty list, differing ranks or sizes
/// (naming the offending input and both shapes), or a dim out of range.
template <class T>
basic_tensor<T> concat(const std::vector<basic_tensor<T>>& tensors, int dim = 0);
/// Alias of concat (torch.cat).
template <class T>
basic_tensor<T> cat(const std::vector<basic_tensor<T>>& tensors, int dim = 0);
/// Joins tensors of one shape S along a new axis inserted at `dim` (in [-(ndim + 1), ndim]): N tensors of shape
/// [A, B] with dim 1 → [A, N, B]. Throws Error on an empty list, differing shapes or a dim out of range.
template <class T>
basic_tensor<T> stack(const std::vector<basic_tensor<T>>& tensors, int dim = 0);

// A braced list cannot deduce T through std::vector, so `concat({a, b}, 1)` needs these forwarding overloads.
template <class T>
basic_tensor<T> concat(std::initializer_list<basic_tensor<T>> tensors, int dim = 0) {
  return concat(std::vector<basic_tensor<T>>(tensors), dim);
}
template <class T>
basic_tensor<T> cat(std::initializer_list<basic_tensor<T>> tensors, int dim = 0) {
  return concat(std::vector<basic_tensor<T>>(tensors), dim);
}
template <class T>
basic_tensor<T> stack(std::initializer_list<basic_tensor<T>> tensors, int dim = 0) {
  return stack(std::vector<basic_tensor<T>>(tensors), dim);
}

/// Splits `a` along `dim` into pieces of `split_size` (the last one smaller if the size does not divide), as
/// torch.split: size 5 with split_size 2 → sizes 2, 2, 1. Returns one piece when split_size exceeds the size.
/// split_size 0 is allowed only when the axis has size 0 (one empty piece). Each piece is its own graph node.
/// Throws Error on a 0-d input, a dim out of range, or split_size 0 on a non-empty axis.
template <class T>
std::vector<basic_tensor<T>> split(const basic_tensor<T>& a, std::size_t split_size, int dim = 0);
/// Splits `a` along `dim` into pieces of the given sizes (zeros allowed), which must sum to the axis size.
/// Note: a braced single size such as `split(a, {4})` selects the split_size overload above.
/// Throws Error naming the sizes and the axis size when they do not, on a 0-d input, or a dim out of range.
template <class T>
std::vector<basic_tensor<T>> split(const basic_tensor<T>& a, const std::vector<std::size_t>& sizes, int dim = 0);
/// Splits `a` along `dim` into at most `chunks` pieces of ceil(size / chunks) elements, as torch.chunk: size 5 in 3
/// chunks → 2, 2, 1; size 6 in 4 chunks → 2, 2, 2 (three pieces, fewer than asked). An axis of size 0 gives
/// `chunks` empty pieces. Throws Error if chunks is 0, on a 0-d input or a dim out of range.
template <class T>
std::vector<basic_tensor<T>> chunk(const basic_tensor<T>& a, std::size_t chunks, int dim = 0);
/// Elements start, start + step, ... (< end) along `dim`, as Python's a[start:end:step] on that axis: a negative
/// start or end counts from the end, then both are clamped to [0, size]; end <= start gives an empty axis.
/// The default end means "to the end". Gradient flows back to the selected positions, zero elsewhere.
/// Throws Error if step <= 0, on a 0-d input or a dim out of range.
template <class T>
basic_tensor<T> slice(const basic_tensor<T>& a, int dim, std::int64_t start,
                      std::int64_t end = std::numeric_limits<std::int64_t>::max(), std::int64_t step = 1);

}  // namespace xgrad
