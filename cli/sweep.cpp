#include "cli/sweep.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "nn/optim.h"
#include "platform/atomic_file.h"
#include "platform/environment.h"
#include "platform/signals.h"
#include "train/json_file.h"
#include "train/number_format.h"
#include "train/run_directory.h"
#include "train/settings.h"
#include "train/shell_quote.h"
#include "train/trainer.h"

extern char** environ;

namespace xgrad::cli {
using train::ConfigError;
using train::kConfigFile;
using train::kSummaryFile;
using train::parse_json;
using train::refuse_linked_file;
using train::RunSummary;
using train::TrainConfig;

namespace fs = std::filesystem;

Arm parse_arm(const std::string& text) {
  const auto at = text.find('@');
  const std::string form = " (form: optimizer@lr, e.g. sgd@0.1 or adamw@0.003; optimizers: " +
                           nn::OptimizerRegistry::instance().joined_names() + ")";
  if (at == std::string::npos) throw ConfigError("--arms: '" + text + "' has no '@'" + form);
  Arm arm{text.substr(0, at), 0.0};
  if (!nn::OptimizerRegistry::instance().find(arm.optimizer))
    throw ConfigError("--arms: unknown optimizer '" + arm.optimizer + "'" + form);
  const std::string lr = text.substr(at + 1);
  char* end = nullptr;
  arm.lr = std::strtod(lr.c_str(), &end);
  if (lr.empty() || *end != '\0' || !(arm.lr > 0) || !std::isfinite(arm.lr))
    throw ConfigError("--arms: learning rate '" + lr + "' in '" + text + "' must be a finite number > 0" + form);
  return arm;
}

std::string run_config_path(const SweepConfig& config, const std::string& name) {
  return (fs::path(config.out) / "configs" / (name + ".json")).string();
}

namespace {

// A grid value as it appears in a run's name: the flag's text, with characters a directory name should not hold
// replaced.
std::string name_part(const nlohmann::json& value) {
  std::string text = setting_value_text(value);
  for (char& ch : text)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '_' && ch != '-') ch = '_';
  return text;
}

std::string run_name(std::size_t d_k, const std::string& scale, const Arm& arm, const nlohmann::json& grid,
                     std::uint64_t seed) {
  std::string axes;
  for (const auto& [key, value] : grid.items()) axes += "-" + key + name_part(value);
  return fmt::format("dk{}-{}-{}-lr{}{}-s{}", d_k, scale, arm.optimizer, arm.lr, axes, seed);
}

// Every combination of the grid axes' values, the last axis varying fastest; one empty combination without axes.
std::vector<std::vector<std::pair<std::string, nlohmann::json>>> grid_points(const std::vector<GridAxis>& grid) {
  std::vector<std::vector<std::pair<std::string, nlohmann::json>>> points{{}};
  for (const GridAxis& axis : grid) {
    std::vector<std::vector<std::pair<std::string, nlohmann::json>>> next;
    for (const auto& point : points)
      for (const auto& value : axis.values) {
        auto p = point;
        p.emplace_back(axis.key, value);
        next.push_back(std::move(p));
      }
    points = std::move(next);
  }
  return points;
}

template <class V>
void require_unique(const V& values, const std::string& flag) {
  if (values.empty()) throw ConfigError(flag + ": give at least one value");
  std::set<typename V::value_type> seen;
  for (const auto& v : values)
    if (!seen.insert(v).second) throw ConfigError(flag + ": " + fmt::format("{}", v) + " is given twice");
}

}  // namespace

OnDisk on_disk(const TrainConfig& c, std::string* differing_key) {
  const fs::path dir(c.out);
  if (!fs::exists(dir / kConfigFile)) return OnDisk::none;
  nlohmann::json config;
  try {
    config = train::read_json_file(dir / kConfigFile);
  } catch (const std::exception&) {
    return OnDisk::partial;  // a config.json cut short by a kill: the run never really started
  }
  try {
    config = train::canonical_config_json(config, (dir / kConfigFile).string());
  } catch (const std::exception&) {
    return OnDisk::partial;
  }
  const std::string conflict = train::first_conflicting_setting(config, c);
  if (!conflict.empty()) {
    if (differing_key) *differing_key = conflict;
    return OnDisk::other;
  }
  // A summary cut short: the run is continued (or redone) as if it had none; one no trainer writes is refused.
  if (const std::optional<RunSummary> s = train::read_run_summary(dir))
    // A metrics.csv deleted or cut short since: redone, as compare could not read the run.
    return train::metrics_complete(dir, s->steps_done) ? OnDisk::complete : OnDisk::partial;
  std::error_code ec;
  return fs::exists(dir / train::kCheckpointFile, ec) ? OnDisk::resumable : OnDisk::partial;
}

