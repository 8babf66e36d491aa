// Shape ops: the values are copied into contiguous row-major arrays, so every op downstream sees dense data.
// Ops that join or cut along one axis view a contiguous array as [outer, size, inner] around that axis and move
// whole runs of `inner` elements with plain loops.
#include <algorithm>
#include <limits>
#include <numeric>

#include <xtensor/xbroadcast.hpp>
#include <xtensor/xmanipulation.hpp>

#include "autograd/kernels/gradient_buffers.h"
#include "autograd/ops_shape.h"

namespace xgrad {

namespace {

std::size_t product(shape_t::const_iterator first, shape_t::const_iterator last) {
  return std::accumulate(first, last, std::size_t{1}, std::multiplies<std::size_t>());
}

// A copy of `a` with a new shape of the same element count; the gradient is reshaped back. The op's name goes
// into the node so that a failed accumulation names the op the user called.
template <class T>
basic_tensor<T> with_shape(const basic_tensor<T>& a, const shape_t& out, const char* op) {
  const shape_t in_shape = a.shape();
  xt::xarray<T> value = a.value();
  value.reshape(out);
  return make_result<T>(op, std::move(value), {a}, [in_shape, op](Node<T>& self) {
    xt::xarray<T> g = take_grad(self);
    g.reshape(in_shape);
    accumulate_grad(*self.inputs[0], std::move(g), op);
  });
}

// out = input permuted so that output axis i is input axis perm[i]; `in_shape` is the input's shape. Walks the
// output in order with an odometer over the input offsets; when the last axis stays last, whole rows are copied.
template <class T>
void permute_into(const T* in, const shape_t& in_shape, const std::vector<std::size_t>& perm, T* out) {
  const std::size_t n = in_shape.size();
  std::size_t total = product(in_shape.begin(), in_shape.end());
  if (total == 0) return;
  if (n == 0) {
    out[0] = in[0];
    return;
  }
  std::vector<std::size_t> in_stride(n), shape(n), stride(n);
  for (std::size_t d = n, s = 1; d-- > 0;) {
    in_stride[d] = s;
    s *= in_shape[d];
  }
  for (std::size_t i = 0; i < n; ++i) {
    shape[i] = in_shape[perm[i]];
    stride[i] = in_stride[perm[i]];
  }
  // Rows of `row` contiguous elements when the last axis is kept; single elements otherwise.
  const bool rows = perm[n - 1] == n - 1;
  const std::size_t row = rows ? shape[n - 1] : 1, axes = rows ? n - 1 : n;
  const std::size_t inner = shape[axes - (axes ? 1 : 0)], inner_stride = axes ? stride[axes - 1] : 0;
  if (axes == 0) {
    std::copy(in, in + total, out);
    return;
  }
  // The odometer runs over axes [0, axes - 1); the innermost of the remaining axes is the tight loop.
  std::vector<std::size_t> idx(axes, 0);
  std::size_t off = 0;
  for (std::size_t done = 0; done < total; done += inner * row) {
    if (row == 1) {
      for (std::size_t j = 0; j < inner; ++j) out[j] = in[off + j * inner_stride];
    } else {
      for (std::size_t j = 0; j < inner; ++j)
        std::copy(in + off + j * inner_stride, in + off + j * inner_stride + row, out + j * row);
    }
    out += inner * row;
    for (std::size_t d = axes - 1; d-- > 0;) {
      off += stride[d];
      if (++idx[d] < shape[d]) break;
      off -= stride[d] * shape[d];
      idx[d] = 0;
    }
  }
}

// Elements start, start + step, ... (count of them) along axis d; the engine of slice and split.
template <class T>
basic_tensor<T> take_along(const basic_tensor<T>& a, std::size_t d, std::size_t start, std::size_t count,
                           std::size_t step, const char* op) {
  const shape_t in_shape = a.shape();
  const std::size_t outer = product(in_shape.begin(), in_shape.begin() + d), size = in_shape[d],
                    inner = product(in_shape.begin() + d + 1, in_shape.end());
  shape_t out_shape = in_shape;
  out_shape[d] = count;
  xt::xarray<T> out = xt::xarray<T>::from_shape(out_shape);
  const T* in = a.value().data();
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t j = 0; j < count; ++j) {
      const T* src = in + (o * size + start + j * step) * inner;
      std::copy(src, src + inner, out.data() + (o * count + j) * inner);
    }
  return make_result<T>(op, std::move(out), {a}, [=](Node<T>& self) {
    xt::xarray<T> g = xt::zeros<T>(in_shape);
    const T* go = self.grad.data();
    for (std::size_t o = 0; o < outer; ++o)
      for (std::size_t j = 0; j < count; ++j) {
        const T* src = go + (o * count + j) * inner;
        std::copy(src, src + inner, g.data() + (o * size + start + j * step) * inner);
      }
    accumulate_grad(*self.inputs[0], std::move(g), op);
  });
}

// Output row o is input 0's run o, then input 1's run o, ... where input i's runs are `run[i]` elements long;
// the engine of concat and stack.
template <class T>
basic_tensor<T> join(const std::vector<basic_tensor<T>>& tensors, std::size_t outer, std::vector<std::size_t> run,
                     const shape_t& out_shape, const char* op) {
  const std::size_t row = std::accumulate(run.begin(), run.end(), std::size_t{0});
  xt::xarray<T> out = xt::xarray<T>::from_shape(out_shape);
  std::size_t offset = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const T* in = tensors[i].value().data();
    for (std::size_t o = 0; o < outer; ++o)
      std::copy(in + o * run[i], in + (o + 1) * run[i], out.data() + o * row + offset);
    offset += run[i];
  }
  return make_result<T>(op, std::move(out), tensors, [outer, run = std::move(run), row, op](Node<T>& self) {
    std::size_t offset = 0;
    for (std::size_t i = 0; i < run.size(); ++i) {
      if (needs_grad(self, i)) {
        xt::xarray<T> g = xt::xarray<T>::from_shape(self.inputs[i]->value.shape());
        const T* go = self.grad.data();
        for (std::size_t o = 0; o < outer; ++o)
          std::copy(go + o * row + offset, go + o * row + offset + run[i], g.data() + o * run[i]);
        accumulate_grad(*self.inputs[i], std::move(g), op);
      }
      offset += run[i];
    }
  });
}

