// Every fast path of the engine (autograd/kernels/) against its plain reference (autograd/kernels/reference.h):
// the SIMD exp, gelu and softmax kernels within a stated ulp bound, measured as the worst case over dense grids,
// sweeps of bit patterns and random draws, with their edge cases checked exactly; the loop drivers, in-place
// gradient helpers and matmul's GEMM layouts exactly or to rounding. (Fused attention against composed attention
// for every scaling is nn's test.)
//
// Bounds are against the exact function (long double), so they include the conditioning of the formula in float
// that any float implementation has (x - max loses up to |x - max| / 2 ulp before the exp); for softmax the
// kernel's own error (the reference given the same float x - max) is bounded too. The float kernels run the clone
// the loader picked for this CPU (the bounds were measured on AVX-512); their shared building block,
// simd::exp_in_place, is checked compiled for each ISA this CPU runs.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "autograd/blas.h"
#include "autograd/kernels/activations.h"
#include "autograd/kernels/gradient_buffers.h"
#include "autograd/kernels/isa.h"
#include "autograd/kernels/loops.h"
#include "autograd/kernels/parallel.h"
#include "autograd/kernels/reference.h"
#include "autograd/kernels/small_gemm.h"
#include "autograd/kernels/softmax.h"
#include "autograd/kernels/vector_math.h"
#include "autograd/ops.h"
#include "tests/support/op_testing.h"
#include "tests/support/ulp.h"

using namespace xgrad;
using xgrad::testing::ulp_error;
using xgrad::testing::uniform;
using xgrad::testing::WorstUlp;

namespace {

constexpr float kExpLo = -87.3365448f;  // below: the kernel returns 0 (exp is below FLT_MIN = 1.18e-38 there)
constexpr float kExpHi = 88.37f;        // above: the kernel returns +inf
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kFloatMin = std::numeric_limits<float>::min();

/// Floats spread over [lo, hi]: a grid of step `step`, every `stride`-th positive bit pattern (and its negation)
/// that falls in the range, and 100000 uniform draws.
std::vector<float> sample(float lo, float hi, double step, std::uint32_t stride, std::uint32_t seed) {
  std::vector<float> xs;
  for (double x = lo; x <= hi; x += step) xs.push_back(static_cast<float>(x));
  for (std::uint32_t bits = 0; bits < 0x7f800000u; bits += stride) {
    float x;
    std::memcpy(&x, &bits, sizeof x);
    if (x >= lo && x <= hi) xs.push_back(x);
    if (-x >= lo && -x <= hi) xs.push_back(-x);
  }
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int i = 0; i < 100000; ++i) xs.push_back(dist(gen));
  return xs;
}

std::vector<float> simd_exp(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  simd::exp_shifted(x.data(), 0.0f, y.data(), x.size());  // x - 0 = x exactly, also for -0, +-inf and NaN
  return y;
}

// exp_in_place compiled for one ISA each (n a multiple of 16), as XGRAD_ISA_VARIANTS compiles the kernels.
#if defined(__x86_64__)
#define XGRAD_EXP_FOR_ISA(name, target_attribute)       \
  target_attribute void name(float* x, std::size_t n) { \
    for (std::size_t i = 0; i < n; i += simd::kWide) {  \
      simd::float16 v;                                  \
      std::memcpy(&v, x + i, sizeof v);                 \
      simd::exp_in_place(v);                            \
      std::memcpy(x + i, &v, sizeof v);                 \
    }                                                   \
  }
XGRAD_EXP_FOR_ISA(exp_avx512, __attribute__((target("avx512f"))))
XGRAD_EXP_FOR_ISA(exp_avx2, __attribute__((target("avx2"))))
XGRAD_EXP_FOR_ISA(exp_baseline, )
#undef XGRAD_EXP_FOR_ISA
#endif

}  // namespace

