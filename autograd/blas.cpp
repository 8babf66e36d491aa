#include "autograd/blas.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <string>

#include <cblas.h>

#include "autograd/kernels/isa.h"
#include "autograd/kernels/parallel.h"
#include "autograd/kernels/small_gemm.h"

namespace xgrad::blas {

namespace {
// BLAS rejects empty matrices and leading dimensions of 0; handle those here so callers need not.
template <class T>
bool trivial(std::size_t m, std::size_t n, std::size_t k, T beta, T* c, std::size_t ldc) {
  if (m == 0 || n == 0) return true;
  if (k != 0) return false;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
  return true;
}
int ld(std::size_t x) { return static_cast<int>(std::max<std::size_t>(1, x)); }

// The tally: an open-addressing table keyed by the shape packed into 62 bits (20 per dimension, two transpose
// bits; key 0 is an empty slot, never a shape since m, n >= 1), claimed by compare-and-swap, counts added with
// relaxed atomics. A step issues a few dozen shapes; 1024 slots leave the table sparse.
constexpr std::size_t kSlots = 1024;
constexpr std::uint64_t kDimBits = 20, kDimLimit = std::uint64_t(1) << kDimBits;
std::atomic<bool> g_counting{false};
std::array<std::atomic<std::uint64_t>, kSlots> g_keys{};
std::array<std::atomic<std::uint64_t>, kSlots> g_calls{};
std::atomic<std::uint64_t> g_unshaped_calls{0};
std::atomic<double> g_unshaped_flops{0.0};

void count_unshaped(double flops) {
  g_unshaped_calls.fetch_add(1, std::memory_order_relaxed);
  double old = g_unshaped_flops.load(std::memory_order_relaxed);
  while (!g_unshaped_flops.compare_exchange_weak(old, old + flops, std::memory_order_relaxed)) {
  }
}

void count_gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k) {
  if (m >= kDimLimit || n >= kDimLimit || k >= kDimLimit) {
    count_unshaped(2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k));
    return;
  }
  const std::uint64_t key = (std::uint64_t(m) << (2 * kDimBits + 2)) | (std::uint64_t(n) << (kDimBits + 2)) |
                            (std::uint64_t(k) << 2) | (std::uint64_t(trans_a) << 1) | std::uint64_t(trans_b);
  std::size_t slot = static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 54) % kSlots;
  for (std::size_t probe = 0; probe < kSlots; ++probe, slot = (slot + 1) % kSlots) {
    std::uint64_t found = g_keys[slot].load(std::memory_order_relaxed);
    if (found == 0 && g_keys[slot].compare_exchange_strong(found, key, std::memory_order_relaxed)) found = key;
    if (found == key) {
      g_calls[slot].fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  count_unshaped(2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k));  // table full
}
}  // namespace

void set_gemm_counting(bool on) { g_counting.store(on, std::memory_order_relaxed); }
bool gemm_counting() { return g_counting.load(std::memory_order_relaxed); }

void count_product(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k) {
  if (m != 0 && n != 0 && k != 0 && g_counting.load(std::memory_order_relaxed)) count_gemm(trans_a, trans_b, m, n, k);
}

void reset_gemm_counts() {
  for (std::size_t i = 0; i < kSlots; ++i) {
    g_calls[i].store(0, std::memory_order_relaxed);
    g_keys[i].store(0, std::memory_order_relaxed);
  }
  g_unshaped_calls.store(0, std::memory_order_relaxed);
  g_unshaped_flops.store(0.0, std::memory_order_relaxed);
}

std::vector<GemmCount> gemm_counts() {
  std::vector<GemmCount> out;
  const std::uint64_t mask = kDimLimit - 1;
  for (std::size_t i = 0; i < kSlots; ++i) {
    const std::uint64_t key = g_keys[i].load(std::memory_order_relaxed);
    const std::uint64_t calls = g_calls[i].load(std::memory_order_relaxed);
    if (key == 0 || calls == 0) continue;
    out.push_back({(key >> 1 & 1) != 0, (key & 1) != 0, static_cast<std::size_t>(key >> (2 * kDimBits + 2) & mask),
                   static_cast<std::size_t>(key >> (kDimBits + 2) & mask), static_cast<std::size_t>(key >> 2 & mask),
                   calls});
  }
  if (const std::uint64_t calls = g_unshaped_calls.load(std::memory_order_relaxed))
    out.push_back({false, false, 0, 0, 0, calls});
  return out;
}

double flops_of_unshaped_gemms() { return g_unshaped_flops.load(std::memory_order_relaxed); }

double counted_gemm_flops() {
  double total = flops_of_unshaped_gemms();
  for (const GemmCount& g : gemm_counts()) total += g.flops();
  return total;
}

