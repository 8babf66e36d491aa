// xgrad under an address-space limit (`ulimit -v`, RLIMIT_AS, as SGE's h_vmem and Slurm set): every command ends,
// either with its result or with exit 1 and a message naming the limit, and a stop signal ends a run.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "autograd/blas.h"
#include "platform/address_space.h"
#include "platform/signals.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

using namespace xgrad::testing;
namespace fs = std::filesystem;

namespace {

// Longer than any of these commands takes on a busy machine; a process still running then is hung.
constexpr std::chrono::seconds kHang{60};

// The limits tried, in KiB: below what the libraries need, and across the range where a BLAS buffer (128 MiB per
// thread) does or does not fit.
const std::vector<long long> kLimitsKiB = {60000, 150000, 300000, 420000};

ProcessOptions limited(long long kib, int blas_threads) {
  ProcessOptions options;
  options.address_space_kib = kib;
  options.environment = {{"OPENBLAS_NUM_THREADS", std::to_string(blas_threads)},
                         {"XGRAD_ALLOW_THREADS_ABOVE_CPUS", "1"}};
  return options;
}

// `xgrad train` with these settings (words) into `out` (a path, one argument).
std::vector<std::string> train_command(const std::string& settings, const fs::path& out) {
  std::vector<std::string> args = words("train " + settings + " --print-every 1000 --out");
  args.push_back(out.string());
  return xgrad_command(args);
}

std::vector<std::string> tiny_train(const fs::path& out, int threads, std::size_t steps = 20) {
  return train_command("--d-model 16 --steps " + std::to_string(steps) + " --threads " + std::to_string(threads), out);
}

// Waits for `p`; a process still running after kHang fails the test (the destructor kills it).
std::optional<ProcessResult> ended(Process& p) {
  std::optional<ProcessResult> r = p.wait_for(kHang);
  CHECK_MESSAGE(r.has_value(), "still running after " << kHang.count() << " s");
  return r;
}

// Success, or exit 1 naming the limit; or, for a limit below what the executable and its libraries map (60 MB on
// Debian 13, whose Open MPI loads libfabric), the dynamic loader's own refusal before xgrad runs (exit 127).
void check_result_or_limit(const ProcessResult& r) {
  INFO("exit " << r.exit_code << ", signal " << r.signal << ", stderr: " << r.err);
  CHECK(r.signal == 0);
  const bool loader_refused =
      r.exit_code == 127 && r.err.find("error while loading shared libraries") != std::string::npos;
  CHECK((r.exit_code == 0 || r.exit_code == 1 || loader_refused));
  if (r.exit_code == 1) CHECK(r.err.find("ulimit -v") != std::string::npos);
}

std::atomic<int> g_stop{0};

// A stop handler as xgrad train's: the request noted, the watchdog armed (for one second here).
extern "C" void on_stop_with_watchdog(int signal) {
  g_stop = signal;
  xgrad::platform::arm_stop_watchdog(signal, 1);
}

// Waits for child `pid` for up to kHang, then kills it: its wait status and the seconds since `start` (-1 when it
// had to be killed).
std::pair<int, double> wait_child(pid_t pid, std::chrono::steady_clock::time_point start) {
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() - start > kHang) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return {status, -1};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return {status, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

// Forks a child that installs on_stop_with_watchdog for SIGTERM, then runs `body` and exits with what it returns;
// sends SIGTERM once the handler is in place. Returns the child's wait status and the seconds until it ended
// (-1, after SIGKILL, when it ran for more than kHang).
std::pair<int, double> stop_child(int (*body)()) {
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    struct sigaction action {};
    action.sa_handler = on_stop_with_watchdog;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    sigaction(SIGTERM, &action, nullptr);
    (void)!write(ready[1], "r", 1);
    _exit(body());
  }
  close(ready[1]);
  char byte = 0;
  REQUIRE(read(ready[0], &byte, 1) == 1);
  close(ready[0]);
  const auto start = std::chrono::steady_clock::now();
  kill(child, SIGTERM);
  return wait_child(child, start);
}

// Address-space limits cannot be combined with a sanitizer's shadow memory.
bool sanitized() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#endif
#endif
  return false;
}

}  // namespace

