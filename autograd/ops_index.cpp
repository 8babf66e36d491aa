// Indexing ops. Forward records, for every output element, which input element it read; backward adds the output
// gradient there, so repeated indices accumulate without special cases.
#include <numeric>

#include "autograd/ops_index.h"

namespace xgrad {

namespace {

// Flat input offsets are kept for the backward pass; scatter-add into a zero gradient of the input's shape.
template <class T>
void scatter_add(Node<T>& self, const std::vector<std::size_t>& source, const char* op) {
  xt::xarray<T> g = xt::zeros<T>(self.inputs[0]->value.shape());
  const T* go = self.grad.data();
  for (std::size_t i = 0; i < source.size(); ++i) g.data()[source[i]] += go[i];
  accumulate_grad(*self.inputs[0], std::move(g), op);
}

}  // namespace

template <class T>
basic_tensor<T> index_select(const basic_tensor<T>& a, int dim, const index_array& indices) {
  const shape_t in_shape = a.shape();
  if (in_shape.empty()) throw Error("index_select: expects a tensor of at least 1 dim, got a 0-d tensor");
  if (indices.dimension() != 1)
    throw Error("index_select: indices must be 1-D, got shape " +
                shape_str(shape_t(indices.shape().begin(), indices.shape().end())));
  const std::size_t d = normalize_axis(dim, in_shape.size(), "index_select");
  const std::size_t size = in_shape[d], n = indices.size();
  for (std::size_t j = 0; j < n; ++j) {
    const auto id = indices(j);
    if (id < 0 || static_cast<std::size_t>(id) >= size)
      throw Error("index_select: index " + std::to_string(id) + " at position " + std::to_string(j) +
                  " is outside [0, " + std::to_string(size) + ") for dim " + std::to_string(dim) + " of " +
                  shape_str(in_shape));
  }
  const std::size_t outer = std::accumulate(in_shape.begin(), in_shape.begin() + static_cast<std::ptrdiff_t>(d),
                                            std::size_t{1}, std::multiplies<std::size_t>());
  const std::size_t inner = std::accumulate(in_shape.begin() + static_cast<std::ptrdiff_t>(d) + 1, in_shape.end(),
                                            std::size_t{1}, std::multiplies<std::size_t>());
  shape_t out_shape = in_shape;
  out_shape[d] = n;
  xt::xarray<T> out = xt::xarray<T>::from_shape(out_shape);
  const T* in = a.value().data();
  std::vector<std::size_t> source(out.size());
  std::size_t k = 0;
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t i = 0; i < inner; ++i, ++k) {
        source[k] = (o * size + static_cast<std::size_t>(indices(j))) * inner + i;
        out.data()[k] = in[source[k]];
      }
  return make_result<T>("index_select", std::move(out), {a},
                        [source = std::move(source)](Node<T>& self) { scatter_add(self, source, "index_select"); });
}

template <class T>
basic_tensor<T> gather(const basic_tensor<T>& a, int dim, const index_array& index) {
  // A 0-d tensor behaves as one of shape [1] (as in PyTorch); the output keeps the index's (0-d) shape.
  shape_t in_shape = a.shape();
  shape_t index_shape(index.shape().begin(), index.shape().end());
  if (in_shape.size() != index_shape.size())
    throw Error("gather: index of shape " + shape_str(index_shape) + " must have as many dims as the input " +
                shape_str(in_shape));
  if (in_shape.empty()) in_shape = index_shape = shape_t{1};
  const std::size_t ndim = in_shape.size();
  const std::size_t d = normalize_axis(dim, ndim, "gather");
  for (std::size_t k = 0; k < ndim; ++k)
    if (k != d && index_shape[k] > in_shape[k])
      throw Error("gather: index of shape " + shape_str(index_shape) + " is larger than the input " +
                  shape_str(in_shape) + " at dim " + std::to_string(k) + " (only dim " + std::to_string(dim) +
                  " may be larger)");
  std::vector<std::size_t> stride(ndim, 1);
  for (std::size_t k = ndim - 1; k > 0; --k) stride[k - 1] = stride[k] * in_shape[k];

  xt::xarray<T> out = xt::xarray<T>::from_shape(index.shape());
  const T* in = a.value().data();
  std::vector<std::size_t> source(index.size());
  std::vector<std::size_t> position(ndim, 0);
  for (std::size_t flat = 0; flat < index.size(); ++flat) {
    const auto id = index.data()[flat];
    if (id < 0 || static_cast<std::size_t>(id) >= in_shape[d])
      throw Error("gather: index " + std::to_string(id) + " at position " + shape_str(position) + " is outside [0, " +
                  std::to_string(in_shape[d]) + ") for dim " + std::to_string(dim) + " of " + shape_str(a.shape()));
    std::size_t offset = 0;
    for (std::size_t k = 0; k < ndim; ++k) offset += (k == d ? static_cast<std::size_t>(id) : position[k]) * stride[k];
    source[flat] = offset;
    out.data()[flat] = in[offset];
    for (std::size_t k = ndim; k-- > 0;) {  // odometer over the index's positions
      if (++position[k] < index_shape[k]) break;
      position[k] = 0;
    }
  }
  return make_result<T>("gather", std::move(out), {a},
                        [source = std::move(source)](Node<T>& self) { scatter_add(self, source, "gather"); });
}

#define XGRAD_INSTANTIATE(T)                                                                 \
  template basic_tensor<T> index_select<T>(const basic_tensor<T>&, int, const index_array&); \
  template basic_tensor<T> gather<T>(const basic_tensor<T>&, int, const index_array&);
XGRAD_INSTANTIATE(float)
XGRAD_INSTANTIATE(double)
#undef XGRAD_INSTANTIATE

}  // namespace xgrad