// Bound: 1 ulp on [kExpLo, kExpHi] (measured worst: 1 ulp over 4.1 million inputs).
TEST_CASE("simd exp (float): within 1 ulp of exp on its range; the edges exact") {
  const std::vector<float> x = sample(kExpLo, kExpHi, 1e-4, 997, 1);
  const std::vector<float> y = simd_exp(x);
  WorstUlp worst;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const long double want = std::exp(static_cast<long double>(x[i]));
    worst.add(ulp_error(y[i], want), x[i], y[i], want);
  }
  MESSAGE("exp float: worst " << worst.ulp << " ulp over " << x.size() << " inputs, at x = " << double(worst.input));
  CHECK(worst.ulp <= 1);

  const std::vector<float> edges{0.0f,         -0.0f,
                                 1e-30f,       -1e-30f,
                                 kFloatMin,    std::numeric_limits<float>::denorm_min(),
                                 kExpLo,       std::nextafter(kExpLo, -kInf),
                                 -100.0f,      -kInf,
                                 kExpHi,       std::nextafter(kExpHi, kInf),
                                 100.0f,       kInf,
                                 std::nanf("")};
  const std::vector<float> e = simd_exp(edges);
  CHECK(e[0] == 1.0f);
  CHECK(e[1] == 1.0f);
  CHECK(ulp_error(e[2], std::exp(1e-30L)) == 0);  // 1 + tiny: exactly 1
  CHECK(ulp_error(e[3], std::exp(-1e-30L)) <= 1);
  CHECK(e[4] == 1.0f);
  CHECK(e[5] == 1.0f);
  CHECK(ulp_error(e[6], std::exp(static_cast<long double>(kExpLo))) <= 1);
  CHECK(e[7] == 0.0f);  // flushed: the true value is below FLT_MIN
  CHECK(e[8] == 0.0f);
  CHECK(e[9] == 0.0f);  // exp(-inf) = 0: masked entries drop out of a softmax
  CHECK(ulp_error(e[10], std::exp(static_cast<long double>(kExpHi))) <= 1);
  CHECK(e[11] == kInf);
  CHECK(e[12] == kInf);
  CHECK(e[13] == kInf);
  CHECK(std::isnan(e[14]));
}

// ctest runs this file once per variant (XGRAD_SIMD, tests/CMakeLists.txt): each run must be the variant it names.
TEST_CASE("simd::active_isa: the variant XGRAD_SIMD names, else the widest this CPU runs") {
  const char* wanted = std::getenv("XGRAD_SIMD");
  if (wanted != nullptr && *wanted != '\0') {
    CHECK(std::string(simd::isa_name(simd::active_isa())) == wanted);
  } else {
    CHECK(simd::cpu_runs(simd::active_isa()));
    for (simd::Isa wider : {simd::Isa::avx2, simd::Isa::avx512f})
      if (simd::cpu_runs(wider)) CHECK(static_cast<int>(simd::active_isa()) >= static_cast<int>(wider));
  }
  CHECK(simd::cpu_runs(simd::Isa::baseline));
}

// The building block under every float kernel, compiled for each ISA this CPU runs (the clones may differ in
// their last bit: with AVX-512 the compiler fuses multiply-adds): each within 1 ulp on the range.
#if defined(__x86_64__)
TEST_CASE("simd exp_in_place compiled for AVX-512, AVX2 and baseline: each within 1 ulp") {
  std::vector<float> x = sample(kExpLo, kExpHi, 1e-4, 4099, 4);
  x.resize(x.size() / simd::kWide * simd::kWide);
  struct Isa {
    const char* name;
    bool runs;
    void (*exp)(float*, std::size_t);
  };
  for (const Isa& isa :
       {Isa{"baseline", true, exp_baseline}, Isa{"avx2", __builtin_cpu_supports("avx2") != 0, exp_avx2},
        Isa{"avx512f", __builtin_cpu_supports("avx512f") != 0, exp_avx512}}) {
    if (!isa.runs) continue;
    std::vector<float> y = x;
    isa.exp(y.data(), y.size());
    WorstUlp worst;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const long double want = std::exp(static_cast<long double>(x[i]));
      worst.add(ulp_error(y[i], want), x[i], y[i], want);
    }
    MESSAGE("exp_in_place " << std::string(isa.name) << ": worst " << worst.ulp
                            << " ulp at x = " << double(worst.input));
    CHECK(worst.ulp <= 1);
  }
}
#endif

// Against the exact gelu: 14 ulp for x >= -3 (measured worst 14); below, the rounding of the float argument
// 2u = 2k (x + c x^3) is amplified by |2u| (measured worst 183 ulp at x = -9.6, where gelu is -1e-33), which any
// float evaluation of the formula shares. sigmoid(2u), kept for backward, likewise.
TEST_CASE("simd gelu (float) against the exact tanh-form gelu") {
  const std::vector<float> x = sample(-10.0f, 10.0f, 1e-4, 4001, 2);
  std::vector<float> out(x.size()), sig(x.size());
  simd::gelu(x.data(), out.data(), sig.data(), x.size());
  WorstUlp near, all;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const long double want = reference::gelu(x[i]);
    if (std::fabs(want) < kFloatMin) continue;
    all.add(ulp_error(out[i], want), x[i], out[i], want);
    if (x[i] >= -3) near.add(ulp_error(out[i], want), x[i], out[i], want);
  }
  MESSAGE("gelu float: x >= -3 " << near.ulp << " ulp (x = " << double(near.input) << "), x in [-10, 10] " << all.ulp
                                 << " ulp (x = " << double(all.input) << ")");
  CHECK(near.ulp <= 14);
  // Below -3 the bound depends on how the compiler contracts the inner term (183 ulp at -O2, 197 at the sanitizer
  // build's -O1): assert the larger with headroom.
  CHECK(all.ulp <= 256);
  const std::vector<float> edges{0.0f, -0.0f, 30.0f, -30.0f};
  std::vector<float> eo(edges.size()), es(edges.size());
  simd::gelu(edges.data(), eo.data(), es.data(), edges.size());
  CHECK(eo[0] == 0.0f);
  CHECK(eo[1] == 0.0f);
  CHECK(eo[2] == 30.0f);  // sigmoid saturates to 1
  CHECK(eo[3] == 0.0f);   // exp overflows to inf: sigmoid 0
}