namespace {
std::atomic<bool> g_own_kernel{true};

// Where this CPU has AVX-512 but OpenBLAS runs narrower kernels (OPENBLAS_CORETYPE pins them; OpenBLAS 0.3.21 runs its
// Zen (AVX2) kernels on AMD Zen 4 and 5), xgrad's AVX-512 kernel (simd::small_gemm) is faster at products whose
// op(B) holds at most 2^20 floats (4 MiB; more than a core's L2, but its panels of 64 columns fit): measured in
// cache 1.5-1.9x OpenBLAS Haswell's rate at every shape of the nanoGPT step and 1.1-1.6x up to op(B) of 2^20 floats,
// but half of it at 2^22 (TN 256x1024x4096), where B streams from memory once per block of rows (bench/README.md,
// "xgrad's own kernel for the products"). Where OpenBLAS runs its AVX-512 kernels (SkylakeX and later) they run.
// Decided once per process, so that every product of a run is summed the same way.
bool own_kernel_pays() {
  static const bool pays = simd::active_isa() == simd::Isa::avx512f && !is_avx512_core(core_name());
  return pays;
}

constexpr std::size_t kOwnKernelMaxB = std::size_t(1) << 20;  // floats of op(B): 4 MiB

// Whether the product runs on xgrad's own kernel: decided on the whole product, before gemm<float> splits it, so that
// every part of it (and so the product at any thread count) is summed by the same kernel. alpha 0 stays with BLAS,
// whose reference then reads neither A nor B (OpenBLAS's SkylakeX kernels read them): gemm gives what BLAS gives.
bool own_kernel_for(std::size_t n, std::size_t k, float alpha) {
  return alpha != 0 && k * n <= kOwnKernelMaxB && g_own_kernel.load(std::memory_order_relaxed) && own_kernel_pays();
}

void sgemm(bool own, bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
           const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
  if (own) {
    thread_local std::vector<float> pack;  // op(B)'s copy: kept for the next product, grown as needed
    if (trans_b || n % 16 != 0) pack.resize(std::max(pack.size(), k * simd::small_gemm_pack_width(n)));
    simd::small_gemm(
        {trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, simd::Skip::none, nullptr, pack.data()});
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a, ld(lda), b, ld(ldb), beta, c,
              ld(ldc));
}

// A product of at least this many multiply-adds is split over xgrad's threads (about 3 microseconds of work at this
// machine's 90 GFLOP/s, against a few microseconds to hand work to a thread).
constexpr std::size_t kSplitMinMacs = std::size_t(1) << 18;
// Parts start at multiples of this many rows or columns, a multiple of every OpenBLAS sgemm kernel's unroll.
constexpr std::size_t kSplitAlign = 32;
}  // namespace

template <>
void gemm<float>(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
                 std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
  if (trivial(m, n, k, beta, c, ldc)) return;
  if (g_counting.load(std::memory_order_relaxed)) count_gemm(trans_a, trans_b, m, n, k);
  const bool own = own_kernel_for(n, k, alpha);
  const auto threads = static_cast<std::size_t>(xgrad::num_threads());
  if (threads < 2 || detail::in_parallel() || m * n * k < kSplitMinMacs) {
    sgemm(own, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // One BLAS thread per xgrad thread, each computing whole rows (or columns) of C: every element is summed exactly
  // as one call would sum it.
  const bool rows = m >= n;
  const std::size_t extent = rows ? m : n;
  const std::size_t grain = ((extent + threads - 1) / threads + kSplitAlign - 1) / kSplitAlign * kSplitAlign;
  parallel_for(0, extent, grain, [&](std::size_t lo, std::size_t hi) {
    if (rows)
      sgemm(own, trans_a, trans_b, hi - lo, n, k, alpha, trans_a ? a + lo : a + lo * lda, lda, b, ldb, beta,
            c + lo * ldc, ldc);
    else
      sgemm(own, trans_a, trans_b, m, hi - lo, k, alpha, a, lda, trans_b ? b + lo * ldb : b + lo, ldb, beta, c + lo,
            ldc);
  });
}

template <>
void gemm<double>(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha,
                  const double* a, std::size_t lda, const double* b, std::size_t ldb, double beta, double* c,
                  std::size_t ldc) {
  if (trivial(m, n, k, beta, c, ldc)) return;
  gemm_reference(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

bool set_own_kernel(bool on) { return g_own_kernel.exchange(on, std::memory_order_relaxed); }
bool own_kernel_active() { return g_own_kernel.load(std::memory_order_relaxed) && own_kernel_pays(); }

std::string core_name() {
  const char* name = openblas_get_corename();
  return name ? std::string(name) : std::string("unknown");
}
bool is_avx512_core(const std::string& core) {
  std::string lower = core;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
  for (const char* wide : {"skylakex", "cooperlake", "sapphirerapids"})
    if (lower.find(wide) != std::string::npos) return true;
  return false;
}
int num_threads() { return openblas_get_num_threads(); }
void set_num_threads(int n) { openblas_set_num_threads(n); }

void side_by_side(const std::function<void()>& first, const std::function<void()>& second) {
  if (xgrad::num_threads() < 2 || detail::in_parallel()) {
    first();
    second();
    return;
  }
  const int blas_threads = num_threads();
  if (blas_threads != 1) set_num_threads(1);
  parallel_for(0, 2, 1, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) (i == 0 ? first : second)();
  });
  if (blas_threads != 1) set_num_threads(blas_threads);
}

}  // namespace xgrad::blas
