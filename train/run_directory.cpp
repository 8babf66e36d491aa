#include "train/run_directory.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "common/escape.h"
#include "data/registry.h"
#include "nn/checkpoint.h"
#include "train/json_file.h"
#include "train/run_checkpoint.h"
#include "train/run_files.h"
#include "train/settings.h"
#include "train/tensorboard.h"

namespace xgrad::train {

namespace fs = std::filesystem;

std::string linked_file_message(const fs::path& path) {
  return path.string() + " is a symbolic link; xgrad does not write through links in a run directory: remove it";
}

void refuse_linked_file(const fs::path& path) {
  std::error_code ec;
  if (fs::is_symlink(fs::symlink_status(path, ec))) throw ConfigError(linked_file_message(path));
}

int open_not_linked(const fs::path& path, int flags, unsigned mode) {
  // O_NOFOLLOW makes the check and the open one step: a link put in place between the two is refused too.
  const int fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0 && errno == ELOOP) throw ConfigError(linked_file_message(path));
  return fd;
}

RunLock::~RunLock() { release(); }

void RunLock::release() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void RunLock::set_holder(long pid) {
  const std::string text = std::to_string(pid) + "\n";
  // Written before the rest is cut off, so that the file never reads empty to a process refused meanwhile.
  if (fd_ < 0 || ::pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()) ||
      ::ftruncate(fd_, static_cast<off_t>(text.size())) != 0) {
    // the pid is only for the messages of those refused; the lock itself holds
  }
}

bool RunLock::adopt_inherited(const fs::path& path) {
  const char* inherited = std::getenv(kInheritedLockVariable);
  if (!inherited || fd_ >= 0) return false;
  char* end = nullptr;
  const long fd = std::strtol(inherited, &end, 10);
  struct stat open_file {
  }, lock_file{};
  if (end == inherited || *end != '\0' || fd < 0 || fd > INT_MAX || ::fstat(static_cast<int>(fd), &open_file) != 0 ||
      ::lstat(path.c_str(), &lock_file) != 0 || open_file.st_dev != lock_file.st_dev ||
      open_file.st_ino != lock_file.st_ino)
    return false;  // not this directory's lock: take it the usual way
  // The parent's lock is on this open file, so this succeeds at once; were it not held, it is taken here.
  if (::flock(static_cast<int>(fd), LOCK_EX | LOCK_NB) != 0) return false;
  ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
  ::unsetenv(kInheritedLockVariable);  // a later train() in this process takes its own lock
  fd_ = static_cast<int>(fd);
  set_holder(::getpid());
  return true;
}

bool RunLock::try_acquire(const fs::path& dir, std::string& holder) {
  const fs::path path = dir / ".lock";
  if (adopt_inherited(path)) return true;
  const int fd = open_not_linked(path, O_RDWR | O_CREAT, 0644);
  if (fd < 0) throw ConfigError("--out: cannot open " + path.string() + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err != EWOULDBLOCK) {
      ::close(fd);
      throw ConfigError("--out: cannot lock " + path.string() + ": " + std::strerror(err));
    }
    // The holder writes its pid (a whole line) just after taking the lock: a process refused in between finds the
    // file empty, or naming an earlier holder that has exited, and reads it again for up to a second. A holder that
    // writes no pid may be a probe (run_lock_holder), which lets go within microseconds: the lock is tried again.
    auto written = [](const std::string& text) {
      if (text.empty() || text.back() != '\n') return false;
      const long pid = std::strtol(text.c_str(), nullptr, 10);
      return pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH;
    };
    holder.clear();
    for (int attempt = 0; attempt < 200 && !written(holder); ++attempt) {
      if (attempt > 0) {
        ::usleep(5000);
        if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
          fd_ = fd;
          set_holder(::getpid());
          return true;
        }
      }
      char buf[32] = {};
      const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
      holder = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
    }
    ::close(fd);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    if (holder.empty()) holder = "unknown";
    return false;
  }
  fd_ = fd;
  set_holder(::getpid());
  return true;
}

