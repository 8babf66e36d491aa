#include "platform/environment.h"

#include <malloc.h>
#include <sched.h>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif
#include <unistd.h>
#include <stdexcept>

#include <cblas.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <xtensor-blas/xblas_config.hpp>
#include <xtensor/xtensor_config.hpp>

#include "autograd/blas.h"
#include "autograd/kernels/isa.h"
#include "autograd/kernels/parallel.h"
#include "platform/address_space.h"
#include "platform/signals.h"

namespace xgrad::platform {

namespace {
bool is_avx2_core(const std::string& core) { return core == "Haswell" || core == "Zen"; }
}  // namespace

void select_blas_core(int /*argc*/, char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("XGRAD_NO_BLAS_REEXEC")) return;
  const std::string core = blas::core_name();
  __builtin_cpu_init();
  const char* wanted = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq") && !blas::is_avx512_core(core))
    wanted = "SkylakeX";
  else if (!wanted && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && !is_avx2_core(core) &&
           !blas::is_avx512_core(core))
    wanted = "Haswell";
  if (!wanted) return;
  setenv("OPENBLAS_CORETYPE", wanted, 1);
  setenv("XGRAD_NO_BLAS_REEXEC", "1", 1);  // never loop
  // The executable's own path, not /proc/self/exe: the process would be named "exe" in ps, top and pgrep.
  restore_startup_ignored_signals();  // exec would turn a library's handler into the default action
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self);
  if (n > 0 && static_cast<std::size_t>(n) < sizeof self) {  // n == sizeof self: the path may be cut short
    self[n] = '\0';
    execv(self, argv);
  }
  execv("/proc/self/exe", argv);
  // exec failed: carry on with the slower kernels rather than fail the run.
  spdlog::warn("OpenBLAS picked core {}; re-executing with OPENBLAS_CORETYPE={} failed, continuing", core, wanted);
}

void tune_allocator() {
  mallopt(M_MMAP_THRESHOLD, 256 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 512 * 1024 * 1024);
  // Every thread that allocates would reserve an arena of its own (64 MiB of address space each): under a limit the
  // threads share one, so that the space is left for the run and its BLAS buffers.
  if (address_space_limit() != 0) mallopt(M_ARENA_MAX, 1);
}

void set_flush_denormals(bool on) {
#if defined(__SSE__)
  constexpr unsigned kFlushToZero = 0x8000, kDenormalsAreZero = 0x0040;
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(on ? (csr | kFlushToZero | kDenormalsAreZero) : (csr & ~(kFlushToZero | kDenormalsAreZero)));
#else
  (void)on;
#endif
}

#if defined(__SSE__)
FloatControlScope::FloatControlScope() : saved_(_mm_getcsr()) {}
FloatControlScope::~FloatControlScope() { _mm_setcsr(saved_); }
#else
FloatControlScope::FloatControlScope() = default;
FloatControlScope::~FloatControlScope() = default;
#endif

void set_threads(int n) {
  if (n < 1) throw std::invalid_argument("--threads must be >= 1");
  // Under an address-space limit, the threads and their BLAS buffers are checked against it before they exist: a
  // buffer OpenBLAS cannot map ends the process (address_space.cpp), a thread it cannot start leaves it waiting.
  static int granted = 0;  // the count already checked: its buffers may be mapped, counted in the use
  if (n > granted) {
    require_address_space(threads_address_space(n) - (granted ? threads_address_space(granted) : 0),
                          fmt::format("--threads {} (a {} MiB BLAS buffer for each thread that calls BLAS, and "
                                      "thread stacks)",
                                      n, kBlasBufferBytes >> 20),
                          n > 1 ? "raise the limit or use fewer --threads" : "raise the limit");
    granted = n;
  }
  // One pool of threads: xgrad's splits the large products (blas::gemm) and runs BLAS on one thread in each part. Two
  // pools on the same cores, each yielding while it waits for work, took a quarter of a 2-thread step.
  blas::set_num_threads(1);
  xgrad::set_num_threads(n);
}

int available_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpus =
      sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  // cgroup v2: "/<path>" of this process, whose cpu.max holds "<quota> <period>" or "max <period>".
  std::ifstream cgroup("/proc/self/cgroup");
  std::string line;
  while (std::getline(cgroup, line))
    if (line.rfind("0::", 0) == 0) {
      std::ifstream max("/sys/fs/cgroup" + line.substr(3) + "/cpu.max");
      std::string quota;
      double period = 0;
      if (max >> quota >> period && !quota.empty() && quota.find_first_not_of("0123456789") == std::string::npos &&
          period > 0)
        cpus = std::min(cpus, static_cast<int>(std::ceil(std::stod(quota) / period)));
    }
  return std::max(cpus, 1);
}

nlohmann::json environment_json() {
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  return {
      {"xgrad", XGRAD_VERSION},
      {"compiler", __VERSION__},
      {"xtensor", std::to_string(XTENSOR_VERSION_MAJOR) + "." + std::to_string(XTENSOR_VERSION_MINOR) + "." +
                      std::to_string(XTENSOR_VERSION_PATCH)},
      {"xtensor_blas", std::to_string(XTENSOR_BLAS_VERSION_MAJOR) + "." + std::to_string(XTENSOR_BLAS_VERSION_MINOR) +
                           "." + std::to_string(XTENSOR_BLAS_VERSION_PATCH)},
      {"openblas", openblas_get_config()},
      {"openblas_core", blas::core_name()},
      {"openblas_coretype_env", coretype ? coretype : ""},
      {"simd", simd::isa_name(simd::active_isa())},
      {"blas_threads", blas::num_threads()},
      {"xgrad_threads", xgrad::num_threads()},
      {"spdlog", std::to_string(SPDLOG_VER_MAJOR) + "." + std::to_string(SPDLOG_VER_MINOR) + "." +
                     std::to_string(SPDLOG_VER_PATCH)},
      {"nlohmann_json", std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." +
                            std::to_string(NLOHMANN_JSON_VERSION_MINOR) + "." +
                            std::to_string(NLOHMANN_JSON_VERSION_PATCH)},
  };
}

}  // namespace xgrad::platform
