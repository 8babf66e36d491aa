// What the op tests share: seeded random inputs, array printing, and the checks every op test makes — a float64
// finite-difference gradient check (CHECK_GRADIENT, over autograd/gradcheck.h), closeness of arrays, masks, and
// the text of an xgrad::Error.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <xtensor/xarray.hpp>
#include <xtensor/xio.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xreducer.hpp>

#include "autograd/gradcheck.h"
#include "autograd/tensor.h"

namespace xgrad::testing {

/// max |a - b| / (1 + max |b|): a relative error that stays meaningful where b is near 0. Fails the test (REQUIRE)
/// when the shapes differ.
inline double relative_difference(const xt::xarray<float>& a, const xt::xarray<float>& b) {
  REQUIRE(a.shape() == b.shape());
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a.data()[i]) - b.data()[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b.data()[i])));
  }
  return diff / (1.0 + scale);
}

/// The inputs of a function under gradcheck.
using Inputs = std::vector<DTensor>;

/// Values drawn uniformly from [lo, hi).
inline xt::xarray<double> uniform(const shape_t& shape, std::mt19937& gen, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  xt::xarray<double> v = xt::xarray<double>::from_shape(shape);
  for (std::size_t i = 0; i < v.size(); ++i) v.data()[i] = dist(gen);
  return v;
}

/// A leaf that requires a gradient, filled uniformly from [lo, hi).
inline DTensor rand_input(const shape_t& shape, std::mt19937& gen, double lo = -1.0, double hi = 1.0) {
  return DTensor(uniform(shape, gen, lo, hi), true);
}

/// A leaf that requires a gradient with |x| in [0.2, 1) and random sign: well away from kinks at 0 (relu, abs).
inline DTensor away_from_zero(const shape_t& shape, std::mt19937& gen) {
  xt::xarray<double> v = uniform(shape, gen, 0.2, 1.0);
  std::bernoulli_distribution sign(0.5);
  for (std::size_t i = 0; i < v.size(); ++i)
    if (sign(gen)) v.data()[i] = -v.data()[i];
  return DTensor(std::move(v), true);
}

/// A float64 leaf holding a float tensor's value, requiring a gradient.
inline DTensor to_double(const Tensor& t) { return DTensor(xt::xarray<double>(t.value()), true); }

/// `a` with a new shape of the same element count (for literals such as a column, which braces cannot spell).
template <class T>
xt::xarray<T> reshaped(xt::xarray<T> a, const shape_t& shape) {
  a.reshape(shape);
  return a;
}

template <class T>
shape_t shape_of(const xt::xarray<T>& a) {
  return shape_t(a.shape().begin(), a.shape().end());
}

/// The array as xtensor prints it, for test messages.
template <class T>
std::string to_string(const xt::xarray<T>& a) {
  std::ostringstream out;
  out << a;
  return out.str();
}

/// numpy.matmul for operands of at least 2 dims by brute force through xtensor broadcasting:
/// [..., M, K, 1] * [..., 1, K, N], summed over K.
inline xt::xarray<double> reference_matmul(xt::xarray<double> a, xt::xarray<double> b) {
  shape_t as = shape_of(a), bs = shape_of(b);
  as.push_back(1);
  bs.insert(bs.end() - 2, 1);
  a.reshape(as);
  b.reshape(bs);
  xt::xarray<double> product = a * b;
  return xt::sum(product, {product.dimension() - 2}, xt::evaluation_strategy::immediate);
}

template <class T>
bool all_finite(const xt::xarray<T>& a) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!std::isfinite(a.data()[i])) return false;
  return true;
}

}  // namespace xgrad::testing

/// gradcheck(f, inputs[, options]) passes; on failure the report names the worst element.
#define CHECK_GRADIENT(...)                                                      \
  do {                                                                           \
    const ::xgrad::GradcheckResult gc_result_ = ::xgrad::gradcheck(__VA_ARGS__); \
    INFO(gc_result_.message);                                                    \
    CHECK(gc_result_.ok);                                                        \
  } while (false)

/// Same shape and every element within `tol` (absolute) of the expected array.
#define CHECK_CLOSE(got, want, tol)                                                                               \
  do {                                                                                                            \
    const xt::xarray<double> got_ = (got);                                                                        \
    const xt::xarray<double> want_ = (want);                                                                      \
    INFO("got:\n" << ::xgrad::testing::to_string(got_) << "\nexpected:\n" << ::xgrad::testing::to_string(want_)); \
    REQUIRE(::xgrad::testing::shape_of(got_) == ::xgrad::testing::shape_of(want_));                               \
    CHECK(xt::allclose(got_, want_, 0.0, (tol)));                                                                 \
  } while (false)

/// Same shape and the same booleans.
#define CHECK_MASK(got, want)                                                                                     \
  do {                                                                                                            \
    const xt::xarray<bool> got_ = (got);                                                                          \
    const xt::xarray<bool> want_ = (want);                                                                        \
    INFO("got:\n" << ::xgrad::testing::to_string(got_) << "\nexpected:\n" << ::xgrad::testing::to_string(want_)); \
    REQUIRE(::xgrad::testing::shape_of(got_) == ::xgrad::testing::shape_of(want_));                               \
    CHECK((got_ == want_));                                                                                       \
  } while (false)

/// The expression throws xgrad::Error whose message contains `text` (the op's name, "op: ...").
#define CHECK_ERROR(text, ...) CHECK_THROWS_WITH_AS((__VA_ARGS__), doctest::Contains(text), ::xgrad::Error)

/// `statement` throws xgrad::Error whose message starts with `prefix`.
#define CHECK_ERROR_STARTS(statement, prefix) \
  do {                                        \
    std::string what_;                        \
    try {                                     \
      statement;                              \
    } catch (const ::xgrad::Error& e) {       \
      what_ = e.what();                       \
    }                                         \
    INFO("message: " << what_);               \
    CHECK(what_.rfind(prefix, 0) == 0);       \
  } while (false)