namespace {

// Starts `exe args` as a child that writes its output to `log_fd` and holds the run lock `lock_fd` (handed over,
// see RunLock). Between fork and exec only async-signal-safe calls. The stop signals are blocked across the fork
// and stay blocked in the child until its own handlers are in place (`xgrad train` unblocks them), so a stop
// request never lands in the sweep's handlers copied into the child; `caught` are reset to their default there.
pid_t spawn(const std::string& exe, const std::vector<std::string>& args, int log_fd, int lock_fd,
            const std::vector<int>& caught) {
  std::vector<std::string> words{exe};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const std::string prefix = std::string(train::kInheritedLockVariable) + "=";
  std::vector<std::string> variables{prefix + std::to_string(lock_fd)};
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, prefix.c_str(), prefix.size()) != 0) variables.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& v : variables) envp.push_back(v.data());
  envp.push_back(nullptr);
  const std::string exec_failed = "xgrad sweep: cannot start " + exe + "\n";

  sigset_t stop, before;
  sigemptyset(&stop);
  for (int sig : platform::kStopSignals) sigaddset(&stop, sig);
  pthread_sigmask(SIG_BLOCK, &stop, &before);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    for (int sig : caught) sigaction(sig, &default_action, nullptr);
    // SIGTERM is how the sweep stops its runs (stop_children, PR_SET_PDEATHSIG), so a run must act on it even when
    // the sweep itself was started with SIGTERM ignored (`trap "" TERM` in a script); SIGPIPE is the sweep's own
    // business (see run_sweep).
    sigaction(SIGTERM, &default_action, nullptr);
    sigaction(SIGPIPE, &default_action, nullptr);
    // SIGTERM when the sweep dies, however it dies (SIGKILL included): the run checkpoints and exits. A sweep that
    // died before this line is no longer the parent.
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) _exit(128 + SIGTERM);
    if (dup2(log_fd, STDOUT_FILENO) < 0 || dup2(log_fd, STDERR_FILENO) < 0 || fcntl(lock_fd, F_SETFD, 0) != 0)
      _exit(127);
    execve(exe.c_str(), argv.data(), envp.data());
    const ssize_t ignored = write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
    (void)ignored;
    _exit(127);
  }
  const int fork_error = errno;
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (pid < 0) throw std::runtime_error("cannot start " + exe + ": " + std::strerror(fork_error));
  return pid;
}

// sweep.json's run entries that are not runs of this sweep (an earlier sweep into the same directory with other
// seeds, scales, arms or grid values): kept in the index, so that it lists every run in runs/.
nlohmann::json earlier_entries(const nlohmann::json& index, const std::vector<SweepRun>& runs) {
  nlohmann::json kept = nlohmann::json::array();
  if (!index.is_object() || !index.contains("runs") || !index.at("runs").is_array()) return kept;
  std::set<std::string> names;
  for (const SweepRun& r : runs) names.insert(r.name);
  for (const nlohmann::json& entry : index.at("runs"))
    if (entry.is_object() && entry.contains("name") && entry.at("name").is_string() &&
        !names.count(entry.at("name").get<std::string>()))
      kept.push_back(entry);
  return kept;
}

// Refuses a sweep into a directory whose sweep.json (`index`) records other settings for its runs: runs of two
// settings in one runs/ would be compared as one experiment. Settings that only say how a run is recorded or
// executed may differ, as may the seeds, scales, head sizes, arms and grid values (runs added to the sweep).
// The command that wrote a sweep directory: "xgrad experiment --preset dk --quick", or "xgrad sweep".
std::string sweep_command(const nlohmann::json& preset) {
  if (preset.is_null()) return "xgrad sweep";
  if (!preset.is_object() || !preset.contains("name") || !preset.at("name").is_string())
    return "a preset recorded as " + preset.dump();
  const auto quick = preset.find("quick");
  return "xgrad experiment --preset " + preset.at("name").get<std::string>() +
         (quick != preset.end() && *quick == true ? " --quick" : "");
}

void check_same_sweep(const SweepConfig& cfg, const nlohmann::json& index) {
  if (!index.is_object() || !index.contains("base") || !index.at("base").is_object()) return;
  // One preset's grid (full or --quick) per directory: its report sections are computed for that grid, and
  // sweep.json records one preset.
  const nlohmann::json was_preset = index.contains("preset") ? index.at("preset") : nlohmann::json();
  const nlohmann::json now_preset =
      cfg.preset.empty() ? nlohmann::json() : nlohmann::json{{"name", cfg.preset}, {"quick", cfg.preset_quick}};
  if (sweep_command(was_preset) != sweep_command(now_preset))
    throw ConfigError("--out: " + cfg.out + " holds the sweep of `" + sweep_command(was_preset) + "` (this one: `" +
                      sweep_command(now_preset) + "`); use a new --out for another preset or grid");
  const nlohmann::json& was = index.at("base");
  nlohmann::json now = cfg.base.to_json();
  now.erase("out");
  for (const auto& [key, value] : now.items()) {
    const Setting* declared = train::find_setting(key);
    if (declared && declared->resumable && declared->role == Setting::Role::record) continue;
    if (was.contains(key) && was.at(key) != value) {
      auto shown = [](const nlohmann::json& v) {  // an empty text setting (--eval-n-pairs) is one not given
        const std::string text = setting_value_text(v);
        return text.empty() ? std::string("not set") : text;
      };
      throw ConfigError("--out: " + cfg.out + " holds a sweep with " + train::flag_of(key) + " " + shown(was.at(key)) +
                        " (this one: " + shown(value) + "); use a new --out for a sweep with other settings");
    }
  }
  std::set<std::string> axes_was, axes_now;
  if (index.contains("grid") && index.at("grid").is_object())
    for (const auto& [key, values] : index.at("grid").items()) axes_was.insert(key);
  for (const GridAxis& axis : cfg.grid) axes_now.insert(axis.key);
  if (axes_was != axes_now)
    throw ConfigError(
        fmt::format("--out: {} holds a sweep over --grid {} (this one: {}); use a new --out for a sweep "
                    "over other axes",
                    cfg.out, axes_was.empty() ? "(none)" : fmt::format("{}", fmt::join(axes_was, ",")),
                    axes_now.empty() ? "(none)" : fmt::format("{}", fmt::join(axes_now, ","))));
}

