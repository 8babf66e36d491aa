// The one way tests run a program (the xgrad executable, bash, taskset): an argument vector, never a shell string,
// with its exit code, stdout and stderr captured; or a process started, signalled and waited for with a timeout,
// for the tests that interrupt a run.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace xgrad::testing {

/// How a process ended and what it wrote.
struct ProcessResult {
  int exit_code = -1;  // the exit status, or -1 when a signal ended the process
  int signal = 0;      // the signal that ended the process, or 0 when it exited
  std::string out;     // stdout (with stderr interleaved when ProcessOptions::merge_stderr)
  std::string err;     // stderr ("" when merged into out)
};

/// What the child gets besides its arguments. By default: stdin from /dev/null, this process's environment and
/// working directory, every signal at its default action, stdout and stderr captured apart.
struct ProcessOptions {
  std::string stdin_text;                                        // fed to stdin
  std::vector<std::pair<std::string, std::string>> environment;  // set (or replaced) in the child's environment
  std::filesystem::path cwd;                                     // the working directory, if not this one's
  bool merge_stderr = false;                                     // stderr into stdout, as a shell's 2>&1
  std::filesystem::path output_file;  // stdout and stderr together into this file as written, as >FILE 2>&1
  std::vector<int> ignored_signals;   // SIG_IGN at exec, as nohup or a script's `&` do
  bool own_group = false;           // a process group of its own, as a shell job gets: killpg reaches its children too
  long long address_space_kib = 0;  // RLIMIT_AS in KiB, as `ulimit -v`; 0: this process's limit
  long long file_size_limit = 0;    // RLIMIT_FSIZE in bytes, as `ulimit -f`; 0: this process's limit
  int stdout_fd = -1;               // stdout to this descriptor (a pipe's end) instead of the capture, if >= 0
};

/// `kib` as a limit for ProcessOptions::address_space_kib, under which a run that would allocate too much fails at
/// once instead of filling the machine's memory; 0 (no limit) in an AddressSanitizer build, which reserves
/// terabytes of address space and cannot run under one (there the test runs without it).
inline long long address_space_limit(long long kib) {
#if defined(__SANITIZE_ADDRESS__)
  (void)kib;
  return 0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  (void)kib;
  return 0;
#else
  return kib;
#endif
#else
  return kib;
#endif
}

/// The default options but stdout and stderr captured together, interleaved as a terminal shows them
/// (ProcessResult::out).
inline ProcessOptions merged_output() {
  ProcessOptions options;
  options.merge_stderr = true;
  return options;
}

/// The default options but run in the working directory `cwd`.
inline ProcessOptions in_directory(const std::filesystem::path& cwd) {
  ProcessOptions options;
  options.cwd = cwd;
  return options;
}

/// A started child process. The destructor kills (SIGKILL; its group with own_group) and reaps a child not waited
/// for, so that a failed REQUIRE leaves no process behind.
class Process {
 public:
  /// Starts `argv` (argv[0] found on PATH when it has no '/'); throws std::runtime_error when it cannot start.
  Process(const std::vector<std::string>& argv, const ProcessOptions& options = {});
  ~Process();
  Process(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  Process& operator=(Process&&) = delete;

  /// The child's pid (still its number after wait()).
  pid_t pid() const { return pid_; }
  /// Sends `sig` to the process (to its whole group with own_group and `group`); nothing once waited for.
  void send(int sig, bool group = false) const;
  /// Whether the process has ended (it stays waitable).
  bool ended() const;
  /// Waits for the end and returns how it ended and what it wrote.
  ProcessResult wait();
  /// Waits at most `timeout`; nullopt (the process still running) when it has not ended by then.
  std::optional<ProcessResult> wait_for(std::chrono::milliseconds timeout);

 private:
  ProcessResult finish(int status);

  pid_t pid_ = -1;
  bool running_ = false;  // started and not yet waited for
  bool own_group_ = false;
  std::FILE* out_ = nullptr;  // temporary files the child writes, read at the end
  std::FILE* err_ = nullptr;
};

/// Runs `argv` to its end.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

/// Runs the xgrad executable under test (XGRAD_BIN) with `args` to its end.
ProcessResult run_xgrad(const std::vector<std::string>& args, const ProcessOptions& options = {});

/// `args` with the xgrad executable under test in front, for Process.
std::vector<std::string> xgrad_command(const std::vector<std::string>& args);

/// Polls `done` every millisecond for up to two minutes (a sanitizer build on a busy machine is slow); false if it
/// never held.
bool eventually(const std::function<bool()>& done);

/// Stops process `pid` (SIGSTOP) until thawed or the end of the scope, also when a REQUIRE leaves it early: a process
/// left stopped would hold its run's lock forever.
class Frozen {
 public:
  explicit Frozen(pid_t pid);
  ~Frozen() { thaw(); }
  Frozen(const Frozen&) = delete;
  Frozen& operator=(const Frozen&) = delete;
  /// Lets the process go on (SIGCONT); nothing the second time.
  void thaw();

 private:
  pid_t pid_;
};

/// Whether `program` is an executable file in a directory of $PATH (as the shell's `command -v` finds it).
bool on_path(const std::string& program);

/// The words of `text` split at spaces, for arguments written as one line in a test: no quoting, no expansion; a
/// word that may hold a space (a path from the data) goes in the vector on its own.
std::vector<std::string> words(const std::string& text);

}  // namespace xgrad::testing