std::string run_lock_holder(const fs::path& dir) {
  const fs::path path = dir / ".lock";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string holder;
  if (::flock(fd, LOCK_SH | LOCK_NB) == 0) {
    ::flock(fd, LOCK_UN);
  } else if (errno == EWOULDBLOCK) {
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    holder = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    if (holder.empty()) holder = "unknown";
  }
  ::close(fd);
  return holder;
}

bool RunLock::acquire(const fs::path& dir, bool required) {
  const fs::path path = dir / ".lock";
  if (adopt_inherited(path)) return true;
  {
    const int fd = open_not_linked(path, O_RDWR | O_CREAT, 0644);
    if (fd < 0) {
      if (!required) return false;
      throw ConfigError("--out: run directory " + dir.string() + " is not writable: " + std::strerror(errno));
    }
    ::close(fd);
  }
  std::string holder;
  if (!try_acquire(dir, holder))
    throw ConfigError("--out/--resume: " + dir.string() + " is being written by another xgrad process (pid " + holder +
                      ")");
  return true;
}

void check_output_directory(const std::string& dir, const std::string& what) {
  if (dir.empty()) throw ConfigError("--out: empty; name " + what);
  // A name the file system cannot hold is a usage error, the same in every command, not a failure to create it.
  if (dir.size() >= PATH_MAX)
    throw ConfigError(fmt::format("--out: '{}...' is {} bytes, more than the {} a path may have",
                                  escape_name(dir.substr(0, 40)), dir.size(), PATH_MAX - 1));
  for (const auto& part : fs::path(dir))
    if (part.string().size() > TrainConfig::kMaxFileNameBytes)
      throw ConfigError(fmt::format("--out: the name '{}...' in it is {} bytes, more than the {} a file name may have",
                                    escape_name(part.string().substr(0, 40)), part.string().size(),
                                    TrainConfig::kMaxFileNameBytes));
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw ConfigError("--out: " + dir + " exists and is not a directory");
}

void check_run_directory(const TrainConfig& cfg) {
  const fs::path dir(cfg.out);
  std::error_code ec;
  if (cfg.resume && cfg.overwrite)
    throw ConfigError("--resume and --overwrite exclude each other (continue the run, or start it over)");
  check_output_directory(cfg.out, "a run directory");
  // fs::exists follows links: a dangling metrics.csv link would pass as "no run here" and be written through.
  for (const auto& f : run_file_names()) refuse_linked_file(dir / f);
  bool holds_run = false;
  for (const auto& f : run_file_names()) holds_run = holds_run || fs::exists(dir / f, ec);
  if (cfg.resume && !fs::exists(dir / kConfigFile, ec))
    throw ConfigError("--resume: " + dir.string() + " holds no run (no config.json)");
  if (!cfg.resume && !cfg.overwrite && holds_run)
    throw ConfigError("--out: " + dir.string() + " already holds a run (config.json, metrics.csv or a checkpoint); " +
                      "pass --overwrite to replace it or --resume to continue it");
}

std::vector<fs::path> leftover_partial_writes(const fs::path& dir) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 1 && name[0] == '.' && name.find(".tmp-") != std::string::npos) found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

void check_not_linked(const fs::path& base, const fs::path& dir, const std::string& flag) {
  const fs::path below = dir.lexically_relative(base);
  fs::path at = base;
  for (const fs::path& part : below) {
    if (part.empty() || part == ".") continue;
    at /= part;
    std::error_code ec;
    if (fs::is_symlink(fs::symlink_status(at, ec)))
      throw ConfigError(flag + ": " + at.string() + " is a symbolic link; xgrad writes run directories only where " +
                        "the directory you named holds them (replace the link with a directory, or remove it)");
  }
}