TEST_CASE("train under an address-space limit runs or exits 1 naming the limit, with one and two BLAS threads") {
  if (sanitized()) return;
  const TempDir root("memlimit_train");
  for (int threads : {1, 2})
    for (long long kib : kLimitsKiB) {
      CAPTURE(threads);
      CAPTURE(kib);
      const fs::path out = root / ("run_" + std::to_string(threads) + "_" + std::to_string(kib));
      Process p(tiny_train(out, threads), limited(kib, threads));
      if (const auto r = ended(p)) {
        check_result_or_limit(*r);
        if (r->exit_code == 0) CHECK(fs::exists(out / "summary.json"));
      }
    }
}

TEST_CASE("without OPENBLAS_NUM_THREADS (OpenBLAS would start a thread per CPU), train and compare end under a limit") {
  if (sanitized()) return;
  const TempDir root("memlimit_default_threads");
  const auto unset = [](const std::vector<std::string>& command) {
    std::vector<std::string> argv = {"env", "-u", "OPENBLAS_NUM_THREADS"};
    argv.insert(argv.end(), command.begin(), command.end());
    return argv;
  };
  REQUIRE(run_process(tiny_train(root / "runs" / "a", 1)).exit_code == 0);
  for (long long kib : kLimitsKiB) {
    CAPTURE(kib);
    ProcessOptions options;
    options.address_space_kib = kib;
    Process train(unset(tiny_train(root / ("run_" + std::to_string(kib)), 1)), options);
    if (const auto r = ended(train)) check_result_or_limit(*r);
    const fs::path out = root / ("report_" + std::to_string(kib));
    Process compare(unset(xgrad_command({"compare", (root / "runs").string(), "--out", out.string()})), options);
    if (const auto r = ended(compare)) check_result_or_limit(*r);
  }
}

TEST_CASE("compare under an address-space limit writes its report or exits 1 naming the limit; it always ends") {
  if (sanitized()) return;
  const TempDir root("memlimit_compare");
  for (const char* run : {"a", "b"}) {
    const ProcessResult r = run_process(tiny_train(root / "runs" / run, 1));
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  }
  for (int threads : {1, 2})
    for (long long kib : kLimitsKiB) {
      CAPTURE(threads);
      CAPTURE(kib);
      const fs::path out = root / ("report_" + std::to_string(threads) + "_" + std::to_string(kib));
      Process p(xgrad_command({"compare", (root / "runs").string(), "--out", out.string()}), limited(kib, threads));
      if (const auto r = ended(p)) {
        check_result_or_limit(*r);
        if (r->exit_code == 0) CHECK(fs::exists(out / "report.md"));
      }
    }
}

TEST_CASE("a run refused for the limit says so before it writes anything") {
  if (sanitized()) return;
  const TempDir root("memlimit_estimate");
  // About 100 million weights, 2 GB with their gradients and AdamW's state: within the 12 GiB xgrad allows, above
  // the 1 GB limit.
  const fs::path out = root / "big";
  Process p(train_command("--d-model 1024 --n-layers 8 --steps 2", out), limited(1000000, 1));
  if (const auto r = ended(p)) {
    INFO("stderr: " << r->err);
    CHECK(r->exit_code == 1);
    CHECK(r->err.find("ulimit -v") != std::string::npos);
    CHECK_FALSE(fs::exists(out));
  }
}

TEST_CASE("SIGTERM ends a run under an address-space limit") {
  if (sanitized()) return;
  const TempDir root("memlimit_sigterm");
  for (int threads : {1, 2})
    for (long long kib : {150000LL, 300000LL, 600000LL}) {
      CAPTURE(threads);
      CAPTURE(kib);
      const fs::path out = root / ("run_" + std::to_string(threads) + "_" + std::to_string(kib));
      Process p(tiny_train(out, threads, 100000000), limited(kib, threads));
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // past its setup, at work or stuck
      p.send(SIGTERM);
      if (const auto r = ended(p)) {
        INFO("exit " << r->exit_code << ", signal " << r->signal << ", stderr: " << r->err);
        // Refused for the limit, or stopped by the signal (killed by it, as a shell's loop needs).
        CHECK((r->exit_code == 1 || r->signal == SIGTERM));
        if (r->exit_code == 1) CHECK(r->err.find("ulimit -v") != std::string::npos);
      }
    }
}