void write_index(const SweepConfig& cfg, const std::vector<SweepRun>& runs, const nlohmann::json& earlier) {
  nlohmann::json j;
  j["base"] = cfg.base.to_json();
  j["base"].erase("out");
  j["grid"] = nlohmann::json::object();
  for (const GridAxis& axis : cfg.grid) j["grid"][axis.key] = axis.values;
  if (!cfg.preset.empty()) j["preset"] = {{"name", cfg.preset}, {"quick", cfg.preset_quick}};
  j["runs"] = nlohmann::json::array();
  for (const auto& r : runs)
    j["runs"].push_back(
        {{"index", r.index},
         {"name", r.name},
         {"dir", fs::relative(r.config.out, cfg.out).string()},
         {"status", enum_name(train::kSweepStatusNames, r.status)},
         {"pid", r.status == train::SweepStatus::running ? nlohmann::json(r.pid) : nlohmann::json()},
         {"config_file", fs::relative(run_config_path(cfg, r.name), cfg.out).string()},
         {"d_k", r.config.head_size()},
         {"scale", r.config.model.scale},
         {"grid", r.grid},
         {"optimizer", r.config.optimizer},
         {"lr", r.config.lr},
         {"seed", r.config.seed},
         {"final_loss", (r.status == train::SweepStatus::complete || r.status == train::SweepStatus::skipped) &&
                                std::isfinite(r.final_loss)
                            ? nlohmann::json(r.final_loss)
                            : nlohmann::json()},
         {"diverged_step", r.diverged_step},
         {"seconds", r.seconds},
         {"config", r.config.to_json()}});
  for (const nlohmann::json& entry : earlier) j["runs"].push_back(entry);
  // In index order: entry i of the list is grid point i, the number a Slurm array task or `sweep run-one` is given.
  std::stable_sort(j["runs"].begin(), j["runs"].end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a.value("index", std::size_t{0}) < b.value("index", std::size_t{0});
  });
  // Written whole under a name of this process's own and renamed: a link planted at the index or beside it is
  // replaced, never written through.
  platform::write_file_atomically(fs::path(cfg.out) / "sweep.json", j.dump(2) + "\n");
}

std::string clock(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  return s >= 60 ? fmt::format("{}m{:02}s", s / 60, s % 60) : fmt::format("{}s", s);
}

std::atomic<int> g_stop_signal{0};
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }

// The sweep's handlers for the stop signals the user did not ignore, for as long as it runs; the dispositions
// before are restored when it ends.
class StopHandlers {
 public:
  StopHandlers() {
    g_stop_signal = 0;
    for (int sig : platform::kStopSignals) {
      struct sigaction before {};
      if (platform::catch_unless_ignored(sig, on_stop_signal, 0, &before)) replaced_.emplace_back(sig, before);
    }
  }
  ~StopHandlers() {
    for (const auto& [sig, before] : replaced_) sigaction(sig, &before, nullptr);
  }
  StopHandlers(const StopHandlers&) = delete;
  StopHandlers& operator=(const StopHandlers&) = delete;
  std::vector<int> caught() const {
    std::vector<int> signals;
    for (const auto& entry : replaced_) signals.push_back(entry.first);
    return signals;
  }

 private:
  std::vector<std::pair<int, struct sigaction>> replaced_;
};

bool is_stop_signal(int sig) {
  for (int s : platform::kStopSignals)
    if (s == sig) return true;
  return false;
}

// Sets r's status from how its child ended (wait status `status`); returns what the progress line says about it.
std::string record_end(SweepRun& r, int status, bool stopping) {
  const fs::path dir(r.config.out);
  std::error_code ec;
  r.pid = 0;
  // A run directory deleted while its run trained takes the log with it: said so, instead of naming a missing file.
  const std::string see = fs::exists(dir / "train.log", ec) ? "see " + train::shell_quote((dir / "train.log").string())
                                                            : "its directory " + train::shell_quote(dir.string()) +
                                                                  " is gone, and its train.log with it";
  const bool finished = WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 3);
  if (finished && fs::exists(dir / kSummaryFile, ec)) {
    const RunSummary s = RunSummary::read(dir);
    r.status = s.diverged ? train::SweepStatus::diverged : train::SweepStatus::complete;
    r.diverged_step = s.diverged_step;
    r.final_loss = s.final_loss;
    return s.diverged ? fmt::format("diverged at step {}", s.diverged_step)
                      : "final loss " + train::format_number(s.final_loss, 4);
  }
  // `xgrad train` ends by the stop signal it got, re-raised after writing its checkpoint. One that a stop signal ended
  // before its handlers were in place wrote none: it is redone (or resumed from an earlier checkpoint) by a rerun,
  // and counts as interrupted when the sweep was stopping.
  const int stop = WIFSIGNALED(status) && is_stop_signal(WTERMSIG(status)) ? WTERMSIG(status) : 0;
  if (stop && (stopping || fs::exists(dir / train::kCheckpointFile, ec))) {
    r.status = train::SweepStatus::interrupted;
    return "interrupted by " + platform::signal_name(stop) + "; resumable (run the same sweep again)";
  }
  r.status = train::SweepStatus::failed;
  if (WIFSIGNALED(status)) return "FAILED (killed by " + platform::signal_name(WTERMSIG(status)) + "; " + see + ")";
  return fmt::format("FAILED (exit {}; {})", WEXITSTATUS(status), see);
}

// Whether process `pid` is stopped (state T or t in /proc/PID/stat): it holds its run's lock but trains no further
// until it gets SIGCONT.
bool process_stopped(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto name_end = stat.rfind(')');  // the command name, in parentheses, may hold anything
  return name_end != std::string::npos && name_end + 2 < stat.size() &&
         (stat[name_end + 2] == 'T' || stat[name_end + 2] == 't');
}

