// Neural-network ops with fused, numerically stable forward and backward passes written as plain row loops:
// clearer than composing primitives, and they never form exp() of an unshifted logit.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include <xtensor/xbroadcast.hpp>
#include <xtensor/xoperation.hpp>

#include "autograd/kernels/gradient_buffers.h"
#include "autograd/kernels/loops.h"
#include "autograd/kernels/softmax.h"
#include "autograd/kernels/vector_math.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_nn.h"
#include "autograd/ops_reduce.h"

namespace xgrad {

namespace {
// A tensor viewed as `rows` rows of its last axis, `cols` wide.
struct Rows {
  std::size_t rows, cols;
};
template <class T>
Rows rows_of(const xt::xarray<T>& x, const char* op) {
  if (x.dimension() == 0) throw Error(std::string(op) + ": needs a tensor of at least 1 dim, got a 0-d tensor");
  const std::size_t cols = x.shape().back();
  return {cols == 0 ? 0 : x.size() / cols, cols};
}

using kernels::for_each_lane;
using kernels::Lanes;
using kernels::unit_stride;
}  // namespace

template <class T>
basic_tensor<T> softmax(const basic_tensor<T>& a, int axis) {
  const auto& x = a.value();
  const Lanes l = kernels::lanes_of(a.shape(), axis, "softmax");
  xt::xarray<T> out = xt::xarray<T>::from_shape(x.shape());
  for_each_lane(l, [&](std::size_t base, auto stride) {
    const T* in = x.data() + base;
    T* o = out.data() + base;
    if constexpr (std::is_same_v<decltype(stride), unit_stride>) {
      simd::softmax_row(in, o, l.len);  // contiguous lane (the last axis)
      return;
    }
    T m = -std::numeric_limits<T>::infinity();
    for (std::size_t j = 0; j < l.len; ++j) m = std::max(m, in[j * stride]);
    if (m == -std::numeric_limits<T>::infinity()) {  // fully masked slice: all zeros by definition
      for (std::size_t j = 0; j < l.len; ++j) o[j * stride] = T(0);
      return;
    }
    T s = 0;
    for (std::size_t j = 0; j < l.len; ++j) s += (o[j * stride] = std::exp(in[j * stride] - m));
    for (std::size_t j = 0; j < l.len; ++j) o[j * stride] /= s;
  });
  return make_result<T>("softmax", std::move(out), {a}, [l](Node<T>& self) {
    // dx = p * (g - sum_j g_j p_j), written over the output gradient (each element reads only its own g)
    xt::xarray<T> gx = take_grad(self);
    for_each_lane(l, [&](std::size_t base, auto stride) {
      const T* p = self.value.data() + base;
      const T* g = gx.data() + base;
      T* d = gx.data() + base;
      T dot = 0;
      if constexpr (std::is_same_v<decltype(stride), unit_stride>)
        dot = simd::dot(g, p, l.len);
      else
        for (std::size_t j = 0; j < l.len; ++j) dot += g[j * stride] * p[j * stride];
      for (std::size_t j = 0; j < l.len; ++j) d[j * stride] = p[j * stride] * (g[j * stride] - dot);
    });
    accumulate_grad(*self.inputs[0], std::move(gx), "softmax");
  });
}

template <class T>
basic_tensor<T> log_softmax(const basic_tensor<T>& a, int axis) {
  const auto& x = a.value();
  const Lanes l = kernels::lanes_of(a.shape(), axis, "log_softmax");
  xt::xarray<T> out = xt::xarray<T>::from_shape(x.shape());
  for_each_lane(l, [&](std::size_t base, auto stride) {
    const T* in = x.data() + base;
    T* o = out.data() + base;
    T m = -std::numeric_limits<T>::infinity();
    for (std::size_t j = 0; j < l.len; ++j) m = std::max(m, in[j * stride]);
    if (m == -std::numeric_limits<T>::infinity()) {  // fully masked slice: log of the all-zero softmax
      for (std::size_t j = 0; j < l.len; ++j) o[j * stride] = m;
      return;
    }
    T s = 0;
    for (std::size_t j = 0; j < l.len; ++j) s += std::exp(in[j * stride] - m);
    // (x - max) - log(s), never x - (max + log(s)): near a large max, max + log(s) rounds log(s) to the max's ulp.
    const T log_s = std::log(s);
    for (std::size_t j = 0; j < l.len; ++j) o[j * stride] = (in[j * stride] - m) - log_s;
  });
  return make_result<T>("log_softmax", std::move(out), {a}, [l](Node<T>& self) {
    // dx = g - softmax * sum_j g_j
    xt::xarray<T> gx = xt::xarray<T>::from_shape(self.value.shape());
    for_each_lane(l, [&](std::size_t base, auto stride) {
      const T* lp = self.value.data() + base;
      const T* g = self.grad.data() + base;
      T* d = gx.data() + base;
      bool masked = true;  // a fully masked slice passes no gradient (its output does not depend on the input)
      for (std::size_t j = 0; j < l.len && masked; ++j) masked = lp[j * stride] == -std::numeric_limits<T>::infinity();
      if (masked) {
        for (std::size_t j = 0; j < l.len; ++j) d[j * stride] = T(0);
        return;
      }
      T total = 0;
      for (std::size_t j = 0; j < l.len; ++j) total += g[j * stride];
      for (std::size_t j = 0; j < l.len; ++j) d[j * stride] = g[j * stride] - std::exp(lp[j * stride]) * total;
    });
    accumulate_grad(*self.inputs[0], std::move(gx), "log_softmax");
  });
}

template <class T>
basic_tensor<T> masked_fill(const basic_tensor<T>& a, const xt::xarray<bool>& mask, double value) {
  const shape_t as = a.shape();
  const shape_t ms(mask.shape().begin(), mask.shape().end());
  if (broadcast_shapes(as, ms, "masked_fill") != as)
    throw Error("masked_fill: mask of shape " + shape_str(ms) + " does not broadcast to the tensor's shape " +
                shape_str(as));
  // A mask that repeats as a trailing block of the tensor (the causal [T, T] mask against scores [B, H, T, T]) is
  // read modulo its size; any other broadcast is materialised once.
  std::size_t lead = 0;
  while (lead < ms.size() && ms[lead] == 1) ++lead;
  const std::size_t k = ms.size() - lead;
  const bool block = k <= as.size() && std::equal(ms.begin() + lead, ms.end(), as.end() - k, as.end());
  xt::xarray<bool> m = block ? mask : xt::xarray<bool>(xt::broadcast(mask, as));
  const std::size_t period = std::max<std::size_t>(m.size(), 1);
  const T fill = static_cast<T>(value);
  const auto& x = a.value();
  xt::xarray<T> out = xt::xarray<T>::from_shape(x.shape());
  for (std::size_t i = 0; i < x.size(); i += period)
    for (std::size_t j = 0; j < period && i + j < x.size(); ++j)
      out.data()[i + j] = m.data()[j] ? fill : x.data()[i + j];
  return make_result<T>("masked_fill", std::move(out), {a}, [m = std::move(m), period](Node<T>& self) {
    xt::xarray<T> g = take_grad(self);
    for (std::size_t i = 0; i < g.size(); i += period)
      for (std::size_t j = 0; j < period && i + j < g.size(); ++j)
        if (m.data()[j]) g.data()[i + j] = T(0);
    accumulate_grad(*self.inputs[0], std::move(g), "masked_fill");
  });
}

template <class T>
basic_tensor<T> layer_norm(const basic_tensor<T>& x, const basic_tensor<T>& weight, const basic_tensor<T>& bias,
                           double eps) {
  if (x.dim() == 0) throw Error("layer_norm: needs a tensor of at least 1 dim, got a 0-d tensor");
  return layer_norm(x, shape_t{x.shape().back()}, weight, bias, eps);
}

namespace {

// Checks layer_norm's arguments; returns the size of one normalised group (the product of normalized_shape).
std::size_t layer_norm_columns(const shape_t& xs, const shape_t& normalized_shape, const shape_t* weight_shape,
                               const shape_t* bias_shape, double eps) {
  if (!(eps >= 0) || !std::isfinite(eps))
    throw Error("layer_norm: eps must be finite and >= 0, got " + std::to_string(eps));
  const std::size_t k = normalized_shape.size();
  if (k == 0 || k > xs.size() || !std::equal(normalized_shape.begin(), normalized_shape.end(), xs.end() - k))
    throw Error("layer_norm: normalized_shape " + shape_str(normalized_shape) +
                " must be non-empty and equal the trailing axes of input " + shape_str(xs));
  for (const shape_t* p : {weight_shape, bias_shape})
    if (p && *p != normalized_shape)
      throw Error("layer_norm: weight/bias must have shape " + shape_str(normalized_shape) + " for input " +
                  shape_str(xs) + ", got " + shape_str(*p));
  std::size_t cols = 1;
  for (const auto d : normalized_shape) cols *= d;
  if (cols == 0)
    throw Error("layer_norm: normalized_shape " + shape_str(normalized_shape) + " of input " + shape_str(xs) +
                " is empty");
  return cols;
}

// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = g * w (g when there is no weight).
template <class T>
xt::xarray<T> layer_norm_input_grad(const T* G, const T* w, const xt::xarray<T>& xhat, const std::vector<T>& rstd,
                                    Rows r) {
  xt::xarray<T> gx = xt::xarray<T>::from_shape(xhat.shape());
  kernels::for_each_row(r.rows, 6 * r.cols, [&](std::size_t i) {
    const T* g = G + i * r.cols;
    const T* h = xhat.data() + i * r.cols;
    T* d = gx.data() + i * r.cols;  // holds dxhat until the last loop turns it into dx
    if (w)
      for (std::size_t j = 0; j < r.cols; ++j) d[j] = g[j] * w[j];
    else
      std::copy(g, g + r.cols, d);
    const T mean_dh = simd::sum(d, r.cols) / static_cast<T>(r.cols);
    const T mean_dh_h = simd::dot(d, h, r.cols) / static_cast<T>(r.cols);
    for (std::size_t j = 0; j < r.cols; ++j) d[j] = rstd[i] * (d[j] - mean_dh - h[j] * mean_dh_h);
  });
  return gx;
}

// dweight = sum over rows of g * xhat, dbias = sum over rows of g; accumulated into the inputs that need them.
template <class T>
void layer_norm_affine_grads(Node<T>& self, const xt::xarray<T>& xhat, const shape_t& normalized_shape, Rows r) {
  const T* G = self.grad.data();
  xt::xarray<T> gw = xt::zeros<T>(normalized_shape), gb = xt::zeros<T>(normalized_shape);
  std::vector<T> partial(kernels::row_blocks(r.rows) * 2 * r.cols, T(0));  // per block: its dw, then its db
  kernels::for_each_row_block(r.rows, 2 * r.cols, [&](std::size_t block, std::size_t lo, std::size_t hi) {
    T* pw = partial.data() + block * 2 * r.cols;
    T* pb = pw + r.cols;
    for (std::size_t i = lo; i < hi; ++i) {
      const T* g = G + i * r.cols;
      const T* h = xhat.data() + i * r.cols;
      for (std::size_t j = 0; j < r.cols; ++j) {
        pw[j] += g[j] * h[j];
        pb[j] += g[j];
      }
    }
  });
  T* dw = gw.data();
  T* db = gb.data();
  for (std::size_t block = 0; block < kernels::row_blocks(r.rows); ++block)
    for (std::size_t j = 0; j < r.cols; ++j) {
      dw[j] += partial[block * 2 * r.cols + j];
      db[j] += partial[(block * 2 + 1) * r.cols + j];
    }
  if (needs_grad(self, 1)) accumulate_grad(*self.inputs[1], std::move(gw), "layer_norm");
  if (needs_grad(self, 2)) accumulate_grad(*self.inputs[2], std::move(gb), "layer_norm");
}

}  // namespace

template <class T>
basic_tensor<T> layer_norm(const basic_tensor<T>& x, const shape_t& normalized_shape, const basic_tensor<T>& weight,
                           const basic_tensor<T>& bias, double eps) {
  const shape_t weight_shape = weight.defined() ? weight.shape() : shape_t{};
  const shape_t bias_shape = bias.defined() ? bias.shape() : shape_t{};
  // The normalized axes are the trailing ones, so each normalised group is one contiguous row.
  const std::size_t cols = layer_norm_columns(x.shape(), normalized_shape, weight.defined() ? &weight_shape : nullptr,
                                              bias.defined() ? &bias_shape : nullptr, eps);
  const auto& xv = x.value();
  const Rows r{xv.size() / cols, cols};
  xt::xarray<T> xhat = xt::xarray<T>::from_shape(xv.shape());
  xt::xarray<T> out = xt::xarray<T>::from_shape(xv.shape());
  const T* w = weight.defined() ? weight.value().data() : nullptr;
  const T* b = bias.defined() ? bias.value().data() : nullptr;
  std::vector<T> rstd(r.rows);
  kernels::for_each_row(r.rows, 4 * r.cols, [&](std::size_t i) {
    const T* in = xv.data() + i * r.cols;
    T* h = xhat.data() + i * r.cols;
    T* o = out.data() + i * r.cols;
    const T mu = simd::sum(in, r.cols) / static_cast<T>(r.cols);
    const T var = simd::sum_squared_deviation(in, r.cols, mu) / static_cast<T>(r.cols);
    rstd[i] = T(1) / std::sqrt(var + static_cast<T>(eps));
    for (std::size_t j = 0; j < r.cols; ++j) h[j] = (in[j] - mu) * rstd[i];
    if (w && b)
      for (std::size_t j = 0; j < r.cols; ++j) o[j] = h[j] * w[j] + b[j];
    else
      for (std::size_t j = 0; j < r.cols; ++j) o[j] = (w ? h[j] * w[j] : h[j]) + (b ? b[j] : T(0));
  });
  return make_result<T>("layer_norm", std::move(out), {x, weight, bias},
                        [r, normalized_shape, xhat = std::move(xhat), rstd = std::move(rstd)](Node<T>& self) {
                          if (needs_grad(self, 0)) {
                            const T* w = self.inputs[1] ? self.inputs[1]->value.data() : nullptr;
                            accumulate_grad(*self.inputs[0], layer_norm_input_grad(self.grad.data(), w, xhat, rstd, r),
                                            "layer_norm");
                          }
                          if (needs_grad(self, 1) || needs_grad(self, 2))
                            layer_norm_affine_grads(self, xhat, normalized_shape, r);
                        });
}

template <class T>
basic_tensor<T> embedding(const basic_tensor<T>& weight, const index_array& indices) {
  if (weight.dim() != 2)
    throw Error("embedding: weight must be [num_embeddings, embedding_dim], got " + shape_str(weight.shape()));
  const std::size_t V = weight.size(0), D = weight.size(1);
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const auto id = indices.data()[i];
    if (id < 0 || static_cast<std::size_t>(id) >= V)
      throw Error("embedding: index " + std::to_string(id) + " at flat position " + std::to_string(i) +
                  " is outside [0, " + std::to_string(V) + ")");
  }
  shape_t out_shape(indices.shape().begin(), indices.shape().end());
  out_shape.push_back(D);
  xt::xarray<T> out = xt::xarray<T>::from_shape(out_shape);
  const T* W = weight.value().data();
  for (std::size_t i = 0; i < indices.size(); ++i)
    std::copy(W + indices.data()[i] * D, W + (indices.data()[i] + 1) * D, out.data() + i * D);
  return make_result<T>("embedding", std::move(out), {weight}, [indices, D](Node<T>& self) {
    xt::xarray<T> gw = xt::zeros<T>(self.inputs[0]->value.shape());
    for (std::size_t i = 0; i < indices.size(); ++i) {
      T* row = gw.data() + indices.data()[i] * D;
      const T* g = self.grad.data() + i * D;
      for (std::size_t j = 0; j < D; ++j) row[j] += g[j];
    }
    accumulate_grad(*self.inputs[0], std::move(gw), "embedding");
  });
}