// The axis a split-like op works on; these ops have no meaning for a 0-d tensor (as in PyTorch).
template <class T>
std::size_t split_axis(const basic_tensor<T>& a, int dim, const char* op) {
  if (a.dim() == 0) throw Error(std::string(op) + ": expects a tensor of at least 1 dim, got a 0-d tensor");
  return normalize_axis(dim, a.dim(), op);
}

}  // namespace

template <class T>
basic_tensor<T> reshape(const basic_tensor<T>& a, const std::vector<std::int64_t>& shape) {
  const shape_t in_shape = a.shape();
  shape_t out(shape.size());
  std::size_t known = 1;
  int infer = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw Error("reshape: more than one -1 in the target shape");
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw Error("reshape: negative size " + std::to_string(shape[i]) + " (allowed: sizes >= 0, or one -1)");
    } else {
      out[i] = static_cast<std::size_t>(shape[i]);
      if (out[i] != 0 && known > std::numeric_limits<std::size_t>::max() / out[i])
        throw Error("reshape: target shape " + shape_str(out) + " has more elements than can be counted");
      known *= out[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || a.numel() % known != 0)
      throw Error("reshape: cannot infer -1 to reshape " + shape_str(in_shape) + " of " + std::to_string(a.numel()) +
                  " elements");
    out[static_cast<std::size_t>(infer)] = a.numel() / known;
    known *= out[static_cast<std::size_t>(infer)];
  }
  if (known != a.numel())
    throw Error("reshape: cannot reshape " + shape_str(in_shape) + " (" + std::to_string(a.numel()) + " elements) to " +
                shape_str(out));
  return with_shape(a, out, "reshape");
}