// Starts run r: takes its lock (or finds it held: then r is "running" in another process, left alone, and the
// result is 0), writes its config file, opens its train.log (appended to when resuming, so the earlier sessions'
// output stays) and starts `xgrad train` holding both.
pid_t start_run(const SweepConfig& cfg, SweepRun& r, bool resume, const std::vector<int>& caught) {
  std::error_code ec;
  if (fs::exists(r.config.out, ec) && !fs::is_directory(r.config.out, ec))
    throw std::runtime_error(r.config.out + " exists and is not a directory");
  fs::create_directories(r.config.out);
  train::RunLock lock;
  std::string holder;
  if (!lock.try_acquire(r.config.out, holder)) {
    r.status = train::SweepStatus::running;
    r.pid = std::strtol(holder.c_str(), nullptr, 10);
    r.stopped = r.pid > 0 && process_stopped(r.pid);
    return 0;
  }
  // The child reads its settings from the file the manifest step wrote: every setting, declared or registered,
  // reaches it the same way, and a user can rerun the point with the same command.
  const std::string config_file = run_config_path(cfg, r.name);
  // A resumed run keeps its own settings (config.json), which the sweep checked to be these.
  std::vector<std::string> args{"train", "--config", config_file, "--overwrite"};
  if (resume) args = {"train", "--resume", r.config.out};
  // A child's console output goes to its own log: parallel runs would interleave on the terminal.
  const std::string log_path = (fs::path(r.config.out) / "train.log").string();
  const int log_fd = train::open_not_linked(log_path, O_WRONLY | O_CREAT | (resume ? O_APPEND : O_TRUNC));
  if (log_fd < 0) throw std::runtime_error("cannot open " + log_path + ": " + std::strerror(errno));
  pid_t pid = 0;
  try {
    pid = spawn(cfg.executable, args, log_fd, lock.descriptor(), caught);
  } catch (...) {
    ::close(log_fd);
    throw;
  }
  ::close(log_fd);
  lock.set_holder(pid);  // the child holds the lock from here; this process lets go of its copy
  lock.release();
  r.status = train::SweepStatus::running;
  r.pid = pid;
  return pid;
}

// Run r was left alone because another process held its lock; that process may have ended since (the orphan of a
// killed sweep writing its checkpoint): r's state is read again, so that the sweep's last line and sweep.json do not
// call an ended process running. Returns what the progress line says, "" when r is still held.
std::string recheck_left_alone(SweepRun& r) {
  train::RunLock lock;
  std::string holder;
  OnDisk state = OnDisk::none;
  try {
    if (!lock.try_acquire(r.config.out, holder)) {
      r.pid = std::strtol(holder.c_str(), nullptr, 10);
      r.stopped = r.pid > 0 && process_stopped(r.pid);
      return "";
    }
    state = on_disk(r.config, nullptr);
  } catch (const ConfigError&) {
    return "";  // the lock file cannot be opened now, or summary.json is refused: the state stays as it was seen
  }
  r.pid = 0;
  r.stopped = false;
  r.status = state == OnDisk::resumable ? train::SweepStatus::interrupted : train::SweepStatus::pending;
  if (state == OnDisk::complete) {
    try {
      const RunSummary s = RunSummary::read(r.config.out);
      r.status = s.diverged ? train::SweepStatus::diverged : train::SweepStatus::complete;
      r.final_loss = s.final_loss;
      r.diverged_step = s.diverged_step;
    } catch (const std::exception&) {
    }
  }
  return r.status == train::SweepStatus::complete
             ? "the other process has completed it since"
             : "the other process has ended since, leaving it " + enum_name(train::kSweepStatusNames, r.status) +
                   "; run the same sweep again to continue it";
}

using GridPoint = std::vector<std::pair<std::string, nlohmann::json>>;

// The checks of a sweep's flags before any run is formed: unique values, --jobs, --out, the --grid axes, and
// --jobs x --threads against the CPUs.
void check_sweep_flags(const SweepConfig& cfg) {
  require_unique(cfg.d_ks, "--d-k");
  require_unique(cfg.seeds, "--seeds");
  std::vector<std::string> arm_names;
  for (auto& a : cfg.arms) arm_names.push_back(fmt::format("{}@{}", a.optimizer, a.lr));
  require_unique(cfg.scales, "--scale");
  require_unique(arm_names, "--arms");
  if (cfg.jobs < 1 || cfg.jobs > 256) throw ConfigError("--jobs must be in [1, 256]");
  train::check_output_directory(cfg.out, "a sweep directory");
  // A setting that changes only how a run is recorded or executed makes runs that repeat each other as an axis.
  for (const GridAxis& axis : cfg.grid) {
    const Setting* declared = train::find_setting(axis.key);
    if (declared && declared->role == Setting::Role::record)
      throw ConfigError("--grid " + axis.key + ": " + train::flag_of(axis.key) +
                        " changes how a run is recorded or executed, "
                        "not what it computes, so its runs would repeat each other; give it once as " +
                        train::flag_of(axis.key));
  }
  // --threads above the CPUs is refused for a run (TrainConfig::validate); so is the same through parallel runs.
  const int cpus = platform::available_cpus();
  const char* allow = std::getenv("XGRAD_ALLOW_THREADS_ABOVE_CPUS");
  const std::size_t threads = static_cast<std::size_t>(cfg.jobs) * cfg.base.threads;
  if (cfg.runs_here && threads > static_cast<std::size_t>(cpus) && !(allow && std::string(allow) == "1"))
    throw ConfigError(
        fmt::format("--jobs: {} runs at a time of --threads {} each make {} threads, more than the {} "
                    "CPU{} this process may use (allowed: --jobs x --threads up to {}; set "
                    "XGRAD_ALLOW_THREADS_ABOVE_CPUS=1 to run anyway)",
                    cfg.jobs, cfg.base.threads, threads, cpus, cpus == 1 ? "" : "s", cpus));
}

// Refuses a run whose name an earlier run of the sweep already has (`named`: run name -> its index in `runs`).
void require_new_name(const SweepRun& r, const std::vector<SweepRun>& runs, std::map<std::string, std::size_t>& named) {
  const auto [same, fresh] = named.emplace(r.name, runs.size());
  if (!fresh) {
    std::string key = r.grid.empty() ? std::string() : r.grid.begin().key();
    for (const auto& [k, value] : r.grid.items())
      if (runs[same->second].grid.value(k, nlohmann::json()) != value) key = k;
    throw ConfigError("--grid " + key + ": the values " +
                      setting_value_text(runs[same->second].grid.value(key, nlohmann::json())) + " and " +
                      setting_value_text(r.grid.value(key, nlohmann::json())) + " give runs the same name " + r.name +
                      " (a name keeps only the letters, digits, '.', '_' and '-' of a value); give "
                      "values that differ in those");
  }
}

