#include "cli/sweep_cluster.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <thread>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/escape.h"
#include "common/file_name.h"
#include "common/registry.h"
#include "platform/atomic_file.h"
#include "platform/process.h"
#include "report/preset_report.h"
#include "report/tables.h"
#include "train/json_file.h"
#include "train/number_format.h"
#include "train/run_directory.h"
#include "train/run_files.h"
#include "train/shell_quote.h"

namespace xgrad::cli {
using train::ConfigError;
using train::ManifestPoint;
using train::shell_quote;
using train::TrainConfig;

namespace fs = std::filesystem;

namespace {

// Grid point `index` of the sweep.json of `sweep_dir` (`points`) and its configuration, trained into its directory
// as found from here. Throws ConfigError for an index out of range or a point without settings.
TrainConfig point_config(const std::string& sweep_dir, long index, const std::vector<ManifestPoint>& points) {
  if (index < 0 || static_cast<std::size_t>(index) >= points.size())
    throw ConfigError(
        fmt::format("--index: {} is not a grid point of {} (allowed: 0 to {})", index, sweep_dir, points.size() - 1));
  const ManifestPoint& point = points[static_cast<std::size_t>(index)];
  if (point.config.is_null())
    throw ConfigError("DIR: the sweep.json of " + sweep_dir + " records no settings for " + point.name +
                      " (an index written before sweep manifests); run the sweep command that made it again");
  TrainConfig config = TrainConfig::from_json(point.config, fs::path(sweep_dir).string() + "/sweep.json " + point.name);
  // The sweep directory may sit at another path here than where it was written (another mount point on a node).
  config.out = fs::absolute(point.dir).lexically_normal().string();
  return config;
}

// What the point's directory holds; a run with other settings, or changed input files, is refused.
OnDisk point_on_disk(const TrainConfig& config) {
  std::string key;
  const OnDisk state = on_disk(config, &key);
  if (state == OnDisk::other)
    throw ConfigError("DIR: " + config.out + " holds a run with a different " + key +
                      " than sweep.json records for it; use a new sweep directory for other settings");
  if (state != OnDisk::none) {
    std::map<std::string, data::InputFile> cache;
    train::check_run_inputs_unchanged(
        config.out,
        "; put the original back to go on with this sweep, or sweep the new file into a new "
        "sweep directory",
        cache);
  }
  return state;
}

// The point's config file, as the local launcher writes it, with this directory's path; returns its path.
std::string write_point_config(const std::string& sweep_dir, const ManifestPoint& point, const TrainConfig& config) {
  // The name is sweep.json's (data): as a file name, reduced like every name made from data.
  const std::string config_file = (fs::path(sweep_dir) / "configs" / (safe_file_stem(point.name) + ".json")).string();
  train::check_not_linked(fs::absolute(sweep_dir).lexically_normal(),
                          fs::absolute(fs::path(sweep_dir) / "configs").lexically_normal(), "DIR");
  train::refuse_linked_file(config_file);
  fs::create_directories(fs::path(config_file).parent_path());
  {
    std::ofstream file(config_file, std::ios::trunc);
    file << config.to_json().dump(2) << "\n";
    if (!file) throw std::runtime_error("writing " + config_file + " failed");
  }
  return config_file;
}

// Replaces this process with `xgrad train` (`words`), its output into `log_path`. `xgrad train` takes over this
// process and the lock (kInheritedLockVariable), so the point is never unlocked in between and a scheduler's
// signal reaches the run itself. Throws std::runtime_error (the output restored) when it cannot.
[[noreturn]] void exec_train(const std::string& executable, std::vector<std::string> words, const train::RunLock& lock,
                             const TrainConfig& config, const std::string& name, const std::string& log_path,
                             bool resume) {
  const int log_fd = train::open_not_linked(log_path, O_WRONLY | O_CREAT | (resume ? O_APPEND : O_TRUNC));
  if (log_fd < 0) throw std::runtime_error("cannot open " + log_path + ": " + std::strerror(errno));
  ::fflush(stdout);
  ::fflush(stderr);
  // Kept to say why, where the caller reads, should the exec fail.
  const int saved_out = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0);
  const int saved_err = ::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 0);
  auto restore = [&] {
    if (saved_out >= 0) ::dup2(saved_out, STDOUT_FILENO);
    if (saved_err >= 0) ::dup2(saved_err, STDERR_FILENO);
  };
  if (::dup2(log_fd, STDOUT_FILENO) < 0 || ::dup2(log_fd, STDERR_FILENO) < 0 ||
      ::fcntl(lock.descriptor(), F_SETFD, 0) != 0) {
    restore();
    throw std::runtime_error("cannot redirect the output of " + name + " to " + log_path);
  }
  ::setenv(train::kInheritedLockVariable, std::to_string(lock.descriptor()).c_str(), 1);
  if (!std::getenv("OPENBLAS_NUM_THREADS")) ::setenv("OPENBLAS_NUM_THREADS", std::to_string(config.threads).c_str(), 1);
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  ::execv(executable.c_str(), argv.data());
  const int error = errno;
  restore();
  throw std::runtime_error("cannot start " + executable + ": " + std::strerror(error));
}

}  // namespace

