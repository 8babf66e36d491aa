#include "platform/address_space.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cblas.h>
#include <fmt/format.h>

namespace xgrad::platform {

namespace {

constexpr char kThreadsVariable[] = "OPENBLAS_NUM_THREADS";
constexpr char kOneThread[] = "OPENBLAS_NUM_THREADS=1";
// Set for the re-executed image when the user's environment had no OPENBLAS_NUM_THREADS: main() removes both.
constexpr char kUnsetMarker[] = "XGRAD_UNSET_OPENBLAS_NUM_THREADS=1";

// What OpenBLAS has mapped of its buffers, counted by this process's mmap (below).
std::atomic<std::uint64_t> g_blas_mapped{0};

// The environment entry fit_blas_to_address_space replaced in place (the user's OPENBLAS_NUM_THREADS=N), if any.
const char* g_replaced_entry = nullptr;

double mib(std::uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// Whether entry (NAME=VALUE) is of variable `name`.
bool is_variable(const char* entry, const char* name) {
  const std::size_t n = std::strlen(name);
  return std::strncmp(entry, name, n) == 0 && entry[n] == '=';
}

// Starts this program again with `envp` and OPENBLAS_NUM_THREADS=1 added. Before any library's initializer: the
// environment cannot be changed in place yet (the C library sets `environ` up after .preinit_array runs). Returns
// only if exec fails.
void reexec_with_one_blas_thread(char** argv, char** envp) {
  std::size_t n = 0;
  while (envp[n]) ++n;
  constexpr std::size_t kMaxEntries = 4096;
  if (n + 3 > kMaxEntries) return;
  static const char* entries[kMaxEntries];  // static: no large stack frame before main
  for (std::size_t i = 0; i < n; ++i) entries[i] = envp[i];
  entries[n] = kOneThread;
  entries[n + 1] = kUnsetMarker;
  entries[n + 2] = nullptr;
  char self[4096];
  const ssize_t length = readlink("/proc/self/exe", self, sizeof self);
  if (length <= 0 || static_cast<std::size_t>(length) >= sizeof self) return;
  self[length] = '\0';
  execve(self, argv, const_cast<char* const*>(entries));
}

std::uint64_t default_stack_bytes() {
  pthread_attr_t attr;
  std::size_t size = 0;
  if (pthread_getattr_default_np(&attr) == 0) {
    pthread_attr_getstacksize(&attr, &size);
    pthread_attr_destroy(&attr);
  }
  return (size ? size : std::size_t(8) << 20) + static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

// Whether `code` lies in the OpenBLAS library (the object that defines openblas_get_config).
[[maybe_unused]] bool in_openblas(const void* code) {
  Dl_info caller{}, blas{};
  return dladdr(code, &caller) != 0 && dladdr(reinterpret_cast<void*>(&openblas_get_config), &blas) != 0 &&
         caller.dli_fbase == blas.dli_fbase;
}

}  // namespace

std::uint64_t blas_buffers_mapped() { return g_blas_mapped.load(); }

std::uint64_t address_space_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 0;
  return limit.rlim_cur;
}

std::uint64_t address_space_in_use() {
  // open/read, not a stream: also called where OpenBLAS's allocation failed (see mmap below).
  const int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[8192];
  const ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  const char* line = std::strstr(text, "\nVmSize:");
  return line ? std::strtoull(line + 8, nullptr, 10) * 1024 : 0;
}

std::uint64_t threads_address_space(int threads) {
  const std::uint64_t n = static_cast<std::uint64_t>(threads < 1 ? 1 : threads);
  return (2 * n - 1) * kBlasBufferBytes + 2 * (n - 1) * default_stack_bytes();
}

std::string address_space_limit_text() {
  const std::uint64_t limit = address_space_limit();
  if (limit == 0) return "";
  return fmt::format("the address-space limit of {:.0f} MiB (ulimit -v {})", mib(limit), limit / 1024);
}

void require_address_space(std::uint64_t bytes, const std::string& what, const std::string& advice) {
  const std::uint64_t limit = address_space_limit(), in_use = address_space_in_use();
  if (limit == 0 || in_use + bytes <= limit) return;
  throw AddressSpaceError(
      fmt::format("{} needs about {:.0f} MiB of address space beyond the {:.0f} MiB in use, "
                  "above {}; {}",
                  what, mib(bytes), mib(in_use), address_space_limit_text(), advice));
}

std::string out_of_memory_text() {
  const std::string limit = address_space_limit_text();
  return "out of memory" + (limit.empty() ? std::string() : " under " + limit);
}

void fit_blas_to_address_space(int, char** argv, char** envp) {
  if (!envp || address_space_limit() == 0) return;
  for (char** entry = envp; *entry; ++entry) {
    if (is_variable(*entry, "XGRAD_UNSET_OPENBLAS_NUM_THREADS")) return;  // already re-executed
    if (is_variable(*entry, kThreadsVariable)) {
      if (std::strcmp(*entry, kOneThread) != 0) {
        // The C library's environment is this array: OpenBLAS's initializer reads the replacement.
        g_replaced_entry = *entry;
        *entry = const_cast<char*>(kOneThread);
      }
      return;
    }
  }
  reexec_with_one_blas_thread(argv, envp);
}

void restore_blas_environment() {
  if (const char* marker = std::getenv("XGRAD_UNSET_OPENBLAS_NUM_THREADS"); marker) {
    unsetenv("XGRAD_UNSET_OPENBLAS_NUM_THREADS");
    unsetenv(kThreadsVariable);
  }
  if (g_replaced_entry) {
    setenv(kThreadsVariable, g_replaced_entry + sizeof kThreadsVariable, 1);
    g_replaced_entry = nullptr;
  }
}

}  // namespace xgrad::platform

// OpenBLAS retries a buffer mapping that fails forever (blas_memory_alloc). The executable's mmap comes before the C
// library's for every library's calls, so a failure of OpenBLAS's ends the process here, with a message, instead.
// Other callers get the C library's behaviour unchanged. Not under a sanitizer, whose runtime intercepts mmap itself
// (and which cannot run under an address-space limit).
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
extern "C" void* mmap(void* address, std::size_t length, int protection, int flags, int fd, off_t offset) noexcept {
  const long result = syscall(SYS_mmap, address, length, protection, flags, fd, offset);
  if (result != -1) {
    if (length >= xgrad::platform::kBlasBufferBytes && (flags & MAP_ANONYMOUS) &&
        xgrad::platform::in_openblas(__builtin_return_address(0)))
      xgrad::platform::g_blas_mapped += length;
    return reinterpret_cast<void*>(result);
  }
  if (errno != ENOMEM || !(flags & MAP_ANONYMOUS) || !xgrad::platform::in_openblas(__builtin_return_address(0)))
    return reinterpret_cast<void*>(result);
  char message[512];
  const std::uint64_t limit = xgrad::platform::address_space_limit(), in_use = xgrad::platform::address_space_in_use();
  const int n =
      limit ? std::snprintf(message, sizeof message,
                            "xgrad: error: OpenBLAS could not map a buffer of %zu MiB under the address-space limit "
                            "of %llu MiB (ulimit -v %llu; %llu MiB in use): raise the limit, or use fewer --threads\n",
                            length >> 20, static_cast<unsigned long long>(limit >> 20),
                            static_cast<unsigned long long>(limit >> 10), static_cast<unsigned long long>(in_use >> 20))
            : std::snprintf(message, sizeof message,
                            "xgrad: error: OpenBLAS could not map a buffer of %zu MiB: out of memory\n", length >> 20);
  if (n > 0) (void)!write(STDERR_FILENO, message, static_cast<std::size_t>(n) < sizeof message ? n : sizeof message);
  _exit(1);
}
#endif