namespace {

// Throws unless every target is ignore_index or a class in [0, classes).
void check_targets(const index_array& targets, std::size_t classes, std::int64_t ignore_index) {
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const auto t = targets.data()[i];
    if (t == ignore_index) continue;
    if (t < 0 || static_cast<std::size_t>(t) >= classes)
      throw Error("cross_entropy: target " + std::to_string(t) + " at position " + std::to_string(i) +
                  " is outside [0, " + std::to_string(classes) + ") and is not ignore_index " +
                  std::to_string(ignore_index));
  }
}

// Row i's loss sum_j q_j (lse - x_j) with q = (1 - eps) onehot(t) + eps / C (`on` = 1 - eps, `spread` = eps / C,
// `smoothed` = eps > 0), and its softmax in p (kept for backward): the shifted exps, then divided by their sum.
template <class T>
double cross_entropy_row(const T* in, T* p, std::size_t cols, std::int64_t t, double on, double spread, bool smoothed) {
  T m = in[0];
  for (std::size_t j = 1; j < cols; ++j) m = std::max(m, in[j]);
  simd::exp_shifted(in, m, p, cols);  // p_j = exp(x_j - m)
  double s = 0;
  for (std::size_t j = 0; j < cols; ++j) s += static_cast<double>(p[j]);
  for (std::size_t j = 0; j < cols; ++j) p[j] = static_cast<T>(static_cast<double>(p[j]) / s);
  // sum_j q_j (lse - x_j) = lse - on * x_t - spread * sum_j x_j, since the q_j sum to 1
  const double lse = static_cast<double>(m) + std::log(s);
  double loss = lse - on * static_cast<double>(in[t]);
  if (smoothed) {
    double row_sum = 0;
    for (std::size_t j = 0; j < cols; ++j) row_sum += static_cast<double>(in[j]);
    loss -= spread * row_sum;
  }
  return loss;
}

