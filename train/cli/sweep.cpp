#include "train/cli/sweep.h"

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <fcntl.h>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nn/optim.h"
#include "train/number_format.h"
#include "train/settings.h"
#include "train/trainer.h"

extern char** environ;

namespace xgrad::train {

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

// What a run directory holds: nothing (or an unreadable run, to be redone), this very run finished, this run cut
// short (to be redone), or a run with other settings (refused: a sweep never silently replaces another's results).
enum class OnDisk { none, complete, partial, other };

OnDisk on_disk(const TrainConfig& c, std::string* differing_key) {
  const fs::path dir(c.out);
  if (!fs::exists(dir / kConfigFile)) return OnDisk::none;
  nlohmann::json config;
  try {
    std::ifstream in(dir / kConfigFile);
    config = nlohmann::json::parse(in);
  } catch (const std::exception&) {
    return OnDisk::partial;  // a config.json cut short by a kill: the run never really started
  }
  try {
    config = canonical_config_json(config, (dir / kConfigFile).string());
  } catch (const std::exception&) {
    return OnDisk::partial;
  }
  const nlohmann::json want = c.to_json();
  for (auto& [key, value] : want.items()) {
    const Setting* declared = find_setting(key);
    // Where the run is written and how it reports progress do not make it another run.
    if (declared && declared->resumable && declared->role == Setting::Role::record) continue;
    if (config.contains(key) && config.at(key) != value) {
      if (differing_key) *differing_key = key;
      return OnDisk::other;
    }
  }
  try {
    std::ifstream in(dir / kSummaryFile);
    if (!in) return OnDisk::partial;
    RunSummary::from_json(nlohmann::json::parse(in));
    return OnDisk::complete;
  } catch (const std::exception&) {
    return OnDisk::partial;  // unreadable summary: redo the run
  }
}

pid_t spawn(const std::string& exe, const std::vector<std::string>& args, const std::string& log_path) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (auto& s : args) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // A child's console output goes to its own log: parallel runs would interleave on the terminal.
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + exe + ": " + std::strerror(rc));
  return pid;
}

void write_index(const SweepConfig& cfg, const std::vector<SweepRun>& runs) {
  nlohmann::json j;
  j["base"] = cfg.base.to_json();
  j["base"].erase("out");
  j["grid"] = nlohmann::json::object();
  for (const GridAxis& axis : cfg.grid) j["grid"][axis.key] = axis.values;
  j["runs"] = nlohmann::json::array();
  for (const auto& r : runs)
    j["runs"].push_back({{"name", r.name},
                         {"dir", fs::relative(r.config.out, cfg.out).string()},
                         {"status", r.status},
                         {"config_file", fs::relative(run_config_path(cfg, r.name), cfg.out).string()},
                         {"d_k", r.config.head_size()},
                         {"scale", r.config.scale},
                         {"grid", r.grid},
                         {"optimizer", r.config.optimizer},
                         {"lr", r.config.lr},
                         {"seed", r.config.seed},
                         {"final_loss", (r.status == "complete" || r.status == "skipped") && std::isfinite(r.final_loss)
                                            ? nlohmann::json(r.final_loss)
                                            : nlohmann::json()},
                         {"diverged_step", r.diverged_step},
                         {"seconds", r.seconds}});
  const fs::path path = fs::path(cfg.out) / "sweep.json", tmp = fs::path(cfg.out) / "sweep.json.tmp";
  {
    std::ofstream out(tmp);
    out << j.dump(2) << "\n";
    if (!out) throw std::runtime_error("writing " + tmp.string() + " failed");
  }
  fs::rename(tmp, path);
}

std::string clock(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  return s >= 60 ? fmt::format("{}m{:02}s", s / 60, s % 60) : fmt::format("{}s", s);
}

std::atomic<int> g_stop_signal{0};
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }

}  // namespace

