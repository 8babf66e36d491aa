// The process environment a run depends on: the BLAS kernel family, threads, and library versions.
#pragma once

#include <nlohmann/json.hpp>

namespace xgrad::platform {

/// Debian's OpenBLAS 0.3.21 detects some AVX-512 CPUs as "Prescott" (SSE3 kernels, 3-5x slower sgemm). If the CPU
/// supports better kernels than the library picked and the user has not set OPENBLAS_CORETYPE, this sets it
/// (SkylakeX for AVX-512, Haswell for AVX2+FMA) and re-executes the program once (the variable is read when the
/// library loads). Returns normally when nothing needs to change; does not return after a successful re-exec.
/// XGRAD_NO_BLAS_REEXEC=1 in the environment turns it off.
void select_blas_core(int argc, char** argv);

/// Keeps freed large blocks in the heap instead of returning them to the kernel: every training step allocates
/// and frees the same activation-sized arrays, and glibc's default (mmap above 128 KiB, then munmap on free) makes
/// each step pay page faults for all of them (measured: a third of the step time at d_k = 256). Under an
/// address-space limit, all threads allocate from one arena. Call once at start.
void tune_allocator();

/// Sets (on = true) or clears the x86 MXCSR flush-to-zero and denormals-are-zero bits of the calling thread.
/// A saturated softmax (unscaled attention at large d_k) produces subnormal floats in backward, which make every
/// later multiply on them many times slower; flushing them to zero changes results only below 1.2e-38.
void set_flush_denormals(bool on);

/// Saves the calling thread's floating-point control (flush bits, rounding) and puts it back when destroyed: a
/// library call that sets it (train()) leaves its caller's arithmetic as it found it, also when it throws.
class FloatControlScope {
 public:
  FloatControlScope();
  ~FloatControlScope();
  FloatControlScope(const FloatControlScope&) = delete;
  FloatControlScope& operator=(const FloatControlScope&) = delete;

 private:
  unsigned saved_ = 0;
};

/// Sets the threads of BLAS and of xgrad's own loops (autograd/kernels/parallel.h); throws std::invalid_argument if
/// n < 1, and AddressSpaceError (platform/address_space.h) when the address-space limit cannot hold their BLAS
/// buffers and stacks (threads_address_space) beside what the process has mapped.
void set_threads(int n);

/// The CPUs this process may run on: those of its affinity mask (sched_getaffinity, which taskset, cpusets and
/// cluster schedulers' CPU binding restrict), and no more than a cgroup v2 CPU quota (cpu.max) allows, rounded up.
/// At least 1.
int available_cpus();

/// xgrad, compiler, xtensor, xtensor-blas, OpenBLAS (version string and core), spdlog, nlohmann-json versions;
/// BLAS threads and xgrad's own threads.
nlohmann::json environment_json();

}  // namespace xgrad::platform
