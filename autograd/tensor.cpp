#include "autograd/tensor.h"

#include <algorithm>
#include <sstream>
#include <unordered_set>
#include <utility>

#include <xtensor/xbroadcast.hpp>
#include <xtensor/xbuilder.hpp>

#include "autograd/kernels/parallel.h"

namespace xgrad {

std::string shape_str(const shape_t& shape) {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

shape_t broadcast_shapes(const shape_t& a, const shape_t& b, const char* op) {
  const std::size_t n = std::max(a.size(), b.size());
  shape_t out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::size_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw Error(std::string(op) + ": shapes " + shape_str(a) + " and " + shape_str(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::size_t normalize_axis(int axis, std::size_t ndim, const char* op) {
  const long n = static_cast<long>(ndim);
  const long a = axis < 0 ? axis + n : axis;
  if (n == 0)
    throw Error(std::string(op) + ": axis " + std::to_string(axis) + " given for a 0-d tensor, which has no axes");
  if (a < 0 || a >= n)
    throw Error(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for a tensor of " +
                std::to_string(ndim) + " dims (allowed: " + std::to_string(-n) + " to " + std::to_string(n - 1) + ")");
  return static_cast<std::size_t>(a);
}

// ---- basic_tensor ------------------------------------------------------------------------------------------

template <class T>
basic_tensor<T>::basic_tensor(xt::xarray<T> value, bool requires_grad) : node_(std::make_shared<Node<T>>()) {
  node_->value = std::move(value);
  node_->requires_grad = requires_grad;
}

template <class T>
const Node<T>& basic_tensor<T>::checked() const {
  if (!node_) throw Error("use of an undefined tensor");
  return *node_;
}

template <class T>
const xt::xarray<T>& basic_tensor<T>::value() const {
  return checked().value;
}
template <class T>
xt::xarray<T>& basic_tensor<T>::mutable_value() {
  checked();
  return node_->value;
}
template <class T>
const xt::xarray<T>& basic_tensor<T>::grad() const {
  if (!checked().has_grad) throw Error("grad(): tensor has no gradient (backward did not reach it, or zero_grad)");
  return node_->grad;
}
template <class T>
xt::xarray<T>& basic_tensor<T>::mutable_grad() {
  grad();
  return node_->grad;
}
template <class T>
bool basic_tensor<T>::has_grad() const {
  return checked().has_grad;
}
template <class T>
bool basic_tensor<T>::requires_grad() const {
  return checked().requires_grad;
}
template <class T>
basic_tensor<T>& basic_tensor<T>::set_requires_grad(bool on) {
  if (!is_leaf())
    throw Error(std::string("set_requires_grad: only a leaf can be changed, this is the output of ") + node_->op);
  node_->requires_grad = on;
  return *this;
}
template <class T>
bool basic_tensor<T>::is_leaf() const {
  return !checked().backward && node_->inputs.empty() && !node_->released;
}
template <class T>
const char* basic_tensor<T>::op() const {
  return checked().op;
}
template <class T>
shape_t basic_tensor<T>::shape() const {
  const auto& v = checked().value.shape();
  return shape_t(v.begin(), v.end());
}
template <class T>
std::size_t basic_tensor<T>::dim() const {
  return checked().value.dimension();
}
template <class T>
std::size_t basic_tensor<T>::size(int axis) const {
  const auto& v = checked().value.shape();
  const int n = static_cast<int>(v.size());
  const int a = axis < 0 ? axis + n : axis;
  if (a < 0 || a >= n)
    throw Error("size(" + std::to_string(axis) + "): axis out of range for a tensor of " + std::to_string(n) + " dims");
  return v[static_cast<std::size_t>(a)];
}
template <class T>
std::size_t basic_tensor<T>::numel() const {
  return checked().value.size();
}
template <class T>
T basic_tensor<T>::item() const {
  if (numel() != 1) throw Error("item(): tensor has " + std::to_string(numel()) + " elements, expected 1");
  return *node_->value.data();
}
template <class T>
void basic_tensor<T>::retain_grad() const {
  const_cast<Node<T>&>(checked()).retains_grad = true;
}
template <class T>
void basic_tensor<T>::zero_grad() const {
  checked();
  node_->has_grad = false;
  node_->grad = xt::xarray<T>();
}
template <class T>
basic_tensor<T> basic_tensor<T>::detach() const {
  return basic_tensor<T>(xt::xarray<T>(value()), false);
}

template <class T>
void basic_tensor<T>::backward(bool retain_graph) const {
  if (numel() != 1)
    throw Error("backward(): called on a tensor of shape " + shape_str(shape()) +
                "; only a one-element tensor has an implicit gradient, pass grad_output for others");
  xt::xarray<T> seed = xt::ones<T>(value().shape());
  backward(seed, retain_graph);
}

template <class T>
void basic_tensor<T>::backward(const xt::xarray<T>& grad_output, bool retain_graph) const {
  Node<T>& root = const_cast<Node<T>&>(checked());
  if (root.released)
    throw Error(
        "backward(): the graph behind this tensor was freed by an earlier backward; "
        "pass retain_graph=true to the first backward to call it twice");
  if (!root.requires_grad)
    throw Error("backward(): tensor does not require grad (no input of its graph has requires_grad=true)");
  if (!std::equal(grad_output.shape().begin(), grad_output.shape().end(), root.value.shape().begin(),
                  root.value.shape().end()))
    throw Error("backward(): grad_output has shape " +
                shape_str(shape_t(grad_output.shape().begin(), grad_output.shape().end())) + ", tensor has shape " +
                shape_str(shape()));

  // Iterative post-order DFS: deep graphs (10,000+ ops) must not overflow the call stack. `order` holds owning
  // handles because freeing a node's inputs below would otherwise destroy nodes still waiting their turn.
  using NodePtr = std::shared_ptr<Node<T>>;
  std::vector<NodePtr> order;
  std::unordered_set<Node<T>*> visited;
  std::vector<std::pair<NodePtr, std::size_t>> stack;
  stack.emplace_back(node_, 0);
  visited.insert(&root);
  while (!stack.empty()) {
    auto& top = stack.back();
    if (top.second < top.first->inputs.size()) {
      NodePtr child = top.first->inputs[top.second++];
      if (child && child->requires_grad && visited.insert(child.get()).second) {
        if (child->released)
          throw Error(std::string("backward(): part of the graph (op ") + child->op +
                      ") was freed by an earlier backward; pass retain_graph=true to the first backward");
        stack.emplace_back(std::move(child), 0);
      }
    } else {
      order.push_back(std::move(top.first));
      stack.pop_back();
    }
  }

  accumulate_grad(root, grad_output, "backward");
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node<T>* node = it->get();
    if (!node->backward) continue;  // a leaf
    if (node->has_grad) node->backward(*node);
    // Only leaves (and tensors marked retain_grad) keep gradients, as in PyTorch: a retained graph run again must
    // not see stale sums.
    if (!node->retains_grad) {
      node->grad = xt::xarray<T>();
      node->has_grad = false;
    }
    if (!retain_graph) {  // free the graph as we go: closures and input references
      node->backward = nullptr;
      node->inputs.clear();
      node->released = true;
    }
  }
}

// ---- grad mode ---------------------------------------------------------------------------------------------

namespace {
thread_local bool g_grad_enabled = true;
}
bool grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : previous_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = previous_; }

// ---- building ops ------------------------------------------------------------------------------------------

template <class T>
basic_tensor<T> make_result(const char* op, xt::xarray<T> value, std::vector<basic_tensor<T>> inputs,
                            std::function<void(Node<T>&)> backward) {
  auto node = std::make_shared<Node<T>>();
  node->value = std::move(value);
  node->op = op;
  bool any = false;
  for (const auto& in : inputs) any = any || (in.defined() && in.requires_grad());
  if (any && grad_enabled()) {
    node->requires_grad = true;
    node->inputs.reserve(inputs.size());
    for (const auto& in : inputs) node->inputs.push_back(in.node());
    node->backward = std::move(backward);
  }
  return basic_tensor<T>(std::move(node));
}

template <class T>
static void check_grad_shape(const Node<T>& node, const xt::xarray<T>& g, const char* op) {
  if (!std::equal(g.shape().begin(), g.shape().end(), node.value.shape().begin(), node.value.shape().end()))
    throw Error(std::string(op) + ": gradient of shape " + shape_str(shape_t(g.shape().begin(), g.shape().end())) +
                " does not match its tensor's shape " +
                shape_str(shape_t(node.value.shape().begin(), node.value.shape().end())));
}

template <class T>
static void add_into(xt::xarray<T>& acc, const xt::xarray<T>& g) {
  T* a = acc.data();
  const T* b = g.data();
  parallel_for(0, acc.size(), grain_for(1, 16), [a, b](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) a[i] += b[i];
  });
}

template <class T>
void accumulate_grad(Node<T>& node, const xt::xarray<T>& g, const char* op) {
  check_grad_shape(node, g, op);
  if (!node.has_grad) {
    node.grad = g;
    node.has_grad = true;
  } else {
    add_into(node.grad, g);
  }
}
template <class T>
void accumulate_grad(Node<T>& node, xt::xarray<T>&& g, const char* op) {
  check_grad_shape(node, g, op);
  if (!node.has_grad) {
    node.grad = std::move(g);
    node.has_grad = true;
  } else {
    add_into(node.grad, g);
  }
}

// When the `reduced` axes of `shape` are one contiguous run (or none), its sizes as [outer, R, inner]: the product of
// the axes before the run, of the run, and after it. False when the reduced axes are not contiguous.
static bool split_at_reduced_run(const shape_t& shape, const std::vector<bool>& reduced, std::size_t& outer,
                                 std::size_t& r_count, std::size_t& inner) {
  const std::size_t n = shape.size();
  std::size_t first = 0;
  while (first < n && !reduced[first]) ++first;
  std::size_t end = first;
  while (end < n && reduced[end]) ++end;
  for (std::size_t i = end; i < n; ++i)
    if (reduced[i]) return false;
  outer = r_count = inner = 1;
  for (std::size_t i = 0; i < n; ++i) (i < first ? outer : i < end ? r_count : inner) *= shape[i];
  return true;
}

template <class T>
xt::xarray<T> sum_over_axes(const xt::xarray<T>& x, const std::vector<std::size_t>& axes) {
  const auto& xs = x.shape();
  const std::size_t n = xs.size();
  shape_t out_shape(xs.begin(), xs.end());
  std::vector<bool> reduced(n, false);
  for (auto a : axes) {
    out_shape[a] = 1;
    reduced[a] = true;
  }
  xt::xarray<T> out = xt::zeros<T>(out_shape);
  if (x.size() == 0) return out;
  const T* in = x.data();
  T* o = out.data();
  // One contiguous run of reduced axes (a bias gradient [B, T, D] -> [1, 1, D]; summed embeddings [B, T, S, D] ->
  // [B, T, 1, D]): the input is [outer, R, inner] and each output row of `inner` adds R input rows.
  std::size_t outer = 1, r_count = 1, inner = 1;
  if (split_at_reduced_run(shape_t(xs.begin(), xs.end()), reduced, outer, r_count, inner)) {
    // Split over output columns (each output element still adds its R inputs in order, on one thread).
    parallel_for(0, inner, grain_for(outer * r_count, 16), [&](std::size_t j0, std::size_t j1) {
      for (std::size_t b = 0; b < outer; ++b) {
        T* dst = o + b * inner;
        for (std::size_t r = 0; r < r_count; ++r) {
          const T* src = in + (b * r_count + r) * inner;
          for (std::size_t j = j0; j < j1; ++j) dst[j] += src[j];
        }
      }
    });
    return out;
  }
  // General case: walk the input once with an odometer, tracking the output offset (reduced axes stride 0).
  std::vector<std::size_t> out_stride(n, 0), idx(n, 0);
  std::size_t s = 1;
  for (std::size_t i = n; i-- > 0;) {
    out_stride[i] = reduced[i] ? 0 : s;
    s *= out_shape[i];
  }
  std::size_t off = 0;
  for (std::size_t flat = 0; flat < x.size(); ++flat) {
    o[off] += in[flat];
    for (std::size_t d = n; d-- > 0;) {
      off += out_stride[d];
      if (++idx[d] < xs[d]) break;
      off -= out_stride[d] * xs[d];
      idx[d] = 0;
    }
  }
  return out;
}

template <class T>
xt::xarray<T> broadcast_over_axes(const xt::xarray<T>& g, const shape_t& shape, const std::vector<std::size_t>& axes) {
  std::vector<bool> reduced(shape.size(), false);
  for (auto a : axes) reduced[a] = true;
  // [outer, 1, inner] -> [outer, R, inner]: each row of `inner` copied R times.
  std::size_t outer = 1, r_count = 1, inner = 1;
  if (!split_at_reduced_run(shape, reduced, outer, r_count, inner)) return xt::broadcast(g, shape);
  xt::xarray<T> out = xt::xarray<T>::from_shape(shape);
  if (g.size() != outer * inner) throw Error("broadcast_over_axes: gradient size does not match the kept axes");
  const T* src = g.data();
  T* dst = out.data();
  for (std::size_t b = 0; b < outer; ++b)
    for (std::size_t r = 0; r < r_count; ++r)
      std::copy(src + b * inner, src + (b + 1) * inner, dst + (b * r_count + r) * inner);
  return out;
}

template <class T>
xt::xarray<T> sum_to_shape(const xt::xarray<T>& g, const shape_t& shape) {
  const auto& gs = g.shape();
  if (std::equal(gs.begin(), gs.end(), shape.begin(), shape.end())) return g;
  if (gs.size() < shape.size())
    throw Error("sum_to_shape: gradient " + shape_str(shape_t(gs.begin(), gs.end())) + " has fewer dims than " +
                shape_str(shape));
  const std::size_t lead = gs.size() - shape.size();
  std::vector<std::size_t> axes;
  for (std::size_t i = 0; i < gs.size(); ++i) {
    if (i < lead) {
      axes.push_back(i);
    } else if (shape[i - lead] == 1 && gs[i] != 1) {
      axes.push_back(i);
    } else if (shape[i - lead] != gs[i]) {
      throw Error("sum_to_shape: gradient " + shape_str(shape_t(gs.begin(), gs.end())) + " cannot be reduced to " +
                  shape_str(shape));
    }
  }
  xt::xarray<T> reduced = sum_over_axes(g, axes);
  reduced.reshape(shape);
  return reduced;
}

template <class T>
basic_tensor<T> zeros(const shape_t& shape, bool requires_grad) {
  return basic_tensor<T>(xt::xarray<T>(xt::zeros<T>(shape)), requires_grad);
}
template <class T>
basic_tensor<T> ones(const shape_t& shape, bool requires_grad) {
  return basic_tensor<T>(xt::xarray<T>(xt::ones<T>(shape)), requires_grad);
}
template <class T>
basic_tensor<T> full(const shape_t& shape, double value, bool requires_grad) {
  xt::xarray<T> a = xt::xarray<T>::from_shape(shape);
  a.fill(static_cast<T>(value));
  return basic_tensor<T>(std::move(a), requires_grad);
}
template <class T>
basic_tensor<T> scalar(T v, bool requires_grad) {
  xt::xarray<T> a = xt::xarray<T>::from_shape({});
  a() = v;
  return basic_tensor<T>(std::move(a), requires_grad);
}

#define XGRAD_INSTANTIATE(T)                                                                        \
  template class basic_tensor<T>;                                                                   \
  template basic_tensor<T> make_result<T>(const char*, xt::xarray<T>, std::vector<basic_tensor<T>>, \
                                          std::function<void(Node<T>&)>);                           \
  template void accumulate_grad<T>(Node<T>&, const xt::xarray<T>&, const char*);                    \
  template void accumulate_grad<T>(Node<T>&, xt::xarray<T>&&, const char*);                         \
  template xt::xarray<T> sum_to_shape<T>(const xt::xarray<T>&, const shape_t&);                     \
  template xt::xarray<T> sum_over_axes<T>(const xt::xarray<T>&, const std::vector<std::size_t>&);   \
  template xt::xarray<T> broadcast_over_axes<T>(const xt::xarray<T>&, const shape_t&,               \
                                                const std::vector<std::size_t>&);                   \
  template basic_tensor<T> zeros<T>(const shape_t&, bool);                                          \
  template basic_tensor<T> ones<T>(const shape_t&, bool);                                           \
  template basic_tensor<T> scalar<T>(T, bool);                                                      \
  template basic_tensor<T> full<T>(const shape_t&, double, bool);
XGRAD_INSTANTIATE(float)
XGRAD_INSTANTIATE(double)
#undef XGRAD_INSTANTIATE

}  // namespace xgrad