int sweep_run_one(const std::string& sweep_dir, long index, const std::string& executable, std::ostream& out) {
  const std::vector<ManifestPoint> points = train::read_sweep_manifest(sweep_dir);
  TrainConfig config = point_config(sweep_dir, index, points);  // checks the index
  const ManifestPoint& point = points[static_cast<std::size_t>(index)];
  // The name comes from sweep.json, data: a newline or an escape in it is shown, never obeyed.
  const std::string where =
      fmt::format("sweep run-one: grid point {} of {} ({})", index, points.size(), escape_control(point.name));

  // runs/ or runs/<name> as a link would make this point train into (and replace) whatever it points to.
  train::check_not_linked(fs::absolute(sweep_dir).lexically_normal(), config.out, "DIR");
  std::error_code ec;
  if (fs::exists(config.out, ec) && !fs::is_directory(config.out, ec))
    throw std::runtime_error(config.out + " exists and is not a directory");
  fs::create_directories(config.out);
  // A lock probe (`sweep status`, `compare`) holds the lock for microseconds: a holder that stays is a run.
  train::RunLock lock;
  std::string holder;
  bool locked = false;
  for (int attempt = 0; attempt < 40 && !(locked = lock.try_acquire(config.out, holder)); ++attempt)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (!locked) {
    out << where << " is being trained by another process (pid " << holder << "); left alone" << std::endl;
    return 1;
  }
  const OnDisk state = point_on_disk(config);
  if (state == OnDisk::complete) {
    const train::PointState done = train::point_state(config.out);
    out << where << " is "
        << (done.status == train::PointStatus::diverged
                ? fmt::format("done (diverged at step {})", done.step)
                : "complete already (final loss " + train::format_number(done.final_loss, 4) + ")")
        << "; nothing to do" << std::endl;
    return 0;
  }
  const std::string config_file = write_point_config(sweep_dir, point, config);
  const bool resume = state == OnDisk::resumable;
  std::vector<std::string> words{executable, "train"};
  if (resume) {
    words.insert(words.end(), {"--resume", config.out});
  } else {
    words.insert(words.end(), {"--config", config_file, "--overwrite"});
  }
  const std::string log_path = (fs::path(config.out) / "train.log").string();
  const long from = resume ? train::checkpoint_step((fs::path(config.out) / train::kCheckpointFile).string()) : 0;
  out << where << ": " << (resume ? fmt::format("resuming from the checkpoint at step {}", from) : "starting")
      << "; log: " << escape_control(log_path) << std::endl;

  exec_train(executable, words, lock, config, point.name, log_path, resume);
}

