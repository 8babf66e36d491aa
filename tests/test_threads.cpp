// xgrad's own loops on several threads (autograd/kernels/parallel.h): the same bits as on one thread. Sizes are
// chosen so that every loop under test is above its grain and really splits (the first case checks that splitting
// happens). A matrix product split over threads (blas::gemm) is the exception: OpenBLAS sums a part of C in another
// order than the whole, so those results match one thread to rounding, and a second run on as many threads bit for
// bit.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <sys/syscall.h>
#include <unistd.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "autograd/blas.h"
#include "autograd/kernels/parallel.h"
#include "autograd/ops.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "tests/support/model_config.h"

using namespace xgrad;

namespace {

// Sets xgrad's thread count for one scope and restores 1 (the default) after it.
struct Threads {
  explicit Threads(int n) { set_num_threads(n); }
  ~Threads() { set_num_threads(1); }
};

// Holds each thread that arrives until `n` have (or 10 s have passed, far beyond a thread's start on a loaded
// machine): a part that waits here keeps the caller from running the other parts itself, so they run on workers.
struct Rendezvous {
  explicit Rendezvous(int n) : n(n) {}
  void arrive() {
    arrived.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (arrived.load() < n && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  }
  const int n;
  std::atomic<int> arrived{0};
};

// Every other thread of the process (the pool's workers, any BLAS thread) held in a signal handler until release():
// threads that exist but are not running, as on a machine whose cores other processes hold.
class HeldThreads {
 public:
  HeldThreads() {
    struct sigaction action {};
    action.sa_handler = [](int) {
      held().fetch_add(1);
      while (!released().load()) std::this_thread::yield();
      held().fetch_sub(1);
    };
    sigemptyset(&action.sa_mask);
    REQUIRE(sigaction(SIGRTMIN + 3, &action, &previous_) == 0);
    released() = false;
    const long self = syscall(SYS_gettid);
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
      const long tid = std::stol(task.path().filename().string());
      if (tid != self && syscall(SYS_tgkill, getpid(), tid, SIGRTMIN + 3) == 0) ++count_;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (held().load() < count_ && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  }
  ~HeldThreads() {
    release();
    while (held().load() > 0) std::this_thread::yield();
    sigaction(SIGRTMIN + 3, &previous_, nullptr);
  }
  void release() { released() = true; }
  int count() const { return count_; }
  int held_now() const { return held().load(); }

 private:
  static std::atomic<int>& held() {
    static std::atomic<int> n{0};
    return n;
  }
  static std::atomic<bool>& released() {
    static std::atomic<bool> r{false};
    return r;
  }
  struct sigaction previous_ {};
  int count_ = 0;
};

template <class T>
bool same_bits(const xt::xarray<T>& a, const xt::xarray<T>& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <class T>
xt::xarray<T> filled(std::vector<std::size_t> shape, std::uint64_t seed, double scale = 1.0) {
  Generator gen(seed);
  xt::xarray<T> x = xt::xarray<T>::from_shape(shape);
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<T>(scale * gen.normal());
  return x;
}

index_array token_batch(std::size_t B, std::size_t T, std::size_t V, std::uint64_t seed) {
  Generator gen(seed);
  index_array t = index_array::from_shape({B, T});
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<std::int64_t>(gen.uniform01() * V) % V;
  return t;
}

// Everything a few AdamW training steps produce: per step the loss, every gradient, the first layer's attention
// probabilities and dLoss/dscores; at the end every weight and the AdamW moments.
struct TrainTrace {
  std::vector<float> losses;
  std::vector<xt::xarray<float>> arrays;
  std::size_t first_step_arrays = 0;  // arrays[0, first_step_arrays): the first step's, before any update
};

TrainTrace train_steps(int threads) {
  Threads scope(threads);
  nn::ModelConfig c = xgrad::testing::model_config(/*vocab_size=*/50, /*max_seq_len=*/32, /*d_model=*/64,
                                                   /*n_heads=*/4, /*n_layers=*/2);
  c.d_ff = 256;
  c.scale = "sqrt_dk";
  nn::AttentionModel model(c, 7);
  auto attn = model.attention_layers().front();
  attn->record_attention = true;
  std::vector<Tensor> params;
  for (auto& [name, p] : model.named_parameters()) params.push_back(p);
  nn::AdamW opt(params, 1e-2, 0.9, 0.999, 1e-8, 0.01);
  TrainTrace trace;
  for (std::uint64_t step = 0; step < 3; ++step) {
    const index_array tokens = token_batch(16, 32, c.vocab_size, 100 + step);
    const index_array targets = token_batch(16, 32, c.vocab_size, 200 + step);
    opt.zero_grad();
    Tensor loss = cross_entropy(model.forward(tokens), targets);
    loss.backward();
    nn::clip_grad_norm(params, 0.5);
    trace.losses.push_back(loss.value()());
    for (auto& p : params) trace.arrays.push_back(p.grad());
    trace.arrays.push_back(attn->last.probs);
    trace.arrays.push_back(attn->last.scores.grad());
    if (step == 0) trace.first_step_arrays = trace.arrays.size();
    opt.step();
  }
  for (auto& p : params) trace.arrays.push_back(p.value());
  for (auto& [kind, buffers] : opt.state().buffers)
    for (auto& b : buffers) trace.arrays.push_back(b);
  return trace;
}

// Values and input gradients of a chain of ops in double, each big enough to split: broadcasting add and mul (a
// trailing block either way round), mul_scalar, silu (the generic unary path), gelu, softmax over the last and a
// middle axis, log_softmax, layer_norm with and without weight, cross_entropy with ignore_index and smoothing, and
// per position.
std::vector<xt::xarray<double>> op_chain(int threads) {
  Threads scope(threads);
  using Td = basic_tensor<double>;
  Td x(filled<double>({8, 64, 96}, 1), true);
  Td bias(filled<double>({96}, 2), true);
  Td row(filled<double>({64, 96}, 3), true);
  Td w(filled<double>({96}, 4, 0.1), true);
  Td h = mul(add(x, bias), row);                // [8, 64, 96] + [96], then * [64, 96]
  h = add(bias, mul(row, mul_scalar(h, 0.5)));  // the block on the left
  h = silu(h);
  h = gelu(h);
  Td s = add(softmax(h, -1), softmax(h, 1));  // last axis; a middle axis (inner > 1)
  Td l = log_softmax(layer_norm(s, w, Td(), 1e-5), -1);
  Td n = layer_norm(add(l, h), w, bias, 1e-5);
  index_array targets = token_batch(8, 64, 96, 5);
  for (std::size_t i = 0; i < targets.size(); i += 7) targets.data()[i] = -100;
  Td per_position = cross_entropy(n, targets, -100, 0.0, Reduction::none);
  Td loss = add(add(cross_entropy(n, targets, -100, 0.1), mean(mul(n, n))), mean(per_position));
  loss.backward();
  return {s.value(),   l.value(),  n.value(), per_position.value(), loss.value(), x.grad(),
          bias.grad(), row.grad(), w.grad()};
}

}  // namespace

TEST_CASE("parallel_for: splits at multiples of the grain, covers the range once, on two threads") {
  Threads scope(2);
  std::mutex lock;
  std::set<std::thread::id> ids;
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  std::vector<int> hits(1000, 0);
  Rendezvous both(2);
  parallel_for(3, 1000, 64, [&](std::size_t lo, std::size_t hi) {
    both.arrive();
    std::lock_guard<std::mutex> guard(lock);
    ids.insert(std::this_thread::get_id());
    ranges.emplace_back(lo, hi);
    for (std::size_t i = lo; i < hi; ++i) ++hits[i];
  });
  CHECK(ids.size() == 2);
  CHECK(ranges.size() == 2);
  for (auto [lo, hi] : ranges) {
    CHECK((lo - 3) % 64 == 0);
    CHECK((hi == 1000 || (hi - 3) % 64 == 0));
  }
  for (std::size_t i = 0; i < hits.size(); ++i) CHECK_MESSAGE(hits[i] == (i >= 3 ? 1 : 0), "index " << i);
  // Less than two grains: one call on the calling thread.
  ranges.clear();
  parallel_for(0, 100, 64, [&](std::size_t lo, std::size_t hi) { ranges.emplace_back(lo, hi); });
  REQUIRE(ranges.size() == 1);
  CHECK(ranges[0] == std::make_pair(std::size_t(0), std::size_t(100)));
}

TEST_CASE("parallel_for finishes while its worker cannot run: the caller runs the part no worker claimed") {
  Threads scope(2);
  std::vector<int> warm(256, 0);
  Rendezvous both(2);  // the pool's worker exists and has run a part
  parallel_for(0, warm.size(), 64, [&](std::size_t lo, std::size_t hi) {
    both.arrive();
    for (std::size_t i = lo; i < hi; ++i) warm[i] = 1;
  });
  // The worker leaves the pool's lock within microseconds of its part; held inside it, it would block the caller.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  HeldThreads held;
  REQUIRE(held.count() >= 1);
  REQUIRE(held.held_now() == held.count());
  std::vector<int> hits(1000, 0);
  std::set<std::thread::id> ids;
  std::atomic<bool> done{false};
  std::thread caller([&] {  // a thread of its own, so that a pool that waits for its worker cannot hang the test
    parallel_for(0, hits.size(), 64, [&](std::size_t lo, std::size_t hi) {
      ids.insert(std::this_thread::get_id());  // one thread at a time: the worker is held
      for (std::size_t i = lo; i < hi; ++i) ++hits[i];
    });
    done = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  const bool finished_while_held = done.load();
  held.release();
  caller.join();
  CHECK_MESSAGE(finished_while_held, "parallel_for waited for a worker that could not run");
  CHECK(ids.size() == 1);
  for (std::size_t i = 0; i < hits.size(); ++i) CHECK_MESSAGE(hits[i] == 1, "index " << i);
}

TEST_CASE("set_num_threads refuses n < 1") {
  CHECK_THROWS_AS(set_num_threads(0), Error);
  CHECK(num_threads() == 1);
}

#if defined(__SSE__)
TEST_CASE("worker threads get the caller's flush-to-zero / denormals-are-zero") {
  Threads scope(2);
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8000 | 0x0040);
  volatile float tiny = 1e-30f, factor = 1e-10f;  // product 1e-40: subnormal, flushed to 0
  std::vector<float> out(4096, -1.0f);
  Rendezvous both(2);  // so that a worker, not the caller, computes the second half
  parallel_for(0, out.size(), 64, [&](std::size_t lo, std::size_t hi) {
    both.arrive();
    for (std::size_t i = lo; i < hi; ++i) out[i] = tiny * factor;
  });
  _mm_setcsr(csr);
  for (float v : out) CHECK(v == 0.0f);
}
#endif

TEST_CASE("ops in double: values and gradients bit-identical on 1 and 2 threads") {
  const auto one = op_chain(1);
  const auto two = op_chain(2);
  REQUIRE(one.size() == two.size());
  for (std::size_t i = 0; i < one.size(); ++i) CHECK_MESSAGE(same_bits(one[i], two[i]), "array " << i);
}

TEST_CASE(
    "training steps (attention forward/backward, LayerNorm, GELU, cross_entropy, clipping, AdamW) on 2 threads: "
    "the same bits twice, and one thread's first step to rounding") {
  const TrainTrace one = train_steps(1);
  const TrainTrace two = train_steps(2);
  const TrainTrace again = train_steps(2);
  REQUIRE(two.losses.size() == 3);
  CHECK(std::memcmp(two.losses.data(), again.losses.data(), 3 * sizeof(float)) == 0);
  REQUIRE(two.arrays.size() == again.arrays.size());
  for (std::size_t i = 0; i < two.arrays.size(); ++i)
    CHECK_MESSAGE(same_bits(two.arrays[i], again.arrays[i]), "array " << i);
  // Before the first update the threads differ only in the order of a product's terms: about k 2^-24 (k <= 256
  // terms here) of a value's scale per product, compounded over two layers forward and back; 1e-4 of each array's
  // largest magnitude holds that with room, while a part of a product lost or added twice is off by order 1. Later
  // steps are not compared: AdamW's first update is lr * sign(gradient), which rounding can flip for a gradient
  // near 0.
  CHECK(std::abs(one.losses[0] - two.losses[0]) <= 1e-4f * std::abs(one.losses[0]));
  REQUIRE(one.first_step_arrays == two.first_step_arrays);
  for (std::size_t i = 0; i < one.first_step_arrays; ++i) {
    const float scale = xt::amax(xt::abs(one.arrays[i]))();
    CHECK_MESSAGE(xt::amax(xt::abs(one.arrays[i] - two.arrays[i]))() <= 1e-4f * scale, "array " << i);
  }
  CHECK(two.losses[2] < two.losses[0]);  // the steps did train
}

TEST_CASE("SGD with momentum: the same bits on 1 and 3 threads") {
  auto run = [](int threads) {
    Threads scope(threads);
    Tensor w(filled<float>({300, 200}, 11), true);
    nn::SGD opt({w}, 0.05, 0.9, 1e-3);
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad();
      Tensor loss = mean(mul(gelu(w), w));
      loss.backward();
      opt.step();
    }
    return w.value();
  };
  CHECK(same_bits(run(1), run(3)));
}

TEST_CASE("blas::side_by_side: two threads, BLAS on one thread meanwhile, its thread count restored after") {
  Threads scope(2);
  const int blas_before = blas::num_threads();
  blas::set_num_threads(2);
  std::mutex lock;
  std::set<std::thread::id> ids;
  std::vector<int> blas_inside;
  Rendezvous both(2);
  const auto note = [&] {
    both.arrive();
    std::lock_guard<std::mutex> guard(lock);
    ids.insert(std::this_thread::get_id());
    blas_inside.push_back(blas::num_threads());
  };
  blas::side_by_side(note, note);
  CHECK(ids.size() == 2);
  CHECK(blas_inside == std::vector<int>{1, 1});
  CHECK(blas::num_threads() == 2);
  blas::set_num_threads(blas_before);
}

TEST_CASE(
    "matmul's gradients on 2 and 3 threads (row blocks, side by side): one thread's to rounding, the same bits twice") {
  // a [100, 96] @ b [96, 80] is above both thresholds (2^17 multiply-adds): each thread takes a block of a's rows
  // (3 threads: blocks of 64, 32 and 4 rows) and a share of b's gradient, summed after; a is read by two products, so
  // its gradient adds into itself. a @ a (both gradients one array) and a broadcast batch (both products add into
  // shared matrices) take the serial path; batched @ b, whose b is one matrix, takes row blocks of all 300 rows.
  auto run = [](int threads) {
    Threads scope(threads);
    Tensor a(filled<float>({100, 96}, 21), true), b(filled<float>({96, 80}, 22), true);
    Tensor c(filled<float>({96, 80}, 25), true);
    Tensor s(filled<float>({96, 96}, 23), true);
    Tensor batched(filled<float>({3, 100, 96}, 24), true);
    Tensor loss = add(add(mean(mul(matmul(a, b), matmul(a, c))), mean(matmul(s, s))),
                      add(mean(matmul(batched, s)), mean(matmul(batched, b))));
    loss.backward();
    return std::vector<xt::xarray<float>>{a.grad(), b.grad(), c.grad(), s.grad(), batched.grad()};
  };
  const auto one = run(1);
  for (int threads : {2, 3}) {
    const auto many = run(threads), again = run(threads);
    for (std::size_t i = 0; i < one.size(); ++i) {
      CHECK_MESSAGE(same_bits(many[i], again[i]), "threads " << threads << ", gradient " << i);
      // Products of at most 300 terms, two deep (forward, then backward): rounding moves each by about 300 2^-24 of
      // its scale; 1e-4 of the largest gradient holds that with room, and a block lost or added twice is off by
      // order 1.
      const float scale = xt::amax(xt::abs(one[i]))();
      CHECK_MESSAGE(xt::amax(xt::abs(one[i] - many[i]))() <= 1e-4f * scale,
                    "threads " << threads << ", gradient " << i);
    }
  }
}

TEST_CASE(
    "blas::gemm split over 2 threads (rows or columns of C): one call's result to rounding, the same bits twice") {
  // Shapes of the training steps above and of nanoGPT's: rows split (m >= n), columns split (n > m), every
  // transpose; k up to 768 spans OpenBLAS's blocks over k.
  const std::vector<std::array<std::size_t, 3>> shapes{{512, 64, 64},  {64, 64, 512},   {512, 256, 64},
                                                       {64, 256, 512}, {768, 128, 128}, {128, 512, 768}};
  for (const auto& shape : shapes)
    for (int t = 0; t < 4; ++t) {
      const std::size_t m = shape[0], n = shape[1], k = shape[2];
      const bool ta = (t & 1) != 0, tb = (t & 2) != 0;
      const xt::xarray<float> a = filled<float>({m * k}, 31), b = filled<float>({k * n}, 32);
      const xt::xarray<float> c0 = filled<float>({m * n}, 33);
      auto product = [&](int threads, const xt::xarray<float>& x, const xt::xarray<float>& y, float beta) {
        Threads scope(threads);
        xt::xarray<float> c = c0;
        blas::gemm<float>(ta, tb, m, n, k, 1.0f, x.data(), ta ? m : k, y.data(), tb ? k : n, beta, c.data(), n);
        return c;
      };
      const auto one = product(1, a, b, 0.5f), two = product(2, a, b, 0.5f);
      // Two float sums of the same k + 1 terms in different orders differ by at most 2 gamma_{k+1} times the sum of
      // their magnitudes, gamma_j = j 2^-24 / (1 - j 2^-24) (Higham, Accuracy and Stability of Numerical
      // Algorithms, 2nd ed., eq. 3.5); the magnitudes' sum is |A| |B| + 0.5 |C0|.
      const xt::xarray<float> magnitude = product(1, xt::abs(a), xt::abs(b), 0.0f) + 0.5f * xt::abs(c0);
      const double u = std::ldexp(1.0, -24), gamma = (k + 1) * u / (1 - (k + 1) * u);
      INFO(m << "x" << n << "x" << k << " ta " << ta << " tb " << tb);
      CHECK(xt::all(xt::abs(one - two) <= 2 * gamma * magnitude + 1e-30));
      CHECK(same_bits(two, product(2, a, b, 0.5f)));
    }
}