// The rows' losses reduced: one per row (none, shaped as the targets), or their sum or mean over the `count` rows
// that are not ignored (0 when there are none). Summed in row order, as a serial loop would.
template <class T>
xt::xarray<T> reduce_rows(const std::vector<double>& row_loss, const index_array& targets, std::int64_t ignore_index,
                          Reduction reduction, std::size_t& count) {
  double total = 0;
  count = 0;
  for (std::size_t i = 0; i < row_loss.size(); ++i) {
    if (targets.data()[i] == ignore_index) continue;
    total += row_loss[i];
    ++count;
  }
  xt::xarray<T> out;
  if (reduction == Reduction::none) {
    out = xt::xarray<T>::from_shape(shape_t(targets.shape().begin(), targets.shape().end()));
    for (std::size_t i = 0; i < row_loss.size(); ++i) out.data()[i] = static_cast<T>(row_loss[i]);
  } else {
    out = xt::xarray<T>::from_shape({});
    const double divisor = reduction == Reduction::mean ? static_cast<double>(count) : 1.0;
    out() = count ? static_cast<T>(total / divisor) : T(0);
  }
  return out;
}

}  // namespace

template <class T>
basic_tensor<T> cross_entropy(const basic_tensor<T>& logits, const index_array& targets, std::int64_t ignore_index,
                              double label_smoothing, Reduction reduction) {
  const auto& x = logits.value();
  const Rows r = rows_of(x, "cross_entropy");
  const shape_t ls = logits.shape();
  const shape_t ts(targets.shape().begin(), targets.shape().end());
  if (ts != shape_t(ls.begin(), ls.end() - 1))
    throw Error("cross_entropy: targets of shape " + shape_str(ts) + " do not match logits " + shape_str(ls) +
                " (expected " + shape_str(shape_t(ls.begin(), ls.end() - 1)) + ")");
  if (r.cols == 0) throw Error("cross_entropy: logits " + shape_str(ls) + " have no classes (last axis of size 0)");
  if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0))
    throw Error("cross_entropy: label_smoothing must be in [0, 1], got " + std::to_string(label_smoothing));
  check_targets(targets, r.cols, ignore_index);
  // q = (1 - eps) onehot(t) + eps / C: the target keeps weight `on`, every class (the target too) gets `spread`.
  const double eps = label_smoothing;
  const double on = 1.0 - eps, spread = r.cols ? eps / static_cast<double>(r.cols) : 0.0;
  // Rows run in parallel; their losses are reduced afterwards.
  xt::xarray<T> probs = xt::xarray<T>::from_shape(x.shape());
  std::vector<double> row_loss(r.rows, 0.0);
  kernels::for_each_row(r.rows, 6 * r.cols, [&](std::size_t i) {
    const auto t = targets.data()[i];
    if (t != ignore_index)
      row_loss[i] = cross_entropy_row(x.data() + i * r.cols, probs.data() + i * r.cols, r.cols, t, on, spread, eps > 0);
  });
  std::size_t count = 0;
  xt::xarray<T> out = reduce_rows<T>(row_loss, targets, ignore_index, reduction, count);
  return make_result<T>(
      "cross_entropy", std::move(out), {logits},
      [r, targets, ignore_index, count, on, spread, reduction, probs = std::move(probs)](Node<T>& self) {
        // d loss_i / d logits_i = softmax_i - q_i, times loss_i's output gradient: g / N (mean), g (sum), g_i (none)
        xt::xarray<T> gx = xt::zeros<T>(self.inputs[0]->value.shape());
        if (count) {
          const T* G = self.grad.data();
          kernels::for_each_row(r.rows, 2 * r.cols, [&](std::size_t i) {
            const auto t = targets.data()[i];
            if (t == ignore_index) return;
            const T scale = reduction == Reduction::none   ? G[i]
                            : reduction == Reduction::mean ? G[0] / static_cast<T>(count)
                                                           : G[0];
            const T target_step = static_cast<T>(on) * scale, spread_step = static_cast<T>(spread) * scale;
            const T* p = probs.data() + i * r.cols;
            T* d = gx.data() + i * r.cols;
            for (std::size_t j = 0; j < r.cols; ++j) d[j] = p[j] * scale;
            d[t] -= target_step;
            if (spread_step != T(0))
              for (std::size_t j = 0; j < r.cols; ++j) d[j] -= spread_step;
          });
        }
        accumulate_grad(*self.inputs[0], std::move(gx), "cross_entropy");
      });
}