std::vector<SweepRun> plan_sweep(const SweepConfig& cfg) {
  require_unique(cfg.d_ks, "--d-k");
  require_unique(cfg.seeds, "--seeds");
  std::vector<std::string> arm_names;
  for (auto& a : cfg.arms) arm_names.push_back(fmt::format("{}@{}", a.optimizer, a.lr));
  require_unique(cfg.scales, "--scale");
  require_unique(arm_names, "--arms");
  if (cfg.jobs < 1 || cfg.jobs > 256) throw ConfigError("--jobs must be in [1, 256]");
  if (cfg.out.empty()) throw ConfigError("--out: a sweep directory is required");
  const auto points = grid_points(cfg.grid);
  // A setting given for the sweep is passed to the runs whose components read it (--momentum to the sgd arms); one
  // that no run reads is refused as it would be for a single run.
  std::set<std::string> read;
  std::vector<SweepRun> runs;
  for (auto d_k : cfg.d_ks) {
    if (d_k == 0 || d_k > 8192) throw ConfigError("--d-k: head sizes must be in [1, 8192], got " + std::to_string(d_k));
    for (const auto& scale : cfg.scales)
      for (const auto& arm : cfg.arms)
        for (const auto& point : points)
          for (auto seed : cfg.seeds) {
            SweepRun r;
            r.config = cfg.base;
            set_setting(r.config, "scale", scale);
            set_setting(r.config, "optimizer", arm.optimizer);
            for (const auto& [key, value] : point) {
              set_setting(r.config, key, value);
              r.grid[key] = value;
            }
            r.name = run_name(d_k, scale, arm, r.grid, seed);
            r.config.d_k = d_k;
            r.config.lr = arm.lr;
            r.config.seed = seed;
            r.config.data_seed = cfg.base.data_seed + seed;  // seed k sees data stream k in every arm
            r.config.out = fs::absolute(fs::path(cfg.out) / "runs" / r.name).lexically_normal().string();
            nlohmann::json kept = nlohmann::json::object();
            for (const auto& [key, value] : r.config.settings.json().items())
              if (unread_setting_error(r.config, key).empty()) {
                kept[key] = value;
                read.insert(key);
              }
            r.config.settings = SettingValues(kept);
            runs.push_back(std::move(r));
          }
  }
  for (const auto& [key, value] : cfg.base.settings.json().items())
    if (!read.count(key)) {
      TrainConfig first = cfg.base;
      if (!runs.empty()) first = runs.front().config;
      first.settings.set(key, value);
      throw ConfigError(unread_setting_error(first, key));
    }
  for (const SweepRun& r : runs) r.config.validate();
  return runs;
}