// gelu's derivative crosses zero (at x = -0.7518), where no ulp bound holds for any float formula; its error is
// bounded absolutely: |got - exact| <= 34 * 2^-24 * max(1, |exact|) (measured worst 33.1, at x = 4.96).
TEST_CASE("simd gelu_backward (float) against the exact derivative") {
  const std::vector<float> x = sample(-10.0f, 10.0f, 1e-4, 4001, 5);
  std::vector<float> out(x.size()), sig(x.size()), g(x.size());
  simd::gelu(x.data(), out.data(), sig.data(), x.size());
  std::fill(g.begin(), g.end(), 1.0f);  // d out / d x itself
  simd::gelu_backward(x.data(), sig.data(), g.data(), x.size());
  double worst = 0, at = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const long double want = reference::gelu_derivative(x[i]);
    const double err = static_cast<double>(std::fabs(g[i] - want) / std::max(1.0L, std::fabs(want)) / 0x1p-24L);
    if (err > worst) worst = err, at = x[i];
  }
  MESSAGE("gelu' float: worst " << worst << " x 2^-24 (x = " << at << ")");
  CHECK(worst <= 34);
}

// Rows of every tail length around the 16-float vector, values spread over a few widths, at 0 and offset by 1000.
// Kernel bound (the reference given the float x - max the kernel rounds): 5 ulp. End to end: rows within 4 of their
// max 5 ulp, within 16 12 ulp, within 40 35 ulp (the float x - max). Measured worsts equal the bounds. Entries
// below FLT_MIN are skipped (flushed in training anyway).
TEST_CASE("simd softmax_row (float) against the reference") {
  std::mt19937 gen(3);
  const std::vector<std::size_t> lengths{1, 2, 3, 7, 15, 16, 17, 31, 32, 33, 64, 100, 128, 1000};
  WorstUlp kernel;
  for (const float spread : {4.0f, 16.0f, 40.0f}) {
    WorstUlp exact;
    std::uniform_real_distribution<float> dist(-spread / 2, spread / 2);
    for (const std::size_t n : lengths) {
      for (int rep = 0; rep < 200; ++rep) {
        std::vector<float> row(n), out(n), shifted(n);
        for (auto& v : row) v = dist(gen) + (rep % 2 ? 1000.0f : 0.0f);
        simd::softmax_row(row.data(), out.data(), n);
        const float m = *std::max_element(row.begin(), row.end());
        for (std::size_t j = 0; j < n; ++j) shifted[j] = row[j] - m;
        const auto want = reference::softmax_row(row.data(), n);
        const auto want_kernel = reference::softmax_row(shifted.data(), n);
        for (std::size_t j = 0; j < n; ++j) {
          if (want[j] >= kFloatMin) exact.add(ulp_error(out[j], want[j]), n, out[j], want[j]);
          if (want_kernel[j] >= kFloatMin) kernel.add(ulp_error(out[j], want_kernel[j]), n, out[j], want_kernel[j]);
        }
      }
    }
    MESSAGE("softmax float, spread " << spread << ": " << exact.ulp << " ulp (row length " << double(exact.input)
                                     << ")");
    CHECK(exact.ulp <= (spread == 4.0f ? 5 : spread == 16.0f ? 12 : 35));
  }
  MESSAGE("softmax float kernel: " << kernel.ulp << " ulp (row length " << double(kernel.input) << ")");
  CHECK(kernel.ulp <= 5);

  // Masked entries (-inf) get exactly 0 and drop out; a fully masked row is all zeros, in place too.
  std::vector<float> row{1.0f, -kInf, 2.0f, -kInf}, out(4);
  simd::softmax_row(row.data(), out.data(), 4);
  CHECK(out[1] == 0.0f);
  CHECK(out[3] == 0.0f);
  CHECK(ulp_error(out[0], 1.0L / (1.0L + std::exp(1.0L))) <= 1);
  std::vector<float> masked(37, -kInf);
  simd::softmax_row(masked.data(), masked.data(), masked.size());
  CHECK(std::all_of(masked.begin(), masked.end(), [](float v) { return v == 0.0f; }));
}