template <class T>
basic_tensor<T> rms_norm(const basic_tensor<T>& x, const basic_tensor<T>& weight, double eps) {
  if (!(eps >= 0) || !std::isfinite(eps))
    throw Error("rms_norm: eps must be finite and >= 0, got " + std::to_string(eps));
  const auto& xv = x.value();
  const Rows r = rows_of(xv, "rms_norm");
  if (weight.defined() && weight.shape() != shape_t{r.cols})
    throw Error("rms_norm: weight must have shape [" + std::to_string(r.cols) + "] for input " + shape_str(x.shape()) +
                ", got " + shape_str(weight.shape()));
  if (r.cols == 0) throw Error("rms_norm: last axis of " + shape_str(x.shape()) + " is empty");
  xt::xarray<T> xhat = xt::xarray<T>::from_shape(xv.shape());
  std::vector<T> rstd(r.rows);
  for (std::size_t i = 0; i < r.rows; ++i) {
    const T* in = xv.data() + i * r.cols;
    T* h = xhat.data() + i * r.cols;
    T mean_square = 0;
    for (std::size_t j = 0; j < r.cols; ++j) mean_square += in[j] * in[j];
    mean_square /= static_cast<T>(r.cols);
    rstd[i] = T(1) / std::sqrt(mean_square + static_cast<T>(eps));
    for (std::size_t j = 0; j < r.cols; ++j) h[j] = in[j] * rstd[i];
  }
  xt::xarray<T> out = xhat;
  if (weight.defined()) out *= weight.value();
  return make_result<T>("rms_norm", std::move(out), {x, weight},
                        [r, xhat = std::move(xhat), rstd = std::move(rstd)](Node<T>& self) {
                          const T* w = self.inputs[1] ? self.inputs[1]->value.data() : nullptr;
                          const T* G = self.grad.data();
                          if (needs_grad(self, 0)) {
                            // xhat = x * rstd with d rstd / dx_k = -x_k rstd^3 / D, so
                            // dx = rstd * (dxhat - xhat * mean(dxhat * xhat)), dxhat = g * w (layer_norm without the
                            // mean terms)
                            xt::xarray<T> gx = xt::xarray<T>::from_shape(self.value.shape());
                            std::vector<T> dh(r.cols);
                            for (std::size_t i = 0; i < r.rows; ++i) {
                              const T* g = G + i * r.cols;
                              const T* h = xhat.data() + i * r.cols;
                              T mean_dh_h = 0;
                              for (std::size_t j = 0; j < r.cols; ++j) {
                                dh[j] = w ? g[j] * w[j] : g[j];
                                mean_dh_h += dh[j] * h[j];
                              }
                              mean_dh_h /= static_cast<T>(r.cols);
                              T* d = gx.data() + i * r.cols;
                              for (std::size_t j = 0; j < r.cols; ++j) d[j] = rstd[i] * (dh[j] - h[j] * mean_dh_h);
                            }
                            accumulate_grad(*self.inputs[0], std::move(gx), "rms_norm");
                          }
                          if (needs_grad(self, 1)) {
                            xt::xarray<T> gw = xt::zeros<T>({r.cols});
                            for (std::size_t i = 0; i < r.rows; ++i)
                              for (std::size_t j = 0; j < r.cols; ++j)
                                gw(j) += G[i * r.cols + j] * xhat.data()[i * r.cols + j];
                            accumulate_grad(*self.inputs[1], std::move(gw), "rms_norm");
                          }
                        });
}