bool unread_only_readers_axis(const SweepConfig& cfg, const train::TrainConfig& point, const std::string& key) {
  for (const GridAxis& axis : cfg.grid)
    if (axis.key == key && axis.only_readers) return !train::unread_setting_error(point, key).empty();
  return false;
}

// A grid axis no run of a point reads would repeat that run under another name; a name must fit a directory.
void check_point_run(const SweepRun& r, const GridPoint& point) {
  auto is_core = [](const std::string& k) {
    return std::any_of(train::core_settings().begin(), train::core_settings().end(),
                       [&](const train::CoreSetting& c) { return c.setting.key == k; });
  };
  for (const auto& [key, value] : point)
    if (r.grid.contains(key) && (r.config.settings.contains(key) || is_core(key))) {
      const std::string unread = train::unread_setting_error(r.config, key);
      if (!unread.empty())
        throw ConfigError("--grid " + key + ": " + unread + "; an axis must change every run of the sweep " +
                          "(sweep the runs that read it on their own)");
    }
  if (r.name.size() > TrainConfig::kMaxFileNameBytes)
    throw ConfigError(
        fmt::format("--grid: the run name {} is {} bytes, more than the {} a directory name "
                    "may have; give fewer or shorter --grid values",
                    r.name, r.name.size(), TrainConfig::kMaxFileNameBytes));
}

// The rest of run `r`'s configuration: its d_k, lr, seeds, directory, absolute paths, and the settings it reads
// (added to `read`).
void finish_run(SweepRun& r, const SweepConfig& cfg, std::size_t d_k, const Arm& arm, std::uint64_t seed,
                std::set<std::string>& read) {
  r.config.model.d_k = d_k;
  r.config.lr = arm.lr;
  r.config.seed = seed;
  r.config.data_seed = cfg.base.data_seed + seed;  // seed k sees data stream k in every arm
  r.config.out = fs::absolute(fs::path(cfg.out) / "runs" / r.name).lexically_normal().string();
  // The runs read their files by absolute path: the config file the sweep writes for a run is read
  // relative to its own directory, and config.json records absolute paths.
  r.config = train::with_absolute_paths(r.config);
  nlohmann::json kept = nlohmann::json::object();
  for (const auto& [key, value] : r.config.settings.json().items())
    if (train::unread_setting_error(r.config, key).empty()) {
      kept[key] = value;
      read.insert(key);
    }
  r.config.settings = SettingValues(kept);
}

// A core setting only some runs read (--base-width: mup) goes to those, the others keep its default; given to a
// sweep none of whose runs read it, it is refused as a component setting is. So is a setting no run reads.
void refuse_unread_settings(const SweepConfig& cfg, std::vector<SweepRun>& runs, const std::set<std::string>& read) {
  for (const train::CoreSetting& c : train::core_settings()) {
    if (!c.unread || c.get(cfg.base) == c.setting.default_value) continue;
    bool any_reads = false;
    for (SweepRun& r : runs) {
      if (c.unread(r.config).empty())
        any_reads = true;
      else
        c.set(r.config, c.setting.default_value);
    }
    if (!any_reads) throw ConfigError(c.unread(runs.empty() ? cfg.base : runs.front().config));
  }
  for (const auto& [key, value] : cfg.base.settings.json().items())
    if (!read.count(key)) {
      TrainConfig first = cfg.base;
      if (!runs.empty()) first = runs.front().config;
      first.settings.set(key, value);
      throw ConfigError(train::unread_setting_error(first, key));
    }
}

}  // namespace

bool keeps_point(const SweepConfig& cfg, const train::TrainConfig& point, const nlohmann::json& grid) {
  for (const GridAxis& axis : cfg.grid)
    if (unread_only_readers_axis(cfg, point, axis.key) && !axis.values.empty() &&
        grid.value(axis.key, axis.values.front()) != axis.values.front())
      return false;
  return !cfg.keep || cfg.keep(point);
}

std::vector<SweepRun> plan_sweep(const SweepConfig& cfg) {
  check_sweep_flags(cfg);
  const auto points = grid_points(cfg.grid);
  // A setting given for the sweep is passed to the runs whose components read it (--momentum to the sgd arms); one
  // that no run reads is refused as it would be for a single run.
  std::set<std::string> read;
  std::vector<SweepRun> runs;
  std::map<std::string, std::size_t> named;  // run name -> its index in runs
  for (auto d_k : cfg.d_ks) {
    if (d_k == 0 || d_k > 8192) throw ConfigError("--d-k: head sizes must be in [1, 8192], got " + std::to_string(d_k));
    for (const auto& scale : cfg.scales)
      for (const auto& arm : cfg.arms)
        for (const auto& point : points)
          for (auto seed : cfg.seeds) {
            SweepRun r;
            r.config = cfg.base;
            train::set_setting(r.config, "scale", scale);
            train::set_setting(r.config, "optimizer", arm.optimizer);
            for (const auto& [key, value] : point) {
              train::set_setting(r.config, key, value);
              r.grid[key] = value;
            }
            TrainConfig point_config = r.config;
            point_config.model.d_k = d_k;
            point_config.lr = arm.lr;
            point_config.seed = seed;
            if (!keeps_point(cfg, point_config, r.grid)) continue;
            for (const GridAxis& axis : cfg.grid)
              if (unread_only_readers_axis(cfg, r.config, axis.key)) r.grid.erase(axis.key);
            r.name = run_name(d_k, scale, arm, r.grid, seed);
            require_new_name(r, runs, named);
            check_point_run(r, point);
            finish_run(r, cfg, d_k, arm, seed, read);
            runs.push_back(std::move(r));
          }
  }
  if (runs.empty())  // only a preset's filter leaves a grid without a run
    throw ConfigError("the preset keeps no run of this grid (" + grid_summary(cfg, 0) +
                      "): it pairs each head size with its own grid values; give head sizes among the preset's (see "
                      "xgrad experiment --help)");
  refuse_unread_settings(cfg, runs, read);
  for (SweepRun& r : runs) {
    r.config.threads_on_this_machine = cfg.runs_here;
    r.config.validate();
  }
  return runs;
}