namespace {

const char* const kInputAdvice = "; put the original back to continue the run, or train a new one on the new data";

// The files config.json records under "inputs"; ConfigError naming `flag` if the record is not what xgrad writes.
std::vector<data::InputFile> recorded_inputs(const nlohmann::json& recorded, const std::string& config_path,
                                             const std::string& flag = "--resume") {
  std::vector<data::InputFile> files;
  try {
    if (!recorded.is_array()) throw std::invalid_argument("not a list");
    for (const nlohmann::json& j : recorded) files.push_back(data::InputFile::from_json(j));
  } catch (const std::invalid_argument& e) {
    throw ConfigError(flag + ": " + config_path + ": 'inputs' is not what xgrad writes (" + e.what() + ")");
  }
  return files;
}

// Throws when `now_size` differs from the recorded size (or the file is gone: now_size empty).
void check_size(const TrainConfig& cfg, const data::InputFile& was, const std::uint64_t* now_size) {
  const std::string head = flag_of(was.setting) + ": " + was.path;
  if (!now_size)
    throw ConfigError(head + ", which the run in " + cfg.out + " was trained on, is not there now (moved or deleted?)" +
                      kInputAdvice);
  if (*now_size != was.size)
    throw ConfigError(head + " has changed since the run in " + cfg.out + " started: " + std::to_string(*now_size) +
                      " bytes now, " + std::to_string(was.size) + " then" + kInputAdvice);
}

}  // namespace

std::string input_difference(const data::InputFile& was, const data::InputFile& now) {
  if (now.size != was.size) return std::to_string(now.size) + " bytes now, " + std::to_string(was.size) + " then";
  if (now.xxh3 != was.xxh3)
    return "same size (" + std::to_string(now.size) + " bytes), other content (XXH3 " + data::hash_text(now.xxh3) +
           " now, " + data::hash_text(was.xxh3) + " then)";
  return "";
}

void check_recorded_inputs(const TrainConfig& cfg, const std::vector<data::InputFile>& current) {
  for (const data::InputFile& was : cfg.recorded_inputs) {
    const nlohmann::json value = get_setting(cfg, was.setting);
    if (!value.is_string() || value.get<std::string>().empty()) continue;  // a setting this run does not read
    const std::string head = flag_of(was.setting) + ": " + was.path;
    const std::string advice = "; put the original back to reproduce that run, or pass " + flag_of(was.setting) +
                               " to train on the file as it is now";
    const auto now =
        std::find_if(current.begin(), current.end(), [&](const data::InputFile& f) { return f.path == was.path; });
    if (now == current.end())
      throw ConfigError(head + ", which the run of " + cfg.recorded_inputs_source + " read, is not read now" + advice);
    const std::string difference = input_difference(was, *now);
    if (!difference.empty())
      throw ConfigError(head + " has changed since the run of " + cfg.recorded_inputs_source +
                        " read it: " + difference + advice);
  }
}

void check_run_inputs_unchanged(const std::string& run_dir, const std::string& advice,
                                std::map<std::string, data::InputFile>& cache) {
  const fs::path config_path = fs::path(run_dir) / kConfigFile;
  nlohmann::json stored;
  try {
    std::error_code ec;
    if (!fs::exists(config_path, ec)) return;
    stored = read_json_file(config_path);
  } catch (const nlohmann::json::exception&) {
    return;
  }
  if (!stored.is_object() || !stored.contains("inputs")) return;
  for (const data::InputFile& was : recorded_inputs(stored.at("inputs"), config_path.string(), "--out")) {
    const std::string head = flag_of(was.setting) + ": " + was.path;
    std::error_code ec;
    const std::uint64_t size = fs::file_size(was.path, ec);
    if (ec)
      throw ConfigError(head + ", which the run in " + run_dir + " read, is not there now (" + ec.message() + ")" +
                        advice);
    std::string difference;
    if (size != was.size) {
      difference = std::to_string(size) + " bytes now, " + std::to_string(was.size) + " then";
    } else {
      auto it = cache.find(was.path);
      if (it == cache.end()) {
        try {
          it = cache.emplace(was.path, data::fingerprint_file(was.path, was.setting, head)).first;
        } catch (const data::TaskError& e) {
          throw ConfigError(std::string(e.what()) + advice);
        }
      }
      difference = input_difference(was, it->second);
    }
    if (!difference.empty())
      throw ConfigError(head + " has changed since the run in " + run_dir + " read it: " + difference + advice);
  }
}

