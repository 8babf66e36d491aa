// The loop drivers of the ops: each runs a plain body per element, per row, per lane or per broadcast element,
// split over threads (kernels/parallel.h). Every output element is computed by one call of the body, in the same
// order as a serial loop, so results are bit-identical for any thread count (tests/test_threads.cpp). The op keeps
// the arithmetic (ops_*.cpp); these keep the speed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>

#include <xtensor/xarray.hpp>

#include "autograd/kernels/parallel.h"
#include "autograd/kernels/reference.h"
#include "autograd/tensor.h"

namespace xgrad::kernels {

/// Calls f(i) for i in [0, n), each a few element-operations; chunks are multiples of 64 elements so that every
/// SIMD vector sits where the serial loop has it.
template <class F>
void for_each_element(std::size_t n, F&& f) {
  parallel_for(0, n, grain_for(1, 64), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) f(i);
  });
}

/// Calls f(i) for every row i in [0, rows), a row costing about `work_per_row` element-operations.
template <class F>
void for_each_row(std::size_t rows, std::size_t work_per_row, F&& f) {
  parallel_for(0, rows, grain_for(work_per_row), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) f(i);
  });
}

/// Rows in blocks of kRowBlock (the last may be shorter). For sums over rows (a weight gradient): each block sums
/// its rows into a partial of its own and the caller adds the partials in block order, so the sum is the same for
/// any thread count, and each thread reads the rows that the row-wise loops around it ran on (the first blocks on the
/// calling thread, as parallel_for gives them).
constexpr std::size_t kRowBlock = 64;
inline std::size_t row_blocks(std::size_t rows) { return (rows + kRowBlock - 1) / kRowBlock; }

/// Calls f(block, lo, hi) for each block of rows [lo, hi) of `rows`, a row costing `work_per_row` element-operations.
template <class F>
void for_each_row_block(std::size_t rows, std::size_t work_per_row, F&& f) {
  parallel_for(0, row_blocks(rows), grain_for(kRowBlock * work_per_row), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t b = lo; b < hi; ++b) f(b, b * kRowBlock, std::min(rows, (b + 1) * kRowBlock));
  });
}

/// A tensor viewed as lanes along one axis: element j of lane (o, k) sits at flat index (o * len + j) * inner + k.
/// An op along any axis walks each lane with stride `inner`, so no permute to the last axis and back is needed.
struct Lanes {
  std::size_t outer = 1, len = 1, inner = 1;
};

/// The lanes of a tensor of `shape` along `axis` (negative counts from the end). Throws Error naming `op` on a
/// 0-d tensor or an axis out of range.
inline Lanes lanes_of(const shape_t& shape, int axis, const char* op) {
  if (shape.empty()) throw Error(std::string(op) + ": needs a tensor of at least 1 dim, got a 0-d tensor");
  const std::size_t ax = normalize_axis(axis, shape.size(), op);
  Lanes l;
  for (std::size_t d = 0; d < ax; ++d) l.outer *= shape[d];
  l.len = shape[ax];
  for (std::size_t d = ax + 1; d < shape.size(); ++d) l.inner *= shape[d];
  return l;
}

/// The stride of a lane of the last axis: a compile-time 1, so that case compiles to contiguous loops.
using unit_stride = std::integral_constant<std::size_t, 1>;

/// Calls f(base, stride) for every lane: its first element's flat index and the distance between its elements
/// (unit_stride for the last axis). Lanes are split over threads by outer index, each lane handled whole by one
/// call of f.
template <class F>
void for_each_lane(const Lanes& l, F&& f) {
  parallel_for(0, l.outer, grain_for(4 * l.len * l.inner), [&](std::size_t lo, std::size_t hi) {
    if (l.inner == 1) {
      for (std::size_t o = lo; o < hi; ++o) f(o * l.len, unit_stride{});
    } else {
      for (std::size_t o = lo; o < hi; ++o)
        for (std::size_t k = 0; k < l.inner; ++k) f(o * l.len * l.inner + k, l.inner);
    }
  });
}

namespace detail {
template <class T>
bool same_shape(const xt::xarray<T>& a, const shape_t& s) {
  return std::equal(a.shape().begin(), a.shape().end(), s.begin(), s.end());
}
// Whether `a`, without its leading 1s, equals the trailing axes of s (a bias [D] against [B, T, D]).
template <class T>
bool trailing_block(const xt::xarray<T>& a, const shape_t& s) {
  const auto& as = a.shape();
  std::size_t lead = 0;
  while (lead < as.size() && as[lead] == 1) ++lead;
  const std::size_t k = as.size() - lead;
  return k <= s.size() && std::equal(as.begin() + lead, as.end(), s.end() - k, s.end());
}
}  // namespace detail

/// z = f(x, y) at `out_shape` (the NumPy broadcast shape of x and y). The layouts a training step produces (equal
/// shapes; one operand repeating as a trailing block, e.g. a bias [D] against [B, T, D]) run as plain loops over
/// threads; any other broadcast goes through xtensor's broadcast, the reference every layout equals bit for bit
/// (tests/test_kernels.cpp).
template <class T, class F>
xt::xarray<T> broadcast_map(const xt::xarray<T>& x, const xt::xarray<T>& y, const shape_t& out_shape, F f) {
  xt::xarray<T> out = xt::xarray<T>::from_shape(out_shape);
  const std::size_t n = out.size();
  if (n == 0) return out;
  T* o = out.data();
  const T* X = x.data();
  const T* Y = y.data();
  const bool x_full = detail::same_shape(x, out_shape), y_full = detail::same_shape(y, out_shape);
  if (x_full && y_full) {
    parallel_for(0, n, grain_for(1, 64), [&](std::size_t lo, std::size_t hi) {
      for (std::size_t i = lo; i < hi; ++i) o[i] = f(X[i], Y[i]);
    });
  } else if (x_full && detail::trailing_block(y, out_shape)) {
    const std::size_t m = y.size();
    parallel_for(0, n / m, grain_for(m), [&](std::size_t lo, std::size_t hi) {
      for (std::size_t i = lo * m; i < hi * m; i += m)
        for (std::size_t j = 0; j < m; ++j) o[i + j] = f(X[i + j], Y[j]);
    });
  } else if (y_full && detail::trailing_block(x, out_shape)) {
    const std::size_t m = x.size();
    parallel_for(0, n / m, grain_for(m), [&](std::size_t lo, std::size_t hi) {
      for (std::size_t i = lo * m; i < hi * m; i += m)
        for (std::size_t j = 0; j < m; ++j) o[i + j] = f(X[j], Y[i + j]);
    });
  } else {
    reference::broadcast_map_reference(x, y, out, f);
  }
  return out;
}

}  // namespace xgrad::kernels