std::string grid_summary(const SweepConfig& cfg, std::size_t planned) {
  std::vector<std::string> axes;
  std::size_t points = 1;
  auto add = [&](const std::string& name, const std::string& defaulted_as, const std::vector<std::string>& values) {
    const bool defaulted = cfg.axes_from_defaults.count(defaulted_as) > 0;
    axes.push_back(
        fmt::format("{} × {} ({}{})", name, values.size(), defaulted ? "default: " : "", fmt::join(values, ", ")));
    points *= values.size();
  };
  auto texts = [](const auto& values) {
    std::vector<std::string> out;
    for (const auto& v : values) out.push_back(fmt::format("{}", v));
    return out;
  };
  add("scale", "scale", cfg.scales);
  add("d_k", "d_k", texts(cfg.d_ks));
  std::vector<std::string> arms;
  for (const Arm& a : cfg.arms) arms.push_back(fmt::format("{}@{}", a.optimizer, a.lr));
  add("arms", "arms", arms);
  for (const GridAxis& axis : cfg.grid) {
    std::vector<std::string> values;
    for (const nlohmann::json& v : axis.values) values.push_back(setting_value_text(v));
    add(axis.key, "grid", values);
  }
  add("seed", "seed", texts(cfg.seeds));
  const std::string kept =
      planned == points ? "" : fmt::format(" ({} of {} points kept by the preset)", planned, points);
  return fmt::format("grid: {} = {} run{}{}", fmt::join(axes, " · "), planned, planned == 1 ? "" : "s", kept);
}

