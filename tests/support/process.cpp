#include "tests/support/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/support/paths.h"

extern char** environ;

namespace xgrad::testing {
namespace {

std::FILE* temporary_file() {
  std::FILE* f = std::tmpfile();
  if (f == nullptr) throw std::runtime_error(std::string("tmpfile: ") + std::strerror(errno));
  return f;
}

std::string contents(std::FILE* f) {
  std::string text;
  if (f == nullptr) return text;
  std::fflush(f);
  std::rewind(f);
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, f)) > 0;) text.append(buffer, n);
  return text;
}

// This process's environment with `changes` applied, as NAME=VALUE strings.
std::vector<std::string> child_environment(const std::vector<std::pair<std::string, std::string>>& changes) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    bool replaced = false;
    for (const auto& [name, value] : changes) replaced = replaced || entry.rfind(name + "=", 0) == 0;
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [name, value] : changes) env.push_back(name + "=" + value);
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> p;
  for (auto& s : strings) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

// Sets resource `resource` to `value` (soft and hard) when value > 0; false when that fails.
bool set_limit(decltype(RLIMIT_AS) resource, long long value) {
  if (value <= 0) return true;
  const rlimit limit{static_cast<rlim_t>(value), static_cast<rlim_t>(value)};
  return setrlimit(resource, &limit) == 0;
}

// In the child, between fork and exec: only async-signal-safe calls. Every signal was blocked before fork, so one
// sent now waits until the dispositions are back at their defaults (never a handler of the test's copy).
[[noreturn]] void exec_child(const ProcessOptions& options, int in, int out, int err, char* const* argv,
                             char* const* envp) {
  if (options.own_group) setpgid(0, 0);
  for (int sig = 1; sig < NSIG; ++sig) signal(sig, SIG_DFL);
  for (int sig : options.ignored_signals) signal(sig, SIG_IGN);
  if (!options.cwd.empty() && chdir(options.cwd.c_str()) != 0) _exit(125);
  if (!set_limit(RLIMIT_AS, options.address_space_kib * 1024) || !set_limit(RLIMIT_FSIZE, options.file_size_limit))
    _exit(125);
  if (options.stdout_fd >= 0) out = options.stdout_fd;
  if (dup2(in, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 || dup2(err, STDERR_FILENO) < 0) _exit(126);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execvpe(argv[0], argv, envp);
  _exit(127);
}

}  // namespace

Process::Process(const std::vector<std::string>& argv, const ProcessOptions& options) : own_group_(options.own_group) {
  if (argv.empty()) throw std::invalid_argument("Process: no program");
  std::vector<std::string> args = argv, env = child_environment(options.environment);
  const std::vector<char*> argp = pointers(args), envp = pointers(env);
  std::FILE* in = temporary_file();
  std::fputs(options.stdin_text.c_str(), in);
  std::fflush(in);
  std::rewind(in);
  if (options.output_file.empty()) {
    out_ = temporary_file();
    err_ = options.merge_stderr ? nullptr : temporary_file();
  } else {
    out_ = std::fopen(options.output_file.c_str(), "w+b");
    if (out_ == nullptr) throw std::runtime_error("cannot write " + options.output_file.string());
  }
  const int out_fd = fileno(out_), err_fd = err_ != nullptr ? fileno(err_) : out_fd;
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  pid_ = fork();
  if (pid_ == 0) exec_child(options, fileno(in), out_fd, err_fd, argp.data(), envp.data());
  const int fork_errno = errno;
  if (pid_ > 0 && own_group_) setpgid(pid_, pid_);  // also here: the test may signal the group before exec
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  std::fclose(in);
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(fork_errno));
  running_ = true;
}

Process::Process(Process&& other) noexcept
    : pid_(other.pid_),
      running_(std::exchange(other.running_, false)),
      own_group_(other.own_group_),
      out_(std::exchange(other.out_, nullptr)),
      err_(std::exchange(other.err_, nullptr)) {}

Process::~Process() {
  if (running_) {
    send(SIGKILL, own_group_);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (out_ != nullptr) std::fclose(out_);
  if (err_ != nullptr) std::fclose(err_);
}

void Process::send(int sig, bool group) const {
  if (!running_) return;
  if (group && own_group_)
    killpg(pid_, sig);
  else
    kill(pid_, sig);
}

bool Process::ended() const {
  if (!running_) return true;
  siginfo_t info{};
  return waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_;
}

ProcessResult Process::wait() {
  if (!running_) throw std::logic_error("Process::wait: already waited for");
  int status = 0;
  pid_t got;
  do got = waitpid(pid_, &status, 0);
  while (got < 0 && errno == EINTR);
  if (got != pid_) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
  return finish(status);
}

std::optional<ProcessResult> Process::wait_for(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!ended()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return wait();
}

ProcessResult Process::finish(int status) {
  running_ = false;
  ProcessResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  r.out = contents(out_);
  r.err = contents(err_);
  return r;
}

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  return Process(argv, options).wait();
}

std::vector<std::string> xgrad_command(const std::vector<std::string>& args) {
  std::vector<std::string> argv{XGRAD_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

ProcessResult run_xgrad(const std::vector<std::string>& args, const ProcessOptions& options) {
  return run_process(xgrad_command(args), options);
}

bool eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return done();
}

Frozen::Frozen(pid_t pid) : pid_(pid) { kill(pid_, SIGSTOP); }

void Frozen::thaw() {
  if (pid_ > 0) kill(pid_, SIGCONT);
  pid_ = 0;
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty() && access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  return false;
}

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

}  // namespace xgrad::testing
