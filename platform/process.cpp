#include "platform/process.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace xgrad::platform {

namespace {

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// A descriptor closed when it goes out of scope.
struct Descriptor {
  int fd = -1;
  Descriptor() = default;
  explicit Descriptor(int f) : fd(f) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

std::string failure(const std::string& program, const std::string& what, int error) {
  return "cannot run " + program + ": " + what + (error ? std::string(": ") + std::strerror(error) : std::string());
}

// What the child gets, opened here: stdin, its output (a file or a pipe's write end), its working directory.
struct ChildSetup {
  Descriptor input, output_file, directory, capture_read, capture_write;
};

void open_child_setup(const std::string& program, const ProgramOptions& options, ChildSetup& s) {
  s.input.fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (s.input.fd < 0) throw std::runtime_error(failure(program, "cannot open /dev/null", errno));
  if (!options.working_directory.empty()) {
    s.directory.fd = ::open(options.working_directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s.directory.fd < 0)
      throw std::runtime_error(failure(program, "cannot open the directory " + options.working_directory, errno));
  }
  if (!options.output_file.empty()) {
    s.output_file.fd =
        ::open(options.output_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (s.output_file.fd < 0) throw std::runtime_error(failure(program, "cannot open " + options.output_file, errno));
  } else {
    int capture[2];
    if (::pipe2(capture, O_CLOEXEC) != 0) throw std::runtime_error(failure(program, "cannot make a pipe", errno));
    s.capture_read.fd = capture[0];
    s.capture_write.fd = capture[1];
  }
}

// posix_spawn, not fork: the child does not copy a large process's page tables (a compare holding every run in
// memory), and an exec failure comes back as its return value.
pid_t spawn(const std::string& path, std::vector<std::string> words, const ChildSetup& s) {
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const int out = s.output_file.fd >= 0 ? s.output_file.fd : s.capture_write.fd;
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attributes);
  posix_spawn_file_actions_adddup2(&actions, s.input.fd, STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out, STDERR_FILENO);
  if (s.directory.fd >= 0) posix_spawn_file_actions_addfchdir_np(&actions, s.directory.fd);
  // Nothing else of this process's (a run's lock, a report being written) is handed to the program.
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  const int error = ::posix_spawn(&pid, path.c_str(), &actions, &attributes, argv.data(), environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) throw std::runtime_error(failure(words.front(), "cannot start " + path, error));
  return pid;
}

std::string read_all(int fd) {
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0)
      text.append(buffer, static_cast<std::size_t>(n));
    else if (n == 0 || errno != EINTR)
      return text;
  }
}

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return status;
}

}  // namespace

std::string find_program(const std::string& program) {
  if (program.empty()) return "";
  if (program.find('/') != std::string::npos) return is_executable_file(program) ? program : "";
  const char* path_variable = std::getenv("PATH");
  const std::string path = path_variable ? path_variable : "/usr/local/bin:/usr/bin:/bin";
  for (std::size_t begin = 0;;) {
    const std::size_t end = path.find(':', begin);
    std::string directory = path.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    if (directory.empty()) directory = ".";
    const std::string candidate = directory + "/" + program;
    if (is_executable_file(candidate)) return candidate;
    if (end == std::string::npos) return "";
    begin = end + 1;
  }
}

ProgramResult run_program(const std::vector<std::string>& argv, const ProgramOptions& options) {
  if (argv.empty()) throw std::runtime_error("cannot run a program: no program named");
  const std::string& program = argv.front();
  const std::string path = find_program(program);
  if (path.empty()) throw std::runtime_error("cannot run " + program + ": not found on PATH");
  ChildSetup setup;
  open_child_setup(program, options, setup);
  const pid_t pid = spawn(path, argv, setup);
  setup.capture_write.reset();  // the pipe ends when the child's copies close
  ProgramResult result;
  if (setup.capture_read.fd >= 0) result.output = read_all(setup.capture_read.fd);
  const int status = wait_for(pid);
  if (status < 0) throw std::runtime_error(failure(program, "cannot wait for it", errno));
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace xgrad::platform