namespace {

// One small_gemm case: op(A) [m, k], op(B) [k, n] stored with row strides a few floats wider than their rows (as a
// head's block inside [B, T, 3 H d_k]), C preset to NaN when beta = 0 (the kernel must not read it). Where `skip`
// says terms are zero, op(A) holds zeros there; c_past_pos wants exact zeros past each row's position. Each entry is
// held to the float sum's error bound, (k + 3) u (|alpha| sum_p |a_ip b_pj| + |beta c_ij|) with u = 2^-24: k - 1
// roundings of the sum and one each for alpha, beta and their sum, applied to the magnitudes that can cancel.
void check_small_gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, float beta,
                      simd::Skip skip, std::mt19937& gen) {
  std::normal_distribution<float> dist;
  // Each matrix allocated to its last element exactly (a read or write past it is out of bounds under ASan).
  constexpr std::size_t pad = 3;
  const std::size_t lda = (trans_a ? m : k) + pad, ldb = (trans_b ? k : n) + pad, ldc = n + pad;
  auto exact = [](std::size_t rows, std::size_t ld) { return rows == 0 ? 0 : rows * ld - pad; };
  std::vector<float> a(exact(trans_a ? k : m, lda)), b(exact(trans_b ? n : k, ldb)), c(exact(m, ldc));
  for (float& v : a) v = dist(gen);
  for (float& v : b) v = dist(gen);
  for (float& v : c) v = beta == 0 ? std::numeric_limits<float>::quiet_NaN() : dist(gen);
  // Sorted positions, repeats and gaps included, as query positions.
  std::vector<std::size_t> pos(skip == simd::Skip::a_t_past_pos ? k : m);
  const std::size_t range = skip == simd::Skip::a_t_past_pos ? m : skip == simd::Skip::c_past_pos ? n : k;
  std::size_t at = 0;
  for (std::size_t& p : pos) p = (at += gen() % 3) % std::max<std::size_t>(1, range);
  std::sort(pos.begin(), pos.end());
  std::vector<float> op_a(m * k), op_b(k * n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t p = 0; p < k; ++p) {
      float& x = trans_a ? a[p * lda + i] : a[i * lda + p];
      if ((skip == simd::Skip::a_past_pos && p > pos[i]) || (skip == simd::Skip::a_t_past_pos && i > pos[p])) x = 0;
      op_a[i * k + p] = x;
    }
  for (std::size_t p = 0; p < k; ++p)
    for (std::size_t j = 0; j < n; ++j) op_b[p * n + j] = trans_b ? b[j * ldb + p] : b[p * ldb + j];
  std::vector<float> abs_a(op_a.size()), abs_b(op_b.size()), pack(k * simd::small_gemm_pack_width(n)), c0 = c;
  std::transform(op_a.begin(), op_a.end(), abs_a.begin(), [](float v) { return std::fabs(v); });
  std::transform(op_b.begin(), op_b.end(), abs_b.begin(), [](float v) { return std::fabs(v); });
  const auto want = reference::matmul(op_a.data(), op_b.data(), m, k, n);
  const auto magnitude = reference::matmul(abs_a.data(), abs_b.data(), m, k, n);
  simd::small_gemm({trans_a, trans_b, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc, skip,
                    pos.data(), pack.data()});
  const long double u = std::ldexp(1.0L, -24);
  std::size_t bad = 0, zeros_wrong = 0;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      const float got = c[i * ldc + j];
      if (skip == simd::Skip::c_past_pos && j > pos[i]) {
        zeros_wrong += got != 0.0f;
        continue;
      }
      const long double old = beta == 0 ? 0.0L : static_cast<long double>(c0[i * ldc + j]);
      const long double exact = alpha * want[i * n + j] + beta * old;
      const long double bound = (k + 3) * u * (std::fabs(alpha) * magnitude[i * n + j] + std::fabs(beta * old));
      bad += !(std::fabs(got - exact) <= bound);
    }
  INFO("trans_a " << trans_a << " trans_b " << trans_b << " m " << m << " n " << n << " k " << k << " skip "
                  << static_cast<int>(skip) << " beta " << beta);
  CHECK(bad == 0);
  CHECK(zeros_wrong == 0);
  for (std::size_t i = 0; i + 1 < m; ++i)  // the padding between C's rows is never written
    for (std::size_t j = n; j < ldc; ++j) CHECK(std::memcmp(&c[i * ldc + j], &c0[i * ldc + j], sizeof(float)) == 0);
}

}  // namespace

