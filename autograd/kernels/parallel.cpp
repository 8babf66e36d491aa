// A small persistent thread pool behind parallel_for. Not OpenMP: libgomp's idle workers busy-wait (GOMP_SPINCOUNT,
// 300000 PAUSE instructions, about 15 ms on SkylakeX) after every parallel region, and the setting is read only
// when the library loads. Measured with --threads 2 at the bench's M size: the spinning worker starved OpenBLAS's
// own worker thread and the step took 65 ms instead of 24. These workers yield while they wait briefly and then
// sleep, as OpenBLAS's do. A part no worker has claimed when the caller finishes its own, the caller runs itself: a
// worker the system has not scheduled (other processes on the cores) never holds a loop up. Without that, a 2-thread
// training step with builds running beside it took 131-152 ms where one thread took 40-44.
#include "autograd/kernels/parallel.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "autograd/tensor.h"

namespace xgrad {

namespace {

std::atomic<int> g_threads{1};
thread_local bool t_in_parallel = false;

unsigned fp_control() {
#if defined(__SSE__)
  return _mm_getcsr();
#else
  return 0;
#endif
}
void set_fp_control(unsigned csr) {
#if defined(__SSE__)
  // MXCSR (flush-to-zero, denormals-are-zero, rounding) is per thread: training sets it on the main thread only.
  if (_mm_getcsr() != csr) _mm_setcsr(csr);
#else
  (void)csr;
#endif
}

// How many times a waiting thread yields before it blocks (each yield is about a microsecond when nothing else
// wants the core): long enough to catch the next loop of a training step, short enough not to keep a core.
constexpr int kSpins = 2000;

class Pool {
 public:
  // Runs part t of `used` parts of the job on thread t (0 = the caller).
  void run(std::size_t begin, std::size_t end, std::size_t grain, std::size_t chunks, int used, detail::range_fn fn,
           void* context) {
    while (static_cast<int>(workers_.size()) < used - 1) {
      const std::size_t id = workers_.size() + 1;
      workers_.emplace_back([this, id] { work(id); });
    }
    {
      std::lock_guard<std::mutex> guard(mutex_);
      job_ = {begin, end, grain, chunks, static_cast<std::size_t>(used), fn, context, fp_control()};
      claimed_.assign(static_cast<std::size_t>(used), false);
      claimed_[0] = true;
      unclaimed_.store(used - 1, std::memory_order_relaxed);
      pending_.store(used - 1, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    part(job_, 0);
    run_unclaimed();
    for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
      if (spin < kSpins) {
        std::this_thread::yield();
        continue;
      }
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    }
  }

 private:
  struct Job {
    std::size_t begin, end, grain, chunks, parts;
    detail::range_fn fn;
    void* context;
    unsigned csr;
  };

  // Claims part t of the posted job for the calling thread (under mutex_): false when another thread has it.
  bool claim(std::size_t t) {
    if (t >= claimed_.size() || claimed_[t]) return false;
    claimed_[t] = true;
    unclaimed_.fetch_sub(1, std::memory_order_relaxed);
    return true;
  }

  // The caller's share of the parts no worker has started: each runs exactly once, on whichever thread claims it.
  void run_unclaimed() {
    for (std::size_t t = 1; t < job_.parts && unclaimed_.load(std::memory_order_relaxed) != 0; ++t) {
      bool mine = false;
      {
        std::lock_guard<std::mutex> guard(mutex_);
        mine = claim(t);
      }
      if (!mine) continue;
      part(job_, t);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  static void part(const Job& job, std::size_t t) {
    const std::size_t c0 = job.chunks * t / job.parts, c1 = job.chunks * (t + 1) / job.parts;
    const std::size_t lo = job.begin + c0 * job.grain, hi = std::min(job.end, job.begin + c1 * job.grain);
    t_in_parallel = true;
    if (lo < hi) job.fn(job.context, lo, hi);
    t_in_parallel = false;
  }

  void work(std::size_t id) {
    std::uint64_t seen = 0;
    for (;;) {
      for (int spin = 0; generation_.load(std::memory_order_acquire) == seen && spin < kSpins; ++spin)
        std::this_thread::yield();
      Job job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        seen = generation_.load(std::memory_order_acquire);
        job = job_;
        // Claimed with the job's copy, under the lock the caller posts the next job with: never a part of a newer job.
        if (!claim(id)) continue;  // the job uses fewer threads, or the caller ran this part
      }
      set_fp_control(job.csr);
      part(job, id);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> guard(mutex_);  // the caller may be about to block on done_
        done_.notify_one();
      }
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  Job job_{};
  std::vector<bool> claimed_;      // per part of the posted job: a thread has started it (under mutex_)
  std::atomic<int> unclaimed_{0};  // parts nobody has claimed yet
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> pending_{0};
};

// One pool, used by one caller at a time; another thread that calls parallel_for meanwhile runs its loop serially.
// Never destroyed: its workers sleep on a condition variable when the process exits.
Pool& pool() {
  static Pool* p = new Pool;
  return *p;
}
std::mutex g_pool_user;

}  // namespace

void set_num_threads(int n) {
  if (n < 1) throw Error("set_num_threads: needs n >= 1, got " + std::to_string(n));
  g_threads.store(n, std::memory_order_relaxed);
}

int num_threads() { return g_threads.load(std::memory_order_relaxed); }

namespace detail {

bool in_parallel() { return t_in_parallel; }

void run_parallel(std::size_t begin, std::size_t end, std::size_t grain, std::size_t chunks, int threads, range_fn fn,
                  void* context) {
  std::unique_lock<std::mutex> user(g_pool_user, std::try_to_lock);
  if (!user.owns_lock()) {
    fn(context, begin, end);
    return;
  }
  pool().run(begin, end, grain, chunks, threads, fn, context);
}

}  // namespace detail

}  // namespace xgrad