void print_sweep_status(const std::string& sweep_dir, std::ostream& out) {
  const std::vector<ManifestPoint> points = train::read_sweep_manifest(sweep_dir);
  std::size_t name_width = 4;  // up to the table's cap: a longer name is printed whole, unpadded
  for (const ManifestPoint& p : points)
    name_width = std::max(name_width, std::min(escape_name(p.name).size(), report::kMaxPaddedWidth));
  out << fmt::format("{:>5}  {:<{}}  {:<11}  {}\n", "index", "name", name_width, "status", "detail");
  train::SweepStanding standing;
  standing.points = points.size();
  std::vector<fs::path>& leftovers = standing.leftovers;
  for (const ManifestPoint& p : points) {
    for (fs::path& f : train::leftover_partial_writes(p.dir)) leftovers.push_back(std::move(f));
    const train::PointState s = train::point_state(p);
    ++standing.count[s.status];
    long steps = -1;
    if (p.config.is_object() && p.config.contains("steps") && p.config.at("steps").is_number_unsigned())
      steps = p.config.at("steps").get<long>();
    const std::string of = steps >= 0 ? fmt::format(" of {}", steps) : "";
    std::string detail;
    if (s.status == train::PointStatus::complete) detail = "final loss " + train::format_number(s.final_loss, 4);
    if (s.status == train::PointStatus::diverged) detail = fmt::format("at step {}", s.step);
    if (s.status == train::PointStatus::running)
      detail = fmt::format("pid {}, {} step(s){} logged", s.holder, s.step, of);
    if (s.status == train::PointStatus::interrupted)
      detail = s.step >= 0 ? fmt::format("checkpoint at step {}{}; the next run-one resumes it", s.step, of)
                           : "checkpoint unreadable; the next run-one resumes or restarts it";
    if (s.status == train::PointStatus::failed)
      detail =
          "ended before a checkpoint (failed or killed); see " + shell_quote((fs::path(p.dir) / "train.log").string());
    if (s.status == train::PointStatus::incomplete) detail = "no readable config.json; the next run starts it over";
    if (s.status == train::PointStatus::missing) detail = "its run directory is gone; the next run starts it over";
    if (s.status == train::PointStatus::conflicting) detail = s.conflict;
    if (s.status == train::PointStatus::invalid) detail = s.refused;
    // The detail names paths and files' contents (data): one row each, a newline in them shown, never obeyed.
    std::string row = fmt::format("{:>5}  {:<{}}  {:<11}  {}", p.index, escape_name(p.name), name_width,
                                  enum_name(train::kPointStatusNames, s.status), escape_control(detail));
    while (!row.empty() && row.back() == ' ') row.pop_back();
    out << row << "\n";
  }
  out << points.size() << " point" << (points.size() == 1 ? "" : "s") << ": " << train::standing_counts(standing)
      << "\n";
  if (!leftovers.empty()) {
    std::string listed;
    for (const fs::path& f : leftovers) listed += (listed.empty() ? "" : ", ") + train::shell_quote_path(f.string());
    out << leftovers.size() << " leftover partial write" << (leftovers.size() == 1 ? "" : "s") << ": " << listed
        << " (a write cut short, e.g. by a second signal; the point's next run removes it)\n";
  }
  if (standing.points > standing.count_of(train::PointStatus::complete) +
                            standing.count_of(train::PointStatus::diverged) +
                            standing.count_of(train::PointStatus::running)) {
    const report::PresetRecord preset = report::read_preset_record(sweep_dir);
    // The preset's name is data from sweep.json: one this build does not know suggests no command.
    std::string command = "the same xgrad sweep command again (any --launcher)";
    if (!preset.name.empty() && Registry<report::PresetReport>::instance().find(preset.name))
      command = "the same `xgrad experiment --preset " + shell_quote(preset.name) + (preset.quick ? " --quick" : "") +
                "` command again (same --out)";
    else if (!preset.name.empty())
      command = "the xgrad experiment command that made it (sweep.json names preset '" + escape_name(preset.name) +
                "', which this build of xgrad does not know)";
    const std::size_t settle =
        standing.count_of(train::PointStatus::invalid) + standing.count_of(train::PointStatus::conflicting);
    if (settle > 0)  // the sweep refuses these until the user acts: the command alone would stop at them
      out << "first settle the " << settle << " invalid or conflicting point" << (settle == 1 ? "" : "s")
          << " (each line says how); then\n";
    out << "to continue: " << command << ", or `xgrad sweep run-one " << train::shell_quote_path(sweep_dir)
        << " --index I` for one point\n";
  }
}

bool is_slurm_time(const std::string& text) {
  static const std::regex form(
      R"(UNLIMITED|INFINITE|unlimited|infinite|[0-9]+(:[0-9]+){0,2}|[0-9]+-[0-9]+(:[0-9]+){0,2})");
  return text.size() <= 32 && std::regex_match(text, form);
}

std::string slurm_array_list(const std::vector<std::size_t>& indices) {
  std::string list;
  for (std::size_t i = 0; i < indices.size();) {
    std::size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    list += (list.empty() ? "" : ",") +
            (j == i ? std::to_string(indices[i]) : fmt::format("{}-{}", indices[i], indices[j]));
    i = j + 1;
  }
  return list;
}