TEST_CASE(
    "a run that never reaches the end of its step after SIGTERM ends by the signal when the watchdog's time is up") {
  const auto [status, seconds] = stop_child([] {
    for (;;) pause();  // a step that never ends
    return 0;
  });
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  CHECK(seconds >= 0.9);  // after the watchdog's second, not at the signal
}

TEST_CASE("a run that sees the stop request calls the watchdog off and stops in its own time") {
  const auto [status, seconds] = stop_child([] {
    while (g_stop == 0) usleep(1000);
    xgrad::platform::disarm_stop_watchdog();
    sleep(2);  // a checkpoint written for longer than the watchdog's second
    return 0;
  });
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(seconds >= 1.9);
}

TEST_CASE("a BLAS buffer that cannot be mapped under the limit ends the process with exit 1 naming the limit") {
  if (sanitized()) return;
  int err[2];
  REQUIRE(pipe(err) == 0);
  const auto start = std::chrono::steady_clock::now();
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    dup2(err[1], STDERR_FILENO);
    xgrad::blas::set_num_threads(1);
    xgrad::blas::set_own_kernel(false);  // OpenBLAS's buffer is what this maps (xgrad's own kernel maps none)
    // 256 x 256: past the small-matrix kernels (SkylakeX's take M*N*K up to 100^3 without the buffer), so that every
    // kernel family maps its buffer on this call.
    constexpr int n = 256;
    std::vector<float> a(n * n, 1.0f), c(n * n);
    // Room for more matrices, not for OpenBLAS's buffer, which its first call maps.
    const rlim_t bytes = xgrad::platform::address_space_in_use() + (rlim_t(32) << 20);
    const rlimit limit{bytes, bytes};
    if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(125);
    xgrad::blas::gemm<float>(false, false, n, n, n, 1.0f, a.data(), n, a.data(), n, 0.0f, c.data(), n);
    _exit(0);
  }
  close(err[1]);
  const auto [status, seconds] = wait_child(child, start);
  std::string text(4096, '\0');
  const ssize_t n = read(err[0], text.data(), text.size());
  close(err[0]);
  text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  INFO("stderr: " << text);
  CHECK(seconds >= 0);  // ended by itself
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(text.find("ulimit -v") != std::string::npos);
}

TEST_CASE("explain runs under a limit that holds one small model and one BLAS buffer") {
  // explain builds a model per d_k after its first BLAS call has mapped the buffer: that buffer is in the address
  // space in use, and counting it again as still to come refused a command that needs about 190 MB at 300 MB.
  if (sanitized()) return;
  const TempDir root("memlimit_explain");
  std::vector<std::string> args = words("explain --d-k 4,16 --d-model 16 --out");
  args.push_back((root / "explain").string());
  Process p(xgrad_command(args), limited(300000, 1));
  std::optional<ProcessResult> r = ended(p);
  // 300 MB holds the command where the executable and its libraries map about 100 MB (Debian 12). Where they map
  // more (Debian 13's Open MPI 5: 212 MiB), the refusal says how much is in use before the first BLAS buffer: the
  // command runs under that plus one buffer (128 MiB) and 60 MiB for the models, which counting the buffer twice
  // would still exceed.
  const std::size_t in_use = r ? r->err.find(" MiB in use") : std::string::npos;
  if (r && r->exit_code != 0 && in_use != std::string::npos) {
    const std::size_t start = r->err.rfind(' ', in_use - 1) + 1;
    const long long mib = std::stoll(r->err.substr(start, in_use - start));
    if (mib > 150) {
      Process again(xgrad_command(args), limited((mib + 128 + 60) * 1024, 1));
      r = ended(again);
    }
  }
  if (r) {
    INFO("stderr: " << r->err);
    CHECK(r->exit_code == 0);
  }
}

TEST_CASE("out of memory in a command without model flags names the limit, not training flags") {
  if (sanitized()) return;
  const TempDir root("memlimit_compare_advice");
  const fs::path a = root / "a";
  REQUIRE(run_process(tiny_train(a, 1)).exit_code == 0);
  for (long long kib : {57000LL, 60000LL, 70000LL}) {
    CAPTURE(kib);
    Process p(xgrad_command({"compare", a.string(), "--out", (root / ("c" + std::to_string(kib))).string()}),
              limited(kib, 1));
    if (const auto r = ended(p)) {
      check_result_or_limit(*r);
      CHECK(r->err.find("--d-model") == std::string::npos);
    }
  }
}
