// Distances in units in the last place, for holding a fast kernel to its reference (tests/test_kernels.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace xgrad::testing {

/// The number of representable values of T between a and b (0 when equal, also +0 vs -0 and NaN vs NaN; the
/// largest int64 when exactly one is NaN). Floats are mapped to integers that keep their order, so the distance
/// crosses zero and binades correctly.
template <class T>
std::int64_t ulp_distance(T a, T b) {
  static_assert(std::is_floating_point_v<T> && (sizeof(T) == 4 || sizeof(T) == 8));
  if (std::isnan(a) || std::isnan(b))
    return std::isnan(a) && std::isnan(b) ? 0 : std::numeric_limits<std::int64_t>::max();
  using Bits = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
  auto ordered = [](T x) {
    Bits i;
    std::memcpy(&i, &x, sizeof x);
    // Negative floats have the sign bit set and grow in magnitude as their bits grow: mirror them below zero.
    return i < 0 ? static_cast<std::int64_t>(std::numeric_limits<Bits>::min()) - i : static_cast<std::int64_t>(i);
  };
  const std::int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

/// ulp_distance(got, the reference rounded to T): 0 means got is the correctly rounded reference.
template <class T>
std::int64_t ulp_error(T got, long double reference) {
  return ulp_distance(got, static_cast<T>(reference));
}

/// The worst ulp error over a set of points and where it occurred.
struct WorstUlp {
  std::int64_t ulp = 0;
  long double input = 0, got = 0, want = 0;
  void add(std::int64_t u, long double in, long double g, long double w) {
    if (u > ulp) {
      ulp = u;
      input = in;
      got = g;
      want = w;
    }
  }
};

}  // namespace xgrad::testing