template <class T>
basic_tensor<T> permute(const basic_tensor<T>& a, std::vector<int> dims) {
  const std::size_t n = a.dim();
  if (dims.size() != n)
    throw Error("permute: got " + std::to_string(dims.size()) + " dims for a tensor of shape " + shape_str(a.shape()));
  std::vector<std::size_t> perm(n), inverse(n);
  std::vector<bool> seen(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    perm[i] = normalize_axis(dims[i], n, "permute");
    if (seen[perm[i]]) throw Error("permute: axis " + std::to_string(dims[i]) + " appears twice");
    seen[perm[i]] = true;
    inverse[perm[i]] = i;
  }
  const shape_t in_shape = a.shape();
  shape_t out_shape(n);
  for (std::size_t i = 0; i < n; ++i) out_shape[i] = in_shape[perm[i]];
  xt::xarray<T> value = xt::xarray<T>::from_shape(out_shape);
  permute_into(a.value().data(), in_shape, perm, value.data());
  return make_result<T>("permute", std::move(value), {a}, [inverse, out_shape](Node<T>& self) {
    xt::xarray<T> g = xt::xarray<T>::from_shape(self.inputs[0]->value.shape());
    permute_into(self.grad.data(), out_shape, inverse, g.data());
    accumulate_grad(*self.inputs[0], std::move(g), "permute");
  });
}

template <class T>
basic_tensor<T> transpose(const basic_tensor<T>& a, int dim0, int dim1) {
  const std::size_t n = a.dim();
  std::vector<int> dims(n);
  for (std::size_t i = 0; i < n; ++i) dims[i] = static_cast<int>(i);
  std::swap(dims[normalize_axis(dim0, n, "transpose")], dims[normalize_axis(dim1, n, "transpose")]);
  return permute(a, dims);
}

template <class T>
basic_tensor<T> unsqueeze(const basic_tensor<T>& a, int dim) {
  shape_t out = a.shape();
  const std::size_t d = normalize_axis(dim, out.size() + 1, "unsqueeze");
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(d), 1);
  return with_shape(a, out, "unsqueeze");
}

template <class T>
basic_tensor<T> squeeze(const basic_tensor<T>& a) {
  shape_t out;
  for (std::size_t s : a.shape())
    if (s != 1) out.push_back(s);
  return with_shape(a, out, "squeeze");
}

template <class T>
basic_tensor<T> squeeze(const basic_tensor<T>& a, int dim) {
  shape_t out = a.shape();
  // A 0-d tensor counts as having one axis here, as in PyTorch, so that squeeze(x, -1) works at any rank.
  const std::size_t d = normalize_axis(dim, std::max<std::size_t>(out.size(), 1), "squeeze");
  if (!out.empty() && out[d] == 1) out.erase(out.begin() + static_cast<std::ptrdiff_t>(d));
  return with_shape(a, out, "squeeze");
}

template <class T>
basic_tensor<T> expand(const basic_tensor<T>& a, const std::vector<std::int64_t>& shape) {
  const shape_t in_shape = a.shape();
  auto fail = [&](const std::string& why) {
    std::string target = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) target += (i ? ", " : "") + std::to_string(shape[i]);
    return Error("expand: cannot expand " + shape_str(in_shape) + " to " + target + "]: " + why);
  };
  if (shape.size() < in_shape.size()) throw fail("the target has fewer dims than the tensor");
  const std::size_t lead = shape.size() - in_shape.size();
  shape_t out(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      if (shape[i] < 0) throw fail("size " + std::to_string(shape[i]) + " for new leading dim " + std::to_string(i));
      out[i] = static_cast<std::size_t>(shape[i]);
      continue;
    }
    const std::size_t own = in_shape[i - lead];
    if (shape[i] == -1) {
      out[i] = own;
    } else if (shape[i] < 0) {
      throw fail("size " + std::to_string(shape[i]) + " at dim " + std::to_string(i) + " (allowed: >= 0, or -1)");
    } else if (own == static_cast<std::size_t>(shape[i]) || own == 1) {
      out[i] = static_cast<std::size_t>(shape[i]);
    } else {
      throw fail("dim " + std::to_string(i) + " has size " + std::to_string(own) + ", which is neither 1 nor " +
                 std::to_string(shape[i]));
    }
  }
  xt::xarray<T> value = xt::broadcast(a.value(), out);
  return make_result<T>("expand", std::move(value), {a}, [in_shape](Node<T>& self) {
    accumulate_grad(*self.inputs[0], sum_to_shape(self.grad, in_shape), "expand");
  });
}