void check_inputs_on_disk(const TrainConfig& cfg) {
  const fs::path config_path = fs::path(cfg.out) / kConfigFile;
  std::error_code ec;
  if (!fs::exists(config_path, ec)) return;  // reported by the resume itself ("holds no run")
  nlohmann::json stored;
  try {
    stored = read_json_file(config_path);
  } catch (const nlohmann::json::exception&) {
    return;  // reported by the resume itself, with the parser's message
  }
  const auto recorded = stored.is_object() ? stored.find("inputs") : stored.end();
  if (!stored.is_object() || recorded == stored.end()) return;
  for (const data::InputFile& was : recorded_inputs(*recorded, config_path.string())) {
    std::error_code ec;
    const fs::file_status status = fs::status(was.path, ec);
    const std::string head =
        flag_of(was.setting) + ": " + was.path + ", which the run in " + cfg.out + " was trained on, ";
    if (fs::is_directory(status)) throw ConfigError(head + "is a directory now" + kInputAdvice);
    if (fs::exists(status) && !fs::is_regular_file(status))
      throw ConfigError(head + "is not a regular file now (a FIFO, socket or device)" + kInputAdvice);
    const std::uint64_t size = fs::file_size(was.path, ec);
    check_size(cfg, was, ec ? nullptr : &size);
  }
}

std::string check_same_inputs(const TrainConfig& cfg, const nlohmann::json& stored_config,
                              const std::vector<data::InputFile>& current) {
  const std::string config_path = (fs::path(cfg.out) / kConfigFile).string();
  const auto recorded = stored_config.find("inputs");
  if (recorded == stored_config.end()) {
    std::string flags;
    for (const data::InputFile& f : current) {
      const nlohmann::json value = get_setting(cfg, f.setting);
      const std::string path = value.is_string() ? value.get<std::string>() : "";
      if (!path.empty() && fs::path(path).is_relative())
        throw ConfigError(flag_of(f.setting) + ": " + config_path + " names the file by the relative path '" + path +
                          "' and records no fingerprint of it (written by an older xgrad), so which file the run was "
                          "trained on cannot be told from this working directory; put the file's absolute path in its "
                          "place in config.json to resume");
      if (flags.find(flag_of(f.setting)) == std::string::npos)
        flags += (flags.empty() ? "" : ", ") + flag_of(f.setting);
    }
    if (current.empty()) return "";
    return config_path + " records no fingerprint of " + flags +
           " (written by an older xgrad): cannot check that the run goes on with the files it started with; "
           "recording them now";
  }
  const std::vector<data::InputFile> stored = recorded_inputs(*recorded, config_path);
  auto find = [](const std::vector<data::InputFile>& files, const std::string& path) {
    return std::find_if(files.begin(), files.end(), [&](const data::InputFile& f) { return f.path == path; });
  };
  for (const data::InputFile& was : stored) {
    const auto now = find(current, was.path);
    check_size(cfg, was, now == current.end() ? nullptr : &now->size);
    const std::string difference = input_difference(was, *now);
    if (!difference.empty())
      throw ConfigError(flag_of(was.setting) + ": " + was.path + " has changed since the run in " + cfg.out +
                        " started: " + difference + kInputAdvice);
  }
  for (const data::InputFile& now : current)
    if (find(stored, now.path) == stored.end())
      throw ConfigError(flag_of(now.setting) + ": " + now.path + " is read now but was not when the run in " + cfg.out +
                        " started" + kInputAdvice);
  return "";
}