std::vector<SweepRun> run_sweep(const SweepConfig& cfg, const std::function<void(const std::string&)>& progress) {
  std::vector<SweepRun> runs = plan_sweep(cfg);
  std::error_code ec;
  // A sweep directory holds sweep.json and runs/; one with a single run's files is an `xgrad train` run, which a
  // sweep must not mix its runs into.
  const fs::path out(cfg.out);
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    throw ConfigError("--out: " + cfg.out + " exists and is not a directory");
  if (!fs::exists(out / "sweep.json", ec))
    for (const std::string& f : run_file_names())
      if (fs::exists(out / f, ec))
        throw ConfigError("--out: " + cfg.out + " holds an `xgrad train` run (" + f +
                          "), not a sweep; give a new directory or an existing sweep's");
  fs::create_directories(fs::path(cfg.out) / "runs", ec);
  if (ec) throw ConfigError("--out: cannot create sweep directory " + cfg.out + ": " + ec.message());
  // Children start OpenBLAS with their own thread count: unset, the library starts a worker per core at load, which
  // then spins in sched_yield (6% of a core in a profile of a one-thread run) beside the other runs of the sweep.
  // The parent's own OpenBLAS is already loaded, so this affects only the children.
  if (!std::getenv("OPENBLAS_NUM_THREADS")) setenv("OPENBLAS_NUM_THREADS", std::to_string(cfg.base.threads).c_str(), 1);
  std::vector<std::size_t> todo;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    std::string key;
    const OnDisk state = on_disk(runs[i].config, &key);
    if (state == OnDisk::other)
      throw ConfigError("--out: " + runs[i].config.out + " holds a run with a different '" + key +
                        "'; use a new --out for a sweep with other settings");
    if (state == OnDisk::complete) {
      runs[i].status = "skipped";
      std::ifstream in(fs::path(runs[i].config.out) / kSummaryFile);
      const RunSummary s = RunSummary::from_json(nlohmann::json::parse(in));
      runs[i].final_loss = s.final_loss;
      runs[i].diverged_step = s.diverged_step;
    } else {
      runs[i].config.overwrite = true;  // a run cut short earlier starts over
      todo.push_back(i);
    }
  }
  write_index(cfg, runs);
  if (progress && todo.size() < runs.size())
    progress(fmt::format("sweep: {} of {} runs already complete, skipped", runs.size() - todo.size(), runs.size()));

  struct sigaction action {}, old_int {}, old_term {}, old_hup {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  g_stop_signal = 0;
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);
  sigaction(SIGHUP, &action, &old_hup);

  std::map<pid_t, std::size_t> running;
  std::map<pid_t, std::chrono::steady_clock::time_point> started;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  auto stop_children = [&] {
    for (auto& [pid, i] : running) kill(pid, SIGTERM);
    for (auto& [pid, i] : running) {
      waitpid(pid, nullptr, 0);
      runs[i].status = "interrupted";
    }
    running.clear();
  };
  std::size_t next = 0, done = 0;
  double run_seconds = 0;
  try {
    while (done < todo.size()) {
      if (next >= todo.size() && running.empty()) break;
      while (next < todo.size() && running.size() < static_cast<std::size_t>(cfg.jobs) && !g_stop_signal) {
        SweepRun& r = runs[todo[next]];
        ++next;
        try {
          if (fs::exists(r.config.out, ec) && !fs::is_directory(r.config.out, ec))
            throw std::runtime_error(r.config.out + " exists and is not a directory");
          fs::create_directories(r.config.out);
          // The child reads its settings from a file the sweep writes: every setting, declared or registered,
          // reaches it the same way, and a user can rerun the point with the same command.
          const std::string config_file = run_config_path(cfg, r.name);
          fs::create_directories(fs::path(config_file).parent_path());
          {
            std::ofstream out(config_file, std::ios::trunc);
            out << r.config.to_json().dump(2) << "\n";
            if (!out) throw std::runtime_error("writing " + config_file + " failed");
          }
          std::vector<std::string> args{"train", "--config", config_file};
          if (r.config.overwrite) args.push_back("--overwrite");
          const pid_t pid = spawn(cfg.executable, args, (fs::path(r.config.out) / "train.log").string());
          running[pid] = todo[next - 1];
          started[pid] = std::chrono::steady_clock::now();
        } catch (const std::exception& e) {  // this run cannot start; the others still can
          r.status = "failed";
          ++done;
          write_index(cfg, runs);
          spdlog::error("sweep: run {} FAILED to start: {}", r.name, e.what());
        }
      }
      if (g_stop_signal) break;
      if (running.empty()) continue;  // every run left failed to start: nothing to wait for
      int status = 0;
      const pid_t pid = waitpid(-1, &status, 0);
      if (pid < 0) {
        if (errno == EINTR) continue;
        throw std::runtime_error(std::string("waitpid failed: ") + std::strerror(errno));
      }
      auto it = running.find(pid);
      if (it == running.end()) continue;
      SweepRun& r = runs[it->second];
      running.erase(it);
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started[pid]).count();
      run_seconds += r.seconds;
      ++done;
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      const fs::path summary_path = fs::path(r.config.out) / kSummaryFile;
      if ((code == 0 || code == 3) && fs::exists(summary_path)) {
        std::ifstream in(summary_path);
        const RunSummary s = RunSummary::from_json(nlohmann::json::parse(in));
        r.status = s.diverged ? "diverged" : "complete";
        r.diverged_step = s.diverged_step;
        r.final_loss = s.final_loss;
      } else {
        r.status = "failed";
      }
      write_index(cfg, runs);
      if (progress) {
        const double per_run = run_seconds / static_cast<double>(done);
        const double eta = per_run * static_cast<double>(todo.size() - done) / static_cast<double>(cfg.jobs);
        std::string what = r.status == "diverged"   ? fmt::format("diverged at step {}", r.diverged_step)
                           : r.status == "failed" ? fmt::format("FAILED (exit {}; see {}/train.log)", code, r.config.out)
                                                  : "final loss " + format_number(r.final_loss, 4);
        progress(fmt::format("sweep: {}/{} runs done, elapsed {}, ETA {} | {}: {}", done, todo.size(), clock(elapsed()),
                             clock(eta), r.name, what));
      }
    }
  } catch (...) {
    stop_children();
    write_index(cfg, runs);
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    sigaction(SIGHUP, &old_hup, nullptr);
    throw;
  }
  stop_children();
  write_index(cfg, runs);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  sigaction(SIGHUP, &old_hup, nullptr);
  if (g_stop_signal) {
    if (progress) progress("sweep: interrupted; run the same command again to resume (complete runs are skipped)");
    raise(g_stop_signal);
  }
  return runs;
}

}  // namespace xgrad::train
