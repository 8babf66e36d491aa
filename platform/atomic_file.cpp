#include "platform/atomic_file.h"
#include "platform/signals.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <system_error>

#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace xgrad::platform {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kMark = ".tmp-";

// The process id in a name temporary_path made, or 0 when `name` is not one.
long temporary_owner(const std::string& name) {
  if (name.size() < 2 || name[0] != '.') return 0;
  const std::size_t at = name.rfind(kMark);
  if (at == std::string::npos) return 0;
  const char* digits = name.c_str() + at + kMark.size();
  char* end = nullptr;
  const long pid = std::strtol(digits, &end, 10);
  return end != digits && *end == '-' && pid > 0 ? pid : 0;
}

// Closes `fd`, keeping errno as the failed call before it left it.
void close_keeping_errno(int fd) {
  const int saved = errno;
  ::close(fd);
  errno = saved;
}

}  // namespace

std::string system_error_text(const std::string& what) { return what + " failed: " + std::strerror(errno); }

fs::path temporary_path(const fs::path& dir, const std::string& name) {
  static std::atomic<unsigned long> counter{0};
  return dir / ("." + name + std::string(kMark) + std::to_string(::getpid()) + "-" + std::to_string(counter++));
}

int create_new_file(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot create " + path.string() + ": " + std::strerror(errno));
  return fd;
}

StagedFile::StagedFile(fs::path target) : target_(std::move(target)) {
  const fs::path dir = target_.has_parent_path() ? target_.parent_path() : fs::path(".");
  // Refused before anything is written: the rename that ends the write cannot replace a directory, and a group of
  // files renamed together would otherwise stop part way.
  struct stat st {};
  if (::lstat(target_.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw std::runtime_error("cannot write " + target_.string() + ": " + std::strerror(EISDIR) +
                             " (remove it, or write elsewhere)");
  temporary_ = temporary_path(dir, target_.filename().string());
  fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot write " + target_.string() + ": " + std::strerror(errno));
}

StagedFile::~StagedFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temporary_.c_str());
}

void StagedFile::write(std::string_view bytes) {
  if (fd_ < 0) throw std::logic_error("StagedFile::write after finish: " + target_.string());
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(system_error_text("writing " + target_.string()));
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

void StagedFile::finish() {
  if (fd_ < 0) return;
  // Some file systems report a full disk only here (NFS, quotas): the rename must not make a cut file visible.
  if (::fsync(fd_) != 0) {
    close_keeping_errno(fd_);
    fd_ = -1;
    throw std::runtime_error(system_error_text("writing " + target_.string()));
  }
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) throw std::runtime_error(system_error_text("writing " + target_.string()));
}

void StagedFile::commit() {
  finish();
  if (::rename(temporary_.c_str(), target_.c_str()) != 0)
    throw std::runtime_error("cannot move " + temporary_.string() + " to " + target_.string() + ": " +
                             std::strerror(errno));
  committed_ = true;
  // The rename is durable only once the directory entry is (a checkpoint must survive a power cut whole).
  const fs::path dir = target_.has_parent_path() ? target_.parent_path() : fs::path(".");
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) throw std::runtime_error(system_error_text("opening directory " + dir.string()));
  const int rc = ::fsync(dir_fd);
  ::close(dir_fd);
  if (rc != 0) throw std::runtime_error(system_error_text("syncing directory " + dir.string()));
}

void write_file_atomically(const fs::path& target, std::string_view bytes) {
  StagedFile file(target);
  file.write(bytes);
  file.commit();
}

StagedDirectory::StagedDirectory(fs::path target) : target_(std::move(target)) {
  const fs::path dir = target_.has_parent_path() ? target_.parent_path() : fs::path(".");
  temporary_ = temporary_path(dir, target_.filename().string());
  replaced_ = temporary_path(dir, target_.filename().string() + "-old");
  if (::mkdir(temporary_.c_str(), 0755) != 0)
    throw std::runtime_error("cannot create " + temporary_.string() + ": " + std::strerror(errno));
}

StagedDirectory::~StagedDirectory() {
  std::error_code ec;
  fs::remove_all(committed_ ? replaced_ : temporary_, ec);  // a link is removed itself, never what it names
}

void StagedDirectory::commit() {
  std::error_code ec;
  const bool existed = fs::exists(fs::symlink_status(target_, ec));
  if (existed && ::rename(target_.c_str(), replaced_.c_str()) != 0)
    throw std::runtime_error("cannot move " + target_.string() + " aside: " + std::strerror(errno));
  if (::rename(temporary_.c_str(), target_.c_str()) != 0) {
    const int saved = errno;
    if (existed) ::rename(replaced_.c_str(), target_.c_str());
    throw std::runtime_error("cannot move the new " + target_.string() + " into place: " + std::strerror(saved));
  }
  committed_ = true;
}

void StagedDirectory::undo() {
  if (!committed_) return;
  if (::rename(target_.c_str(), temporary_.c_str()) != 0)
    throw std::runtime_error("cannot move the new " + target_.string() + " out again: " + std::strerror(errno));
  committed_ = false;
  std::error_code ec;
  if (fs::exists(fs::symlink_status(replaced_, ec)) && ::rename(replaced_.c_str(), target_.c_str()) != 0)
    throw std::runtime_error("cannot put the old " + target_.string() + " back (it is " + replaced_.string() +
                             "): " + std::strerror(errno));
}

DirectoryLock::DirectoryLock(const fs::path& dir) : fd_(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
  while (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
  }
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

std::atomic<int> g_deferred_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "defer_stop_signal must be async-signal-safe");

extern "C" void defer_stop_signal(int sig) {
  int none = 0;
  g_deferred_signal.compare_exchange_strong(none, sig);
}

}  // namespace

StopSignalsHeld::StopSignalsHeld() {
  // Blocking in this thread alone is not enough: the kernel gives a process-directed signal to any thread that does
  // not block it (OpenBLAS's workers block nothing), and its default action ends the whole process. A handler, which
  // runs in whichever thread takes the signal, records it instead.
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : kStopSignals) sigaddset(&stop, sig);
  ::pthread_sigmask(SIG_BLOCK, &stop, &previous_mask_);
  struct sigaction action {};
  action.sa_handler = defer_stop_signal;
  action.sa_flags = SA_RESTART;  // the other threads' system calls go on as if nothing arrived
  sigfillset(&action.sa_mask);
  for (std::size_t i = 0; i < std::size(kStopSignals); ++i)
    ::sigaction(kStopSignals[i], &action, &previous_actions_[i]);
}

StopSignalsHeld::~StopSignalsHeld() {
  for (std::size_t i = 0; i < std::size(kStopSignals); ++i)
    ::sigaction(kStopSignals[i], &previous_actions_[i], nullptr);
  // A signal still pending on this thread arrives here, with the disposition restored; one another thread took is
  // raised again. Under a nested hold it is held again, by the outer one.
  ::pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
  if (const int sig = g_deferred_signal.exchange(0); sig != 0) ::raise(sig);
}

void remove_abandoned_temporaries(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const long pid = temporary_owner(it->path().filename().string());
    std::error_code ignored;
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) fs::remove_all(it->path(), ignored);
  }
}

}  // namespace xgrad::platform