TEST_CASE("small_gemm: every layout, skip and tail within the float sum's bound of the reference") {
  INFO("variant " << simd::isa_name(simd::active_isa()));
  std::mt19937 gen(11);
  const std::vector<std::array<std::size_t, 3>> shapes{{64, 64, 32}, {64, 32, 64},  {1, 1, 1},  {7, 13, 5},
                                                       {17, 70, 3},  {33, 100, 19}, {5, 16, 0}, {130, 8, 65}};
  for (const auto& shape : shapes)
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true})
        for (const float beta : {0.0f, 1.0f, -0.5f}) {
          check_small_gemm(trans_a, trans_b, shape[0], shape[1], shape[2], 0.7f, beta, simd::Skip::none, gen);
          if (shape[2] == 0) continue;
          check_small_gemm(trans_a, trans_b, shape[0], shape[1], shape[2], 1.0f, beta, simd::Skip::c_past_pos, gen);
          if (!trans_a)
            check_small_gemm(false, trans_b, shape[0], shape[1], shape[2], 1.0f, beta, simd::Skip::a_past_pos, gen);
          else
            check_small_gemm(true, trans_b, shape[0], shape[1], shape[2], 1.0f, beta, simd::Skip::a_t_past_pos, gen);
        }
}

namespace {

// gemm<float> of one case with own kernel allowed and forbidden, strided operands: both within the float sum's error
// bound of the exact product, so within twice of it of each other: 2 (k + 1) u (|alpha| sum_p |a_ip b_pj| + |beta c|),
// u = 2^-24. With beta 0, C starts as NaN (neither may read it).
void check_own_against_blas(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float beta,
                            std::mt19937& gen) {
  std::normal_distribution<float> dist;
  const std::size_t lda = (trans_a ? m : k) + 5, ldb = (trans_b ? k : n) + 5, ldc = n + 5;
  std::vector<float> a((trans_a ? k : m) * lda), b((trans_b ? n : k) * ldb), c0(m * ldc);
  for (float& v : a) v = dist(gen);
  for (float& v : b) v = dist(gen);
  for (float& v : c0) v = beta == 0 ? std::numeric_limits<float>::quiet_NaN() : dist(gen);
  std::vector<float> own = c0, library = c0;
  const bool was = blas::set_own_kernel(true);
  blas::gemm<float>(trans_a, trans_b, m, n, k, 0.8f, a.data(), lda, b.data(), ldb, beta, own.data(), ldc);
  blas::set_own_kernel(false);
  CHECK_FALSE(blas::own_kernel_active());
  blas::gemm<float>(trans_a, trans_b, m, n, k, 0.8f, a.data(), lda, b.data(), ldb, beta, library.data(), ldc);
  blas::set_own_kernel(was);
  std::size_t apart = 0;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      long double magnitude = 0;
      for (std::size_t p = 0; p < k; ++p)
        magnitude += std::fabs(static_cast<long double>(trans_a ? a[p * lda + i] : a[i * lda + p]) *
                               (trans_b ? b[j * ldb + p] : b[p * ldb + j]));
      const long double bound = 2 * (k + 1) * std::ldexp(1.0L, -24) *
                                (0.8L * magnitude + (beta == 0 ? 0 : std::fabs(beta * c0[i * ldc + j])));
      apart += !(std::fabs(own[i * ldc + j] - library[i * ldc + j]) <= bound);
    }
  INFO("trans_a " << trans_a << " trans_b " << trans_b << " m " << m << " n " << n << " k " << k << " beta " << beta);
  CHECK(apart == 0);
}

}  // namespace

TEST_CASE("blas::is_avx512_core: OpenBLAS's AVX-512 kernel families, in any case") {
  for (const char* wide : {"SkylakeX", "Cooperlake", "SapphireRapids", "skylakex", "SAPPHIRERAPIDS"})
    CHECK_MESSAGE(blas::is_avx512_core(wide), wide);
  for (const char* narrow : {"Haswell", "Zen", "Prescott", "Sandybridge", "unknown", ""})
    CHECK_MESSAGE(!blas::is_avx512_core(narrow), narrow);
}

TEST_CASE(
    "gemm<float>: xgrad's own kernel where the CPU has AVX-512 and OpenBLAS narrower kernels, within BLAS's bound") {
  const std::string core = blas::core_name();
  const bool wide_blas = blas::is_avx512_core(core);
  INFO("OpenBLAS core " << core << ", variant " << std::string(simd::isa_name(simd::active_isa())));
  CHECK(blas::own_kernel_active() == (simd::active_isa() == simd::Isa::avx512f && !wide_blas));
  std::mt19937 gen(5);
  // 97 x 70 x 41: op(B) copied (rows not whole vectors); 50 x 64 x 33: read in place.
  for (const auto& shape : std::vector<std::array<std::size_t, 3>>{{97, 70, 41}, {50, 64, 33}})
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true})
        for (const float beta : {0.0f, 0.5f})
          check_own_against_blas(trans_a, trans_b, shape[0], shape[1], shape[2], beta, gen);

  // alpha 0 stays with BLAS (whose reference reads neither A nor B then; OpenBLAS's SkylakeX kernels do read them): a
  // NaN in A gives in C what BLAS gives, bit for bit.
  std::vector<float> a(6 * 4, std::numeric_limits<float>::quiet_NaN()), b(4 * 8, 1.0f), c(6 * 8, 2.0f), c_blas = c;
  blas::gemm<float>(false, false, 6, 8, 4, 0.0f, a.data(), 4, b.data(), 8, 1.0f, c.data(), 8);
  const bool was = blas::set_own_kernel(false);
  blas::gemm<float>(false, false, 6, 8, 4, 0.0f, a.data(), 4, b.data(), 8, 1.0f, c_blas.data(), 8);
  blas::set_own_kernel(was);
  CHECK(std::memcmp(c.data(), c_blas.data(), c.size() * sizeof(float)) == 0);
}

