// The one random generator of xgrad: seeded, header-only, the same numbers on every platform (std::
// distributions differ between standard libraries, so the samplers are written out here).
#pragma once

#include <cmath>
#include <cstdint>

namespace xgrad {

/// xoshiro256** (Blackman & Vigna 2018) seeded through SplitMix64 from (seed, stream, index). A generator for
/// (seed, stream, index) needs no state from any other, so "batch i of the data stream" is a pure function of i.
class Generator {
 public:
  explicit Generator(std::uint64_t seed, std::uint64_t stream = 0, std::uint64_t index = 0) {
    std::uint64_t x = seed;
    x = splitmix64(x) ^ stream;
    x = splitmix64(x) ^ index;
    for (auto& s : s_) s = splitmix64(x);
  }

  std::uint64_t next_u64() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  /// Uniform integer in [0, n), exactly uniform (rejection sampling); n > 0.
  std::uint64_t uniform(std::uint64_t n) {
    const std::uint64_t limit = ~std::uint64_t(0) - (~std::uint64_t(0) % n);
    std::uint64_t x;
    do x = next_u64();
    while (x >= limit);
    return x % n;
  }

  /// Uniform double in [0, 1).
  double uniform01() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  /// Standard normal N(0, 1), Box–Muller.
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1;
    do u1 = uniform01();
    while (u1 <= 0.0);
    const double u2 = uniform01();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * M_PI * u2);
    has_spare_ = true;
    return r * std::cos(2.0 * M_PI * u2);
  }

 private:
  static std::uint64_t splitmix64(std::uint64_t& x) {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  std::uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0;
};

}  // namespace xgrad