template <class T>
basic_tensor<T> flatten(const basic_tensor<T>& a, int start_dim, int end_dim) {
  const shape_t in_shape = a.shape();
  if (in_shape.empty()) {
    normalize_axis(start_dim, 1, "flatten");
    normalize_axis(end_dim, 1, "flatten");
    return with_shape(a, shape_t{1}, "flatten");
  }
  const std::size_t s = normalize_axis(start_dim, in_shape.size(), "flatten");
  const std::size_t e = normalize_axis(end_dim, in_shape.size(), "flatten");
  if (s > e)
    throw Error("flatten: start_dim " + std::to_string(start_dim) + " comes after end_dim " + std::to_string(end_dim) +
                " for a tensor of shape " + shape_str(in_shape));
  shape_t out(in_shape.begin(), in_shape.begin() + static_cast<std::ptrdiff_t>(s));
  out.push_back(product(in_shape.begin() + static_cast<std::ptrdiff_t>(s),
                        in_shape.begin() + static_cast<std::ptrdiff_t>(e) + 1));
  out.insert(out.end(), in_shape.begin() + static_cast<std::ptrdiff_t>(e) + 1, in_shape.end());
  return with_shape(a, out, "flatten");
}

template <class T>
basic_tensor<T> concat(const std::vector<basic_tensor<T>>& tensors, int dim) {
  if (tensors.empty()) throw Error("concat: expects a non-empty list of tensors");
  const shape_t first = tensors[0].shape();
  if (first.empty()) throw Error("concat: input 0 is 0-d; only tensors of at least 1 dim can be concatenated");
  const std::size_t d = normalize_axis(dim, first.size(), "concat");
  shape_t out_shape = first;
  out_shape[d] = 0;
  const std::size_t inner = product(first.begin() + static_cast<std::ptrdiff_t>(d) + 1, first.end());
  std::vector<std::size_t> run;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const shape_t s = tensors[i].shape();
    bool match = s.size() == first.size();
    for (std::size_t k = 0; match && k < s.size(); ++k) match = k == d || s[k] == first[k];
    if (!match)
      throw Error("concat: input " + std::to_string(i) + " has shape " + shape_str(s) + ", input 0 has " +
                  shape_str(first) + "; all sizes must match except along dim " + std::to_string(dim));
    out_shape[d] += s[d];
    run.push_back(s[d] * inner);
  }
  return join(tensors, product(first.begin(), first.begin() + static_cast<std::ptrdiff_t>(d)), std::move(run),
              out_shape, "concat");
}

template <class T>
basic_tensor<T> cat(const std::vector<basic_tensor<T>>& tensors, int dim) {
  return concat(tensors, dim);
}

template <class T>
basic_tensor<T> stack(const std::vector<basic_tensor<T>>& tensors, int dim) {
  if (tensors.empty()) throw Error("stack: expects a non-empty list of tensors");
  const shape_t first = tensors[0].shape();
  for (std::size_t i = 1; i < tensors.size(); ++i)
    if (tensors[i].shape() != first)
      throw Error("stack: input " + std::to_string(i) + " has shape " + shape_str(tensors[i].shape()) +
                  ", input 0 has " + shape_str(first) + "; all shapes must be equal");
  const std::size_t d = normalize_axis(dim, first.size() + 1, "stack");
  shape_t out_shape = first;
  out_shape.insert(out_shape.begin() + static_cast<std::ptrdiff_t>(d), tensors.size());
  // Each input is one run of everything from axis d on, so stack is a join with no reshaping of the inputs.
  const std::size_t run = product(first.begin() + static_cast<std::ptrdiff_t>(d), first.end());
  return join(tensors, product(first.begin(), first.begin() + static_cast<std::ptrdiff_t>(d)),
              std::vector<std::size_t>(tensors.size(), run), out_shape, "stack");
}

template <class T>
std::vector<basic_tensor<T>> split(const basic_tensor<T>& a, std::size_t split_size, int dim) {
  const std::size_t d = split_axis(a, dim, "split");
  const std::size_t size = a.shape()[d];
  if (split_size == 0 && size != 0)
    throw Error("split: split_size 0 is allowed only for an axis of size 0; dim " + std::to_string(dim) + " of " +
                shape_str(a.shape()) + " has size " + std::to_string(size));
  std::vector<basic_tensor<T>> pieces;
  if (size == 0) {
    pieces.push_back(take_along(a, d, 0, 0, 1, "split"));
    return pieces;
  }
  for (std::size_t start = 0; start < size; start += split_size)
    pieces.push_back(take_along(a, d, start, std::min(split_size, size - start), 1, "split"));
  return pieces;
}