template <class T>
basic_tensor<T> dropout(const basic_tensor<T>& x, double p, bool training, Generator& gen) {
  if (!(p >= 0.0 && p < 1.0)) throw Error("dropout: p must be in [0, 1), got " + std::to_string(p));
  if (!training || p == 0.0) return x;
  // The mask holds each element's factor (0 or 1 / (1 - p)); backward multiplies by the same factors.
  const T keep_scale = static_cast<T>(1.0 / (1.0 - p));
  const auto& xv = x.value();
  xt::xarray<T> mask = xt::xarray<T>::from_shape(xv.shape());
  for (std::size_t i = 0; i < mask.size(); ++i) mask.data()[i] = gen.uniform01() < p ? T(0) : keep_scale;
  xt::xarray<T> out = xv * mask;
  return make_result<T>("dropout", std::move(out), {x}, [mask = std::move(mask)](Node<T>& self) {
    accumulate_grad(*self.inputs[0], xt::xarray<T>(self.grad * mask), "dropout");
  });
}

template <class T>
basic_tensor<T> z_loss(const basic_tensor<T>& logits, const index_array& targets, std::int64_t ignore_index) {
  const shape_t& ls = logits.shape();
  const shape_t ts(targets.shape().begin(), targets.shape().end());
  if (ls.empty() || shape_t(ls.begin(), ls.end() - 1) != ts)
    throw Error("z_loss: targets of shape " + shape_str(ts) + " do not match logits " + shape_str(ls) +
                " (expected logits [..., C] with targets [...])");
  if (ls.back() == 0) throw Error("z_loss: logits " + shape_str(ls) + " have no classes (last axis of size 0)");
  xt::xarray<T> mask = xt::zeros<T>(targets.shape());
  std::size_t counted = 0;
  for (std::size_t i = 0; i < targets.size(); ++i)
    if (targets.data()[i] != ignore_index) {
      mask.data()[i] = 1;
      ++counted;
    }
  if (counted == 0) return basic_tensor<T>(xt::xarray<T>(T(0)));
  const basic_tensor<T> log_z = logsumexp(logits, {-1});
  return mul_scalar(sum(mul(mul(log_z, log_z), basic_tensor<T>(std::move(mask)))), 1.0 / static_cast<double>(counted));
}