namespace {

// The sweep directory with its lock held, every run's state on disk known, the config files and the manifest written.
struct OpenedSweep {
  train::RunLock lock;
  nlohmann::json earlier = nlohmann::json::array();  // sweep.json entries of runs outside this plan
  std::vector<std::size_t> todo;                     // runs to train, in plan order
  std::vector<bool> resume;                          // per run: continue it from its checkpoint
};

// Gives each run its manifest index: the one `index` (an earlier sweep.json) records for its name, else the next free
// one, in plan order. Earlier entries without an index (an index written before manifests) get theirs first, in
// their order there, which is the plan order of the sweep that wrote them.
void assign_indices(std::vector<SweepRun>& runs, nlohmann::json& earlier, const nlohmann::json& index) {
  std::map<std::string, std::size_t> known;
  std::size_t next = 0;
  if (index.is_object() && index.contains("runs") && index.at("runs").is_array()) {
    for (const nlohmann::json& e : index.at("runs"))
      if (e.is_object() && e.contains("index") && e.at("index").is_number_unsigned() && e.contains("name") &&
          e.at("name").is_string()) {
        known[e.at("name").get<std::string>()] = e.at("index").get<std::size_t>();
        next = std::max(next, e.at("index").get<std::size_t>() + 1);
      }
    for (const nlohmann::json& e : index.at("runs"))
      if (e.is_object() && e.contains("name") && e.at("name").is_string() &&
          !known.count(e.at("name").get<std::string>()))
        known[e.at("name").get<std::string>()] = next++;
  }
  for (SweepRun& r : runs) {
    const auto it = known.find(r.name);
    r.index = it != known.end() ? it->second : next++;
  }
  for (nlohmann::json& e : earlier) e["index"] = known.at(e.at("name").get<std::string>());
}

void write_config_file(const SweepConfig& cfg, const SweepRun& r) {
  const std::string config_file = run_config_path(cfg, r.name);
  fs::create_directories(fs::path(config_file).parent_path());
  std::ofstream out(config_file, std::ios::trunc);
  out << r.config.to_json().dump(2) << "\n";
  if (!out) throw std::runtime_error("writing " + config_file + " failed");
}

// Before anything is written: configs/, runs/, a run's directory or a file the sweep writes in one (train.log, the
// lock, the run's own files) as a symbolic link would have the sweep write into whatever it points to; so would an
// experiment's explain/ and plots/, which its report writes after the runs.
void refuse_links_in_sweep(const SweepConfig& cfg, const std::vector<SweepRun>& runs) {
  const fs::path base = fs::absolute(cfg.out).lexically_normal();
  train::check_not_linked(base, base / "configs", "--out");
  if (!cfg.preset.empty())
    for (const char* dir : {"explain", "plots"}) train::check_not_linked(base, base / dir, "--out");
  for (const SweepRun& r : runs) {
    train::check_not_linked(base, r.config.out, "--out");
    const fs::path dir(r.config.out);
    for (const std::string& f : train::run_file_names()) refuse_linked_file(dir / f);
    refuse_linked_file(dir / "train.log");
    refuse_linked_file(dir / ".lock");
    refuse_linked_file(base / "configs" / (r.name + ".json"));
  }
}

void open_sweep(const SweepConfig& cfg, std::vector<SweepRun>& runs, OpenedSweep& opened,
                const std::function<void(const std::string&)>& progress, const std::string& start_line) {
  std::error_code ec;
  // A sweep directory holds sweep.json and runs/; one with a single run's files is an `xgrad train` run, which a
  // sweep must not mix its runs into.
  const fs::path out(cfg.out);
  train::check_output_directory(cfg.out, "a sweep directory");
  if (!fs::exists(out / "sweep.json", ec))
    for (const std::string& f : train::run_file_names())
      if (fs::exists(out / f, ec))
        throw ConfigError("--out: " + cfg.out + " holds an `xgrad train` run (" + f +
                          "), not a sweep; give a new directory or an existing sweep's");
  fs::create_directories(out, ec);
  if (ec) throw ConfigError("--out: cannot create sweep directory " + cfg.out + ": " + ec.message());
  std::string holder;
  if (!opened.lock.try_acquire(out, holder))
    throw ConfigError("--out: " + cfg.out + " is in use by another xgrad sweep (pid " + holder +
                      "); wait for it to end, or stop it, before sweeping into it again");
  refuse_links_in_sweep(cfg, runs);
  fs::create_directories(out / "runs", ec);
  if (ec) throw ConfigError("--out: cannot create sweep directory " + cfg.out + ": " + ec.message());
  if (progress && !start_line.empty()) {
    std::istringstream lines(start_line);
    for (std::string line; std::getline(lines, line);) progress(line);
  }
  nlohmann::json index;
  if (fs::exists(out / "sweep.json", ec)) {
    try {
      index = train::read_json_file(out / "sweep.json");  // refuses a FIFO or a device, naming it
    } catch (const nlohmann::json::exception&) {
      // an index cut short is rewritten from the runs; each run directory is still checked below
    }
    check_same_sweep(cfg, index);
    opened.earlier = earlier_entries(index, runs);
  }
  assign_indices(runs, opened.earlier, index);
  opened.resume.assign(runs.size(), false);
  std::map<std::string, data::InputFile> inputs_now;  // each input file hashed once
  std::string refused;                                // every refused run's reason, so that one reading fixes all
  for (std::size_t i = 0; i < runs.size(); ++i) {
    std::string key;
    OnDisk state = OnDisk::none;
    try {
      state = on_disk(runs[i].config, &key);
    } catch (const ConfigError& e) {
      refused += (refused.empty() ? "" : "\n") + std::string(e.what());
      continue;
    }
    // A run read its files' bytes of then: one on other bytes than those there now is not continued, skipped as
    // complete nor redone beside runs on the new bytes.
    if (state != OnDisk::none)
      train::check_run_inputs_unchanged(
          runs[i].config.out,
          "; put the original back to go on with this sweep, or sweep the new file into a "
          "new --out",
          inputs_now);
    if (state == OnDisk::other)
      throw ConfigError("--out: " + runs[i].config.out + " holds a run with a different " + key +
                        "; use a new --out for a sweep with other settings");
    if (state == OnDisk::complete) {
      runs[i].status = train::SweepStatus::skipped;
      const RunSummary s = RunSummary::read(runs[i].config.out);
      runs[i].final_loss = s.final_loss;
      runs[i].diverged_step = s.diverged_step;
    } else {
      opened.resume[i] = state == OnDisk::resumable;  // an interrupted run continues from its checkpoint
      opened.todo.push_back(i);
    }
  }
  if (!refused.empty()) throw ConfigError(refused);
  // The manifest comes first: every point's settings are on disk before any run starts, for any launcher.
  for (const SweepRun& r : runs) write_config_file(cfg, r);
  write_index(cfg, runs, opened.earlier);
}

// The children a sweep started and still waits for, and what it reports as each ends.
struct Children {
  Children(const SweepConfig& cfg, std::vector<SweepRun>& runs, const nlohmann::json& earlier,
           const std::function<void(const std::string&)>& progress, std::size_t todo)
      : cfg(cfg), runs(runs), earlier(earlier), progress(progress), todo(todo) {}
  const SweepConfig& cfg;
  std::vector<SweepRun>& runs;
  const nlohmann::json& earlier;
  const std::function<void(const std::string&)>& progress;
  std::size_t todo;  // the runs this sweep runs
  std::map<pid_t, std::size_t> running;
  std::map<pid_t, std::chrono::steady_clock::time_point> started;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  std::size_t done = 0;
  double run_seconds = 0;

  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }

  // Records the end of child `pid` (a wait status) and reports it.
  void finish(pid_t pid, int status) {
    const auto it = running.find(pid);
    if (it == running.end()) return;
    SweepRun& r = runs[it->second];
    running.erase(it);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started[pid]).count();
    run_seconds += r.seconds;
    ++done;
    const std::string what = record_end(r, status, g_stop_signal != 0);
    write_index(cfg, runs, earlier);
    if (progress) {
      const double per_run = run_seconds / static_cast<double>(done);
      const double eta = per_run * static_cast<double>(todo - done) / static_cast<double>(cfg.jobs);
      progress(fmt::format("sweep: {}/{} runs done, elapsed {}, ETA {} | {}: {}", done, todo, clock(elapsed()),
                           clock(eta), r.name, what));
    }
  }

  // SIGTERM to every child still running (each writes its checkpoint), then waits for them. A child stopped by
  // SIGSTOP (or Ctrl-Z on it alone) would never act on it: SIGCONT wakes it to do so.
  void stop_all() {
    std::vector<pid_t> pids;
    for (const auto& [pid, i] : running) pids.push_back(pid);
    for (pid_t pid : pids) {
      kill(pid, SIGTERM);
      kill(pid, SIGCONT);
    }
    for (pid_t pid : pids) {
      int status = 0;
      pid_t got = -1;
      do got = waitpid(pid, &status, 0);
      while (got < 0 && errno == EINTR);
      if (got == pid) finish(pid, status);
    }
  }
};

