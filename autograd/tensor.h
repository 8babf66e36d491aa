// The tensor handle and the reverse-mode engine.
//
// A `basic_tensor<T>` is a cheap, shallow-copy handle to a `Node<T>` (like torch::Tensor or flashlight's
// Variable). A node holds its value, its gradient (allocated on first accumulation), whether it requires a
// gradient, the nodes it was computed from, and one backward closure. An op builds its output with
// `make_result(...)` and, right there, the closure that turns the output gradient into input gradients — so each
// op's forward and backward stand side by side (see ops_*.cpp, and examples/ for an op written outside the engine).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

namespace xgrad {

using shape_t = std::vector<std::size_t>;
/// Integer indices (token ids, class targets, gather indices).
using index_array = xt::xarray<std::int64_t>;

/// Thrown for every user-facing error of the engine: shape mismatches, bad axes, misuse of backward.
/// The message names the op and the shapes involved.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// "[2, 3, 4]" — used in error messages.
std::string shape_str(const shape_t& shape);

template <class T>
struct Node {
  xt::xarray<T> value;
  xt::xarray<T> grad;  // meaningful only when has_grad
  bool has_grad = false;
  bool requires_grad = false;
  bool released = false;      // the graph behind this node was freed by a backward pass
  bool retains_grad = false;  // a non-leaf whose gradient backward keeps (see basic_tensor::retain_grad)
  const char* op = "leaf";
  std::vector<std::shared_ptr<Node>> inputs;
  /// Reads `self.grad` (the gradient of the output) and accumulates into `self.inputs[i]`.
  std::function<void(Node& self)> backward;
};

/// A tensor of scalar type T (float for training, double for gradient checks).
template <class T>
class basic_tensor {
 public:
  using value_type = T;

  /// An undefined tensor (no node); `defined()` is false. Used for optional arguments such as a missing bias.
  basic_tensor() = default;
  /// A leaf tensor holding `value`.
  explicit basic_tensor(xt::xarray<T> value, bool requires_grad = false);
  explicit basic_tensor(std::shared_ptr<Node<T>> node) : node_(std::move(node)) {}

  bool defined() const { return static_cast<bool>(node_); }
  const xt::xarray<T>& value() const;
  /// Mutable access for optimizers and initialisers; never use it on a tensor inside a live graph.
  xt::xarray<T>& mutable_value();
  /// The accumulated gradient; throws Error if none was accumulated yet.
  const xt::xarray<T>& grad() const;
  xt::xarray<T>& mutable_grad();
  bool has_grad() const;
  bool requires_grad() const;
  /// Sets requires_grad on a leaf; throws Error on a non-leaf.
  basic_tensor& set_requires_grad(bool on = true);
  bool is_leaf() const;
  const char* op() const;

  shape_t shape() const;
  std::size_t dim() const;
  std::size_t size(int axis) const;
  std::size_t numel() const;
  /// The single element of a one-element tensor; throws Error otherwise.
  T item() const;

  /// Backpropagates from this scalar (one element) tensor: d(this)/d(this) = 1.
  /// Throws Error if the tensor has more than one element (pass an explicit gradient then), does not require
  /// a gradient, or its graph was already freed by an earlier backward without retain_graph.
  void backward(bool retain_graph = false) const;
  /// Backpropagates with an explicit output gradient of this tensor's shape.
  void backward(const xt::xarray<T>& grad_output, bool retain_graph = false) const;
  /// Keeps this non-leaf tensor's gradient after backward (as torch.Tensor.retain_grad); by default only leaves
  /// keep theirs. Used to measure gradients inside a graph, e.g. with respect to attention scores.
  void retain_grad() const;
  /// Drops the accumulated gradient (the next accumulation starts from zero).
  void zero_grad() const;
  /// A new leaf sharing no graph with this one (the value is copied), requires_grad = false.
  basic_tensor detach() const;

  const std::shared_ptr<Node<T>>& node() const { return node_; }

 private:
  const Node<T>& checked() const;
  std::shared_ptr<Node<T>> node_;
};

using Tensor = basic_tensor<float>;
using DTensor = basic_tensor<double>;

// ---- grad mode ----------------------------------------------------------------------------------------------

/// Whether ops record a graph on this thread (true by default).
bool grad_enabled();
/// RAII guard that turns graph recording off on this thread (as torch::NoGradGuard).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// ---- building ops -------------------------------------------------------------------------------------------

/// The output of an op: a node holding `value`, recording `inputs` and `backward` when grad mode is on and any
/// input requires a gradient; otherwise a plain leaf. This is also the public way to write a custom op outside
/// the engine (as torch.autograd.Function): compute the value, then give the closure that maps the output
/// gradient (`self.grad`) to input gradients through `accumulate_grad`.
template <class T>
basic_tensor<T> make_result(const char* op, xt::xarray<T> value, std::vector<basic_tensor<T>> inputs,
                            std::function<void(Node<T>&)> backward);

/// Whether the i-th input of `self` needs a gradient.
template <class T>
inline bool needs_grad(const Node<T>& self, std::size_t i) {
  return self.inputs[i] && self.inputs[i]->requires_grad;
}

/// Adds `g` into `node->grad` (allocating on first use). Throws Error naming `op` if the shapes differ.
template <class T>
void accumulate_grad(Node<T>& node, const xt::xarray<T>& g, const char* op);
template <class T>
void accumulate_grad(Node<T>& node, xt::xarray<T>&& g, const char* op);

/// Sums `x` over `axes` (sorted, distinct, in range), keeping them as size 1. Plain loops: correct for empty
/// tensors (xt::sum is not), and fast when the reduced axes are one contiguous run (bias gradients, summed embeddings).
template <class T>
xt::xarray<T> sum_over_axes(const xt::xarray<T>& x, const std::vector<std::size_t>& axes);
/// The inverse shape move of sum_over_axes: g of `shape` with `axes` set to 1 (any layout of the same size),
/// repeated along `axes` to `shape`. Throws Error when g's size does not match.
template <class T>
xt::xarray<T> broadcast_over_axes(const xt::xarray<T>& g, const shape_t& shape, const std::vector<std::size_t>& axes);

/// Sums a broadcast gradient back to `shape` (NumPy broadcasting in reverse); used by every broadcasting op.
template <class T>
xt::xarray<T> sum_to_shape(const xt::xarray<T>& g, const shape_t& shape);

/// Maps a possibly negative axis into [0, ndim); throws Error naming `op` when out of range.
std::size_t normalize_axis(int axis, std::size_t ndim, const char* op);

/// NumPy broadcast shape of two shapes; throws Error naming `op` when they are incompatible.
shape_t broadcast_shapes(const shape_t& a, const shape_t& b, const char* op);

// ---- creation -----------------------------------------------------------------------------------------------

template <class T>
basic_tensor<T> zeros(const shape_t& shape, bool requires_grad = false);
template <class T>
basic_tensor<T> ones(const shape_t& shape, bool requires_grad = false);
/// A tensor of `shape` filled with `value`.
template <class T>
basic_tensor<T> full(const shape_t& shape, double value, bool requires_grad = false);
/// A 0-d tensor holding `v`.
template <class T>
basic_tensor<T> scalar(T v, bool requires_grad = false);

}  // namespace xgrad
