// The address space this process may map (RLIMIT_AS: `ulimit -v`, as SGE's h_vmem and Slurm's VSizeFactor set it)
// and what BLAS needs of it. OpenBLAS maps a buffer of kBlasBufferBytes for each thread that runs a BLAS call and,
// when that mapping fails, retries it forever (driver/others/memory.c, 0.3.21 to 0.3.29): under a limit, a run would
// spin at 100% CPU and a command would never exit (OpenBLAS joins its threads at exit). Here the limit is checked
// before BLAS threads start, and a buffer that cannot be had ends the process with a message.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace xgrad::platform {

/// OpenBLAS's per-thread buffer on x86-64 and arm64 (BUFFER_SIZE, 32 << 22 bytes), mapped at a thread's first BLAS
/// call and kept until exit.
inline constexpr std::uint64_t kBlasBufferBytes = std::uint64_t(32) << 22;

/// The limit a request for address space ran into, or what it costs. A runtime failure (exit 1), not bad usage.
class AddressSpaceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The soft RLIMIT_AS in bytes; 0 when unlimited.
std::uint64_t address_space_limit();

/// The address space this process has mapped (VmSize), in bytes; 0 when /proc/self/status cannot be read.
std::uint64_t address_space_in_use();

/// The address space `threads` threads of BLAS and of xgrad's loops map when they compute, in bytes: a BLAS buffer
/// per thread that calls BLAS (the calling threads of xgrad's loops, up to `threads`, and OpenBLAS's own threads
/// besides the caller, `threads` - 1), and a stack per thread started (both pools' extra threads).
std::uint64_t threads_address_space(int threads);

/// The bytes of the buffers OpenBLAS has mapped so far (they are part of address_space_in_use()); 0 in a sanitizer
/// build, which does not watch the mappings.
std::uint64_t blas_buffers_mapped();

/// "the address-space limit of 293 MiB (ulimit -v 300000)"; "" when unlimited.
std::string address_space_limit_text();

/// Throws AddressSpaceError unless the limit (if any) leaves `bytes` unmapped: "`what` needs about X MiB of address
/// space beyond the Y MiB in use, above the address-space limit of ... (ulimit -v N); `advice`".
void require_address_space(std::uint64_t bytes, const std::string& what, const std::string& advice);

/// The message for std::bad_alloc: out of memory, naming the address-space limit when one is set.
std::string out_of_memory_text();

/// Called from the executable's .preinit_array (XGRAD_RECORD_STARTUP_SIGNALS), before OpenBLAS's initializer starts
/// its threads: under an address-space limit OpenBLAS starts with one thread (OPENBLAS_NUM_THREADS=1 for its
/// initializer; the user's value comes back with restore_blas_environment) and gets more from set_threads, which
/// checks the limit first. Its threads' stacks and buffers would otherwise be taken before anything is checked, and a
/// thread that cannot be started makes OpenBLAS raise SIGINT.
void fit_blas_to_address_space(int argc, char** argv, char** envp);

/// Puts OPENBLAS_NUM_THREADS back as the process was started with it (after fit_blas_to_address_space), so that an
/// exec or a child process sees the user's environment. Call once at the start of main().
void restore_blas_environment();

}  // namespace xgrad::platform