TEST_CASE("gemm<float>: a product split over two threads is summed by the kernel the whole product gets") {
  // k n = 1.5 2^20 floats of op(B): the whole product goes to BLAS. Split into column halves over two threads, each
  // half alone would fit the own kernel; deciding on the whole product sends both halves to BLAS, as with the own
  // kernel forbidden (bit for bit: the same BLAS calls).
  std::mt19937 gen(9);
  std::normal_distribution<float> dist;
  const std::size_t m = 64, n = 2048, k = 768;
  std::vector<float> a(m * k), b(k * n), allowed(m * n), forbidden(m * n);
  for (float& v : a) v = dist(gen);
  for (float& v : b) v = dist(gen);
  const int threads = num_threads();
  set_num_threads(2);
  blas::gemm<float>(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, allowed.data(), n);
  const bool was = blas::set_own_kernel(false);
  blas::gemm<float>(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, forbidden.data(), n);
  blas::set_own_kernel(was);
  // A product the own kernel takes whole (op(B) of 2^19 floats), split by rows: each entry summed in one order.
  const std::size_t m2 = 512, n2 = 512, k2 = 1024;
  std::vector<float> a2(m2 * k2), b2(k2 * n2), one(m2 * n2), two(m2 * n2);
  for (float& v : a2) v = dist(gen);
  for (float& v : b2) v = dist(gen);
  blas::gemm<float>(false, false, m2, n2, k2, 1.0f, a2.data(), k2, b2.data(), n2, 0.0f, two.data(), n2);
  set_num_threads(1);
  blas::gemm<float>(false, false, m2, n2, k2, 1.0f, a2.data(), k2, b2.data(), n2, 0.0f, one.data(), n2);
  set_num_threads(threads);
  std::size_t differ = 0, differ_split = 0;
  for (std::size_t i = 0; i < allowed.size(); ++i)
    differ += std::memcmp(&allowed[i], &forbidden[i], sizeof(float)) != 0;
  for (std::size_t i = 0; i < one.size(); ++i) differ_split += std::memcmp(&one[i], &two[i], sizeof(float)) != 0;
  INFO("OpenBLAS core " << blas::core_name());
  CHECK(differ == 0);
  if (blas::own_kernel_active()) CHECK(differ_split == 0);
}