// Starts run `r` as a child; returns its pid, or 0 when no child of this sweep runs it (another process holds it,
// or it failed to start: the others still can).
pid_t start_point(const SweepConfig& cfg, SweepRun& r, bool resume, const std::vector<int>& caught,
                  const std::function<void(const std::string&)>& progress) {
  try {
    const pid_t pid = start_run(cfg, r, resume, caught);
    if (pid != 0) return pid;
    if (progress && r.stopped)
      progress(
          fmt::format("sweep: {} is held by a stopped process (pid {}); left alone: `kill -CONT {}` lets "
                      "it go on (or end it), then run the same sweep again",
                      r.name, r.pid, r.pid));
    else if (progress)
      progress(fmt::format("sweep: {} is still running (pid {}) in another process; left alone", r.name, r.pid));
  } catch (const std::exception& e) {
    r.status = train::SweepStatus::failed;
    spdlog::error("sweep: run {} FAILED to start: {}", r.name, e.what());
  }
  return 0;
}

// Runs another process held when the sweep began (not this sweep's children: those have all ended): what became
// of them.
void recheck_left_alone_runs(std::vector<SweepRun>& runs, const std::function<void(const std::string&)>& progress) {
  for (SweepRun& r : runs)
    if (r.status == train::SweepStatus::running) {
      const std::string what = recheck_left_alone(r);
      if (progress && !what.empty()) progress("sweep: " + r.name + " (left alone): " + what);
    }
}

}  // namespace

std::vector<SweepRun> write_sweep_manifest(const SweepConfig& cfg) {
  std::vector<SweepRun> runs = plan_sweep(cfg);
  OpenedSweep opened;
  open_sweep(cfg, runs, opened, nullptr, "");
  return runs;
}

SweepResult run_sweep(const SweepConfig& cfg, const std::function<void(const std::string&)>& progress,
                      const std::string& start_line) {
  SweepResult result;
  result.runs = plan_sweep(cfg);
  std::vector<SweepRun>& runs = result.runs;
  OpenedSweep opened;
  open_sweep(cfg, runs, opened, progress, start_line);
  // Children start OpenBLAS with their own thread count: unset, the library starts a worker per core at load, which
  // then spins in sched_yield (6% of a core in a profile of a one-thread run) beside the other runs of the sweep.
  // The parent's own OpenBLAS is already loaded, so this affects only the children.
  if (!std::getenv("OPENBLAS_NUM_THREADS")) setenv("OPENBLAS_NUM_THREADS", std::to_string(cfg.base.threads).c_str(), 1);
  const nlohmann::json& earlier = opened.earlier;
  const std::vector<std::size_t>& todo = opened.todo;
  const std::vector<bool>& resume = opened.resume;
  if (progress && todo.size() < runs.size())
    progress(fmt::format("sweep: {} of {} runs already complete, skipped", runs.size() - todo.size(), runs.size()));

  const StopHandlers handlers;
  const std::vector<int> caught = handlers.caught();
  Children children(cfg, runs, earlier, progress, todo.size());
  std::size_t next = 0;
  try {
    while (!g_stop_signal) {
      while (next < todo.size() && children.running.size() < static_cast<std::size_t>(cfg.jobs) && !g_stop_signal) {
        const std::size_t i = todo[next++];
        const pid_t pid = start_point(cfg, runs[i], resume[i], caught, progress);
        if (pid == 0) {
          ++children.done;
        } else {
          children.running[pid] = i;
          children.started[pid] = std::chrono::steady_clock::now();
        }
        write_index(cfg, runs, earlier);
      }
      if (children.running.empty() || g_stop_signal) break;
      int status = 0;
      const pid_t pid = waitpid(-1, &status, 0);
      if (pid < 0) {
        if (errno == EINTR) continue;
        throw std::runtime_error(std::string("waitpid failed: ") + std::strerror(errno));
      }
      children.finish(pid, status);
    }
  } catch (...) {
    children.stop_all();
    write_index(cfg, runs, earlier);
    throw;
  }
  children.stop_all();
  recheck_left_alone_runs(runs, progress);
  write_index(cfg, runs, earlier);
  result.stop_signal = g_stop_signal;
  return result;
}

std::string sweep_summary(const SweepResult& result, double seconds) {
  std::map<train::SweepStatus, std::size_t> count;
  std::vector<std::string> others, stopped;  // pids of runs another process is training, or holds stopped
  for (const SweepRun& r : result.runs) {
    ++count[r.status == train::SweepStatus::skipped ? train::SweepStatus::complete : r.status];
    if (r.status == train::SweepStatus::running) (r.stopped ? stopped : others).push_back(std::to_string(r.pid));
  }
  std::string parts;
  auto add = [&](train::SweepStatus status, const std::string& text) {
    if (count[status]) parts += fmt::format(", {} {}", count[status], text);
  };
  add(train::SweepStatus::diverged, "diverged");
  add(train::SweepStatus::interrupted, "interrupted (resumable)");
  add(train::SweepStatus::failed, "failed");
  if (!others.empty())
    parts += fmt::format(", {} still running in another process (pid {})", others.size(), fmt::join(others, ", "));
  if (!stopped.empty())
    parts += fmt::format(", {} held by a stopped process (pid {}; `kill -CONT` it or end it)", stopped.size(),
                         fmt::join(stopped, ", "));
  add(train::SweepStatus::pending, "not started");
  const std::size_t complete = count[train::SweepStatus::complete];
  if (result.stop_signal)
    return fmt::format("sweep interrupted by {}: {} of {} runs complete{}; run the same command again to resume",
                       platform::signal_name(result.stop_signal), complete, result.runs.size(), parts);
  return fmt::format("{} runs in {:.0f} s: {} complete{}", result.runs.size(), seconds, complete, parts);
}

int sweep_exit_code(const SweepResult& result) {
  if (result.stop_signal) return 128 + result.stop_signal;
  for (const SweepRun& r : result.runs)
    if (r.status != train::SweepStatus::complete && r.status != train::SweepStatus::skipped &&
        r.status != train::SweepStatus::diverged)
      return 1;
  return 0;
}

}  // namespace xgrad::cli