SlurmSubmission prepare_slurm_sweep(const SweepConfig& cfg, const SlurmOptions& options) {
  const int cpus = options.cpus_per_task > 0 ? options.cpus_per_task : static_cast<int>(cfg.base.threads);
  if (cpus < static_cast<int>(cfg.base.threads))
    throw ConfigError(fmt::format("--cpus-per-task: {} is below --threads {} (allowed: {} or more)", cpus,
                                  cfg.base.threads, cfg.base.threads));
  const fs::path dir = fs::absolute(cfg.out).lexically_normal();
  // #SBATCH lines are split at whitespace by sbatch's own rules, not a shell's: a path is written there only bare.
  if (dir.string().find_first_of(" \t\n\"'\\") != std::string::npos)
    throw ConfigError("--out: " + dir.string() +
                      " holds whitespace, a quote or a backslash, which the #SBATCH "
                      "--output line of the Slurm script does not take; use another --out for --launcher slurm");
  const std::vector<SweepRun> runs = write_sweep_manifest(cfg);
  SlurmSubmission submission;
  submission.points = runs.size();
  submission.script = (dir / "sweep.sbatch").string();
  std::vector<std::size_t> all;
  for (const SweepRun& r : runs) {
    all.push_back(r.index);
    using train::PointStatus;
    const PointStatus status = train::point_state(r.config.out).status;
    if (status != PointStatus::complete && status != PointStatus::diverged && status != PointStatus::running)
      submission.indices.push_back(r.index);
  }
  std::sort(all.begin(), all.end());
  std::sort(submission.indices.begin(), submission.indices.end());
  const std::string throttle = "%" + std::to_string(options.max_parallel);
  // Slurm reads '%' in a file name as a pattern; %% is a literal one.
  std::string output;
  for (char c : (dir / "slurm-").string()) output += c == '%' ? std::string("%%") : std::string(1, c);
  std::string script = "#!/bin/bash\n";
  script += fmt::format("# xgrad sweep: grid points of {}/sweep.json, one Slurm array task each.\n", dir.string());
  script += "# Written by `xgrad sweep --launcher slurm`; its --submit runs only the points not complete.\n";
  script += "# State of every point: xgrad sweep status " + shell_quote(dir.string()) + "\n";
  script += "#SBATCH --job-name=xgrad-sweep\n";
  script += "#SBATCH --array=" + slurm_array_list(all) + throttle + "\n";
  script += "#SBATCH --ntasks=1\n";
  script += fmt::format("#SBATCH --cpus-per-task={}\n", cpus);
  if (!options.partition.empty()) script += "#SBATCH --partition=" + options.partition + "\n";
  if (!options.time.empty()) script += "#SBATCH --time=" + options.time + "\n";
  script += "#SBATCH --output=" + output + "%A_%a.out\n";
  script += fmt::format("export OPENBLAS_NUM_THREADS={}\n", cfg.base.threads);
  script += "exec " + shell_quote(cfg.executable) + " sweep run-one " + shell_quote(dir.string()) +
            " --index \"$SLURM_ARRAY_TASK_ID\"\n";
  // Written whole under a name of this process's own, made executable there and renamed: a link planted at the
  // script's name is replaced, never written through nor made executable.
  platform::StagedFile file(submission.script);
  file.write(script);
  file.finish();
  std::error_code ec;
  fs::permissions(file.temporary(), fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                  fs::perm_options::add, ec);
  if (ec) throw std::runtime_error("cannot make " + submission.script + " executable: " + ec.message());
  file.commit();
  if (!submission.indices.empty())
    submission.command = {"sbatch", "--array=" + slurm_array_list(submission.indices) + throttle, submission.script};
  return submission;
}

std::string submit_to_slurm(const std::vector<std::string>& command) {
  std::vector<std::string> words = command;
  words.insert(words.begin() + 1, "--parsable");  // an option after the script would be the script's argument
  if (platform::find_program(words.front()).empty())
    throw std::runtime_error(
        "sbatch not found: run this where Slurm's client commands are installed (Debian: "
        "slurm-client), or submit the script yourself");
  const platform::ProgramResult result = platform::run_program(words);
  std::string output = result.output;
  while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
  if (!result.succeeded() || output.empty()) throw std::runtime_error("sbatch failed: " + output);
  // --parsable prints "jobid" or "jobid;cluster"
  const std::size_t newline = output.find_last_of('\n');
  const std::string last = output.substr(newline == std::string::npos ? 0 : newline + 1);
  return last.substr(0, last.find(';'));
}

}  // namespace xgrad::cli
