// Indexing ops: pick elements of a tensor by integer indices (index_select, gather). Implemented in ops_index.cpp,
// instantiated for float and double. Semantics follow PyTorch; negative indices are errors there and here.
#pragma once

#include "autograd/tensor.h"

namespace xgrad {

/// The entries `indices` [n] of `a` along axis `dim` (negative allowed), as torch.index_select:
/// a [..., S, ...] → [..., n, ...]. Indices may repeat; the gradient of a repeated index accumulates.
/// Throws Error if `indices` is not 1-D, `a` is 0-d, dim is out of range, or an index lies outside [0, S)
/// (the message names the index and the allowed range).
template <class T>
basic_tensor<T> index_select(const basic_tensor<T>& a, int dim, const index_array& indices);
/// torch.gather: out has the shape of `index`, and along `dim` reads a at the index, elsewhere at the same
/// position: for dim 1 of a 3-D tensor, out[i][j][k] = a[i][index[i][j][k]][k]. `index` has as many dims as `a`
/// and index.size(d) <= a.size(d) for every d != dim. The backward pass scatter-adds into a's gradient, so an
/// element read several times gets the sum. A 0-d `a` takes a 0-d index holding 0.
/// Throws Error on differing ranks, an index dim larger than a's, a dim out of range, or an index value outside
/// [0, a.size(dim)) (naming the value and its position).
template <class T>
basic_tensor<T> gather(const basic_tensor<T>& a, int dim, const index_array& index);

}  // namespace xgrad