void check_writable(const fs::path& dir) {
  // A directory can exist and still refuse files (permissions, read-only mount): found out before training.
  const fs::path probe = dir / (".xgrad-write-test-" + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw ConfigError("--out: run directory " + dir.string() + " is not writable: " + std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

void prepare_run_directory(const TrainConfig& cfg, RunLock& lock) {
  const fs::path dir(cfg.out);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw ConfigError("--out: cannot create run directory " + dir.string() + ": " + ec.message());
  if (!lock.held()) lock.acquire(dir, true);
  check_writable(dir);
  if (cfg.overwrite) {
    for (const auto& f : run_file_names()) fs::remove(dir / f, ec);
    remove_event_files(dir);  // the replaced run's curves, under whatever time and host they were named
  }
  // A stale summary would mark a run that is being continued as finished (xgrad sweep skips finished runs).
  if (cfg.resume) fs::remove(dir / kSummaryFile, ec);
  // Temporary files of atomic writes cut short by a kill.
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 1 && name[0] == '.' && name.find(".tmp-") != std::string::npos) fs::remove(entry.path(), ec);
  }
}

std::unique_ptr<MetricsLog> open_metrics(const fs::path& dir, const std::vector<std::string>& columns, bool resume,
                                         std::size_t rows) {
  const fs::path path = dir / kMetricsFile;
  std::error_code ec;
  if (resume && rows > 0 && !fs::exists(path, ec))
    throw std::runtime_error("cannot resume: " + path.string() + " is missing but the checkpoint is at step " +
                             std::to_string(rows) + " (start over with --overwrite)");
  // With no row to keep (a resume that starts over from step 0), what the file holds does not matter: a disk that
  // filled up before its header was whole leaves it empty or cut.
  if (!resume || rows == 0 || !fs::exists(path, ec)) return std::make_unique<MetricsLog>(path.string(), columns);
  const MetricsPrefix prefix = read_metrics_prefix(path.string(), columns, rows);
  const fs::path tmp = dir / ".metrics.csv.tmp-resume";
  std::unique_ptr<MetricsLog> log;
  try {
    log = std::make_unique<MetricsLog>(tmp.string(), columns);
    for (std::size_t i = 0; i < prefix.rows.size(); ++i) log->write(prefix.rows[i], prefix.empty[i]);
  } catch (const std::runtime_error& e) {  // a full disk: the old file stays as it was
    log.reset();
    fs::remove(tmp, ec);
    throw std::runtime_error("cutting " + path.string() + " back to its first " + std::to_string(rows) +
                             " rows failed (" + e.what() + "); the file is left as it was");
  }
  std::ifstream in(tmp, std::ios::binary);
  const std::string rewritten((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (rewritten != prefix.text) {
    fs::remove(tmp, ec);
    throw std::runtime_error(path.string() + ": rewriting its first " + std::to_string(rows) +
                             " rows did not reproduce them byte for byte; cannot resume");
  }
  fs::rename(tmp, path);  // the open log now writes to metrics.csv
  return log;
}

std::size_t count_metrics_rows(const fs::path& dir) {
  std::size_t rows = 0;
  std::ifstream in(dir / kMetricsFile);
  std::string line;
  while (std::getline(in, line))
    if (!in.eof()) ++rows;         // complete lines only
  return rows > 0 ? rows - 1 : 0;  // the header
}

bool metrics_complete(const fs::path& dir, std::size_t steps_done) {
  std::error_code ec;
  return fs::is_regular_file(dir / kMetricsFile, ec) && count_metrics_rows(dir) >= steps_done;
}

void write_json(const fs::path& path, const nlohmann::json& j) {
  nn::write_file_atomically(path.string(), j.dump(2) + "\n");
}

}  // namespace xgrad::train