// The double kernels (xsimd::exp): softmax within 5 double ulp of the reference given the same x - max, gelu within
// 14 for x in [-3, 10] (measured worsts 5 and 14).
TEST_CASE("simd softmax_row and gelu (double) against the reference") {
  std::mt19937 gen(6);
  std::uniform_real_distribution<double> dist(-8.0, 8.0);
  WorstUlp soft, gelu_out;
  for (const std::size_t n : {1, 2, 3, 5, 8, 9, 33, 100}) {
    for (int rep = 0; rep < 200; ++rep) {
      std::vector<double> row(n), out(n), shifted(n);
      for (auto& v : row) v = dist(gen);
      simd::softmax_row(row.data(), out.data(), n);
      const double m = *std::max_element(row.begin(), row.end());
      for (std::size_t j = 0; j < n; ++j) shifted[j] = row[j] - m;
      const auto want = reference::softmax_row(shifted.data(), n);
      for (std::size_t j = 0; j < n; ++j) soft.add(ulp_error(out[j], want[j]), n, out[j], want[j]);
    }
  }
  std::vector<double> x(20001), out(x.size()), sig(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = -3.0 + 13.0 * static_cast<double>(i) / 20000.0;
  simd::gelu(x.data(), out.data(), sig.data(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::fabs(reference::gelu(x[i])) >= std::numeric_limits<double>::min())
      gelu_out.add(ulp_error(out[i], reference::gelu(x[i])), x[i], out[i], reference::gelu(x[i]));
  MESSAGE("double: softmax " << soft.ulp << " ulp, gelu (x in [-3, 10]) " << gelu_out.ulp << " ulp");
  CHECK(soft.ulp <= 5);
  CHECK(gelu_out.ulp <= 14);
}

// The vector reductions reorder the sum (one partial sum per lane): within the classic bound of a reordered sum,
// n * eps * sum |terms|, of the exact value.
TEST_CASE("simd sum, dot, sum_squared_deviation against the long double sums") {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  for (const std::size_t n : {1, 3, 4, 5, 16, 17, 100, 1000, 4099}) {
    std::vector<float> x(n), y(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = dist(gen), y[i] = dist(gen);
    long double abs_sum = 0, abs_dot = 0;
    for (std::size_t i = 0; i < n; ++i) abs_sum += std::fabs(x[i]), abs_dot += std::fabs(x[i] * y[i]);
    const long double bound = static_cast<long double>(n) * std::numeric_limits<float>::epsilon();
    INFO("n = " << n);
    CHECK(std::fabs(simd::sum(x.data(), n) - reference::sum(x.data(), n)) <= bound * abs_sum);
    CHECK(std::fabs(simd::dot(x.data(), y.data(), n) - reference::dot(x.data(), y.data(), n)) <= bound * abs_dot);
    const float c = 0.25f;
    const long double ssd = reference::sum_squared_deviation(x.data(), n, c);
    CHECK(std::fabs(simd::sum_squared_deviation(x.data(), n, c) - ssd) <= 2 * bound * ssd);
  }
}

// broadcast_map's plain layouts (equal shapes, a trailing block on either side) give the bits of the xtensor
// reference, on one thread and on two.
TEST_CASE("kernels::broadcast_map: every fast layout equals the xtensor broadcast reference") {
  std::mt19937 gen(8);
  auto filled = [&](const shape_t& s) { return xt::xarray<float>(xt::cast<float>(uniform(s, gen, -2.0, 2.0))); };
  struct Case {
    shape_t x, y, out;
  };
  const std::vector<Case> cases{{{64, 48, 40}, {64, 48, 40}, {64, 48, 40}},  // equal shapes
                                {{64, 48, 40}, {40}, {64, 48, 40}},          // a bias on the right
                                {{1, 48, 40}, {64, 48, 40}, {64, 48, 40}},   // a block on the left
                                {{64, 1, 40}, {48, 1}, {64, 48, 40}}};       // general: the reference itself
  const auto f = [](float a, float b) { return a * b - a; };
  for (const int threads : {1, 2}) {
    set_num_threads(threads);
    for (const Case& c : cases) {
      INFO("threads " << threads << ", " << shape_str(c.x) << " with " << shape_str(c.y));
      const xt::xarray<float> x = filled(c.x), y = filled(c.y);
      xt::xarray<float> want = xt::xarray<float>::from_shape(c.out);
      reference::broadcast_map_reference(x, y, want, f);
      CHECK(kernels::broadcast_map(x, y, c.out, f) == want);
    }
  }
  set_num_threads(1);
}

// masked_fill reads a mask that repeats as a trailing block (the causal [T, T] mask against scores [B, H, T, T])
// modulo its size; a mask that is no trailing block ([2, 1, T, T]) is broadcast by xtensor first. Both give the same
// values and gradient.
TEST_CASE("masked_fill: a trailing-block mask equals the broadcast mask") {
  std::mt19937 gen(11);
  const xt::xarray<bool> causal{{false, true, true}, {false, false, true}, {false, false, false}};
  const xt::xarray<bool> per_batch = xt::broadcast(causal, std::vector<std::size_t>{2, 1, 3, 3});
  DTensor a(uniform({2, 4, 3, 3}, gen), true), b(a.value(), true);
  const xt::xarray<double> g = uniform({2, 4, 3, 3}, gen);
  const DTensor block = masked_fill(a, causal, -1e9), whole = masked_fill(b, per_batch, -1e9);
  CHECK(block.value() == whole.value());
  block.backward(g);
  whole.backward(g);
  CHECK(a.grad() == b.grad());
}

// The in-place gradient helpers (take_grad, grad_slot, pass_sum_grad) give what plain accumulation gives: add and
// sub into fresh gradients, into gradients already held, through broadcasting, to an input used twice, and to a
// non-leaf whose gradient is retained (take_grad must copy it then).
TEST_CASE("in-place gradient helpers equal plain accumulation") {
  std::mt19937 gen(9);
  auto filled = [&](const shape_t& s) { return uniform(s, gen); };
  const xt::xarray<double> g = filled({3, 4, 5});
  DTensor a(filled({3, 4, 5}), true), b(filled({5}), true);
  // First a gradient already held by a and b, then a + b, a - b, a + a and (a - b) retained.
  sum(mul(a, DTensor(g))).backward();
  sum(mul(b, DTensor(xt::xarray<double>{1, 2, 3, 4, 5}))).backward();
  DTensor d = sub(a, b);
  d.retain_grad();
  DTensor total = add(add(add(a, b), d), add(a, a));
  total.backward(g);
  // d total / d a = g (a + b) + g (d) + 2 g (a + a), plus the earlier g; d total / d b = sum(g) - sum(g) + earlier.
  const xt::xarray<double> g_b = sum_to_shape(g, {5});
  CHECK(xt::allclose(a.grad(), g + g + g + 2.0 * g, 0.0, 1e-15));
  CHECK(xt::allclose(b.grad(), xt::xarray<double>{1, 2, 3, 4, 5} + g_b - g_b, 0.0, 1e-15));
  CHECK(d.grad() == g);  // retained: take_grad copied, the value is intact

  // grad_slot: a fresh slot is allocated at the input's shape; a held one is handed back with fresh = false.
  Node<double> node;
  node.value = filled({2, 3});
  bool fresh = false;
  xt::xarray<double>& slot = grad_slot(node, fresh);
  CHECK(fresh);
  CHECK(slot.shape() == node.value.shape());
  slot.fill(1.0);
  grad_slot(node, fresh);
  CHECK_FALSE(fresh);
  CHECK(node.grad == xt::ones<double>({2, 3}));
}

// matmul's GEMM layouts (all rows of [..., M, K] @ [K, N] in one GEMM; one GEMM per batch element; a broadcast
// batch; gradients written into the input's gradient with beta = 0 or 1) against the triple loop, values and both
// gradients, in double.
TEST_CASE("matmul: every GEMM layout equals the reference triple loop, values and gradients") {
  std::mt19937 gen(10);
  auto filled = [&](const shape_t& s) { return uniform(s, gen); };
  // C[i] = A[ia(i)] @ B[ib(i)] for matrices stored contiguously.
  auto batched_reference = [](const xt::xarray<double>& A, const xt::xarray<double>& B, std::size_t batch,
                              std::size_t a_count, std::size_t b_count, std::size_t m, std::size_t k, std::size_t n) {
    std::vector<long double> c;
    for (std::size_t i = 0; i < batch; ++i) {
      const auto ci = reference::matmul(A.data() + (i % a_count) * m * k, B.data() + (i % b_count) * k * n, m, k, n);
      c.insert(c.end(), ci.begin(), ci.end());
    }
    return c;
  };
  struct Case {
    shape_t a, b;
    std::size_t batch, a_count, b_count, m, k, n;
  };
  const std::vector<Case> cases{{{2, 3, 4, 5}, {5, 6}, 1, 1, 1, 24, 5, 6},  // rows folded into one GEMM
                                {{3, 4, 5}, {3, 5, 6}, 3, 3, 3, 4, 5, 6},   // one GEMM per batch element
                                {{4, 5}, {3, 5, 6}, 3, 1, 3, 4, 5, 6},      // a broadcast over the batch
                                {{3, 4, 5}, {1, 5, 6}, 3, 3, 1, 4, 5, 6}};
  for (const Case& c : cases) {
    INFO(shape_str(c.a) << " @ " << shape_str(c.b));
    DTensor a(filled(c.a), true), b(filled(c.b), true);
    // An earlier gradient in a (beta = 1 must add to it) and none in b (beta = 0 overwrites uninitialised memory).
    const xt::xarray<double> earlier = filled(c.a);
    a.node()->grad = earlier;
    a.node()->has_grad = true;
    const DTensor out = matmul(a, b);
    const auto want = batched_reference(a.value(), b.value(), c.batch, c.a_count, c.b_count, c.m, c.k, c.n);
    REQUIRE(out.numel() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i)
      CHECK(out.value().data()[i] == doctest::Approx(double(want[i])).epsilon(1e-13));
    const xt::xarray<double> g = filled(out.shape());
    out.backward(g);
    // dA[i] += G[i] @ B[i]^T, dB[i] += A[i]^T @ G[i], summed over the batch elements that share a matrix.
    std::vector<long double> da(earlier.begin(), earlier.end()), db(b.value().size(), 0.0L);
    for (std::size_t i = 0; i < c.batch; ++i) {
      const double* G = g.data() + i * c.m * c.n;
      const double* A = a.value().data() + (i % c.a_count) * c.m * c.k;
      const double* B = b.value().data() + (i % c.b_count) * c.k * c.n;
      for (std::size_t r = 0; r < c.m; ++r)
        for (std::size_t p = 0; p < c.k; ++p)
          for (std::size_t j = 0; j < c.n; ++j) {
            da[(i % c.a_count) * c.m * c.k + r * c.k + p] += static_cast<long double>(G[r * c.n + j]) * B[p * c.n + j];
            db[(i % c.b_count) * c.k * c.n + p * c.n + j] += static_cast<long double>(A[r * c.k + p]) * G[r * c.n + j];
          }
    }
    for (std::size_t i = 0; i < da.size(); ++i)
      CHECK(a.grad().data()[i] == doctest::Approx(double(da[i])).epsilon(1e-13));
    for (std::size_t i = 0; i < db.size(); ++i)
      CHECK(b.grad().data()[i] == doctest::Approx(double(db[i])).epsilon(1e-13));
  }
}