#define XGRAD_INSTANTIATE(T)                                                                                     \
  template basic_tensor<T> softmax<T>(const basic_tensor<T>&, int);                                              \
  template basic_tensor<T> log_softmax<T>(const basic_tensor<T>&, int);                                          \
  template basic_tensor<T> masked_fill<T>(const basic_tensor<T>&, const xt::xarray<bool>&, double);              \
  template basic_tensor<T> layer_norm<T>(const basic_tensor<T>&, const basic_tensor<T>&, const basic_tensor<T>&, \
                                         double);                                                                \
  template basic_tensor<T> layer_norm<T>(const basic_tensor<T>&, const shape_t&, const basic_tensor<T>&,         \
                                         const basic_tensor<T>&, double);                                        \
  template basic_tensor<T> embedding<T>(const basic_tensor<T>&, const index_array&);                             \
  template basic_tensor<T> cross_entropy<T>(const basic_tensor<T>&, const index_array&, std::int64_t, double,    \
                                            Reduction);                                                          \
  template basic_tensor<T> z_loss<T>(const basic_tensor<T>&, const index_array&, std::int64_t);                  \
  template basic_tensor<T> rms_norm<T>(const basic_tensor<T>&, const basic_tensor<T>&, double);                  \
  template basic_tensor<T> dropout<T>(const basic_tensor<T>&, double, bool, Generator&);
XGRAD_INSTANTIATE(float)
XGRAD_INSTANTIATE(double)
#undef XGRAD_INSTANTIATE

}  // namespace xgrad