template <class T>
std::vector<basic_tensor<T>> split(const basic_tensor<T>& a, const std::vector<std::size_t>& sizes, int dim) {
  const std::size_t d = split_axis(a, dim, "split");
  const std::size_t size = a.shape()[d];
  const std::size_t total = std::accumulate(sizes.begin(), sizes.end(), std::size_t{0});
  if (total != size)
    throw Error("split: sizes " + shape_str(sizes) + " sum to " + std::to_string(total) + ", but dim " +
                std::to_string(dim) + " of " + shape_str(a.shape()) + " has size " + std::to_string(size));
  std::vector<basic_tensor<T>> pieces;
  std::size_t start = 0;
  for (std::size_t s : sizes) {
    pieces.push_back(take_along(a, d, start, s, 1, "split"));
    start += s;
  }
  return pieces;
}

template <class T>
std::vector<basic_tensor<T>> chunk(const basic_tensor<T>& a, std::size_t chunks, int dim) {
  const std::size_t d = split_axis(a, dim, "chunk");
  if (chunks == 0) throw Error("chunk: chunks must be at least 1, got 0");
  const std::size_t size = a.shape()[d];
  if (size == 0) return split(a, std::vector<std::size_t>(chunks, 0), dim);
  return split(a, (size + chunks - 1) / chunks, dim);
}

template <class T>
basic_tensor<T> slice(const basic_tensor<T>& a, int dim, std::int64_t start, std::int64_t end, std::int64_t step) {
  const std::size_t d = split_axis(a, dim, "slice");
  if (step <= 0) throw Error("slice: step must be positive, got " + std::to_string(step));
  const std::int64_t size = static_cast<std::int64_t>(a.shape()[d]);
  auto clamp = [size](std::int64_t i) { return std::clamp(i < 0 ? i + size : i, std::int64_t{0}, size); };
  const std::int64_t first = clamp(start), last = clamp(end);
  const std::int64_t count = last > first ? (last - first + step - 1) / step : 0;
  return take_along(a, d, static_cast<std::size_t>(first), static_cast<std::size_t>(count),
                    static_cast<std::size_t>(step), "slice");
}

#define XGRAD_INSTANTIATE(T)                                                                                    \
  template basic_tensor<T> reshape<T>(const basic_tensor<T>&, const std::vector<std::int64_t>&);                \
  template basic_tensor<T> permute<T>(const basic_tensor<T>&, std::vector<int>);                                \
  template basic_tensor<T> transpose<T>(const basic_tensor<T>&, int, int);                                      \
  template basic_tensor<T> unsqueeze<T>(const basic_tensor<T>&, int);                                           \
  template basic_tensor<T> squeeze<T>(const basic_tensor<T>&);                                                  \
  template basic_tensor<T> squeeze<T>(const basic_tensor<T>&, int);                                             \
  template basic_tensor<T> expand<T>(const basic_tensor<T>&, const std::vector<std::int64_t>&);                 \
  template basic_tensor<T> flatten<T>(const basic_tensor<T>&, int, int);                                        \
  template basic_tensor<T> concat<T>(const std::vector<basic_tensor<T>>&, int);                                 \
  template basic_tensor<T> cat<T>(const std::vector<basic_tensor<T>>&, int);                                    \
  template basic_tensor<T> stack<T>(const std::vector<basic_tensor<T>>&, int);                                  \
  template std::vector<basic_tensor<T>> split<T>(const basic_tensor<T>&, std::size_t, int);                     \
  template std::vector<basic_tensor<T>> split<T>(const basic_tensor<T>&, const std::vector<std::size_t>&, int); \
  template std::vector<basic_tensor<T>> chunk<T>(const basic_tensor<T>&, std::size_t, int);                     \
  template basic_tensor<T> slice<T>(const basic_tensor<T>&, int, std::int64_t, std::int64_t, std::int64_t);
XGRAD_INSTANTIATE(float)
XGRAD_INSTANTIATE(double)
#undef XGRAD_INSTANTIATE

}  // namespace xgrad
