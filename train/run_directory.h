// The run directory as one train() owns it: its lock, the checks before anything is written, its preparation, and
// metrics.csv opened for a new or a resumed run.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/input_file.h"
#include "train/config.h"
#include "train/metrics_log.h"

namespace xgrad::train {

/// An exclusive flock on DIR/.lock for as long as a train() writes into DIR: a second process (or a second train()
/// in this one) is refused instead of writing the same files. The kernel drops the lock when the descriptor closes,
/// the process exits or is killed, so a SIGKILL leaves no stale lock (the file stays, unlocked).
class RunLock {
 public:
  RunLock() = default;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  ~RunLock();
  bool held() const { return fd_ >= 0; }
  /// Takes the lock on dir/.lock. Returns false if the file cannot be opened (and `required` is false); throws
  /// ConfigError naming the holder's pid if another holder has it.
  bool acquire(const std::filesystem::path& dir, bool required);

 private:
  int fd_ = -1;
};

/// Checks config.out against overwrite/resume without touching it (a refused run leaves no trace). Throws
/// ConfigError naming --out, --resume or --overwrite.
void check_run_directory(const TrainConfig& config);

/// For --resume: compares the input files the run's config.json recorded under "inputs" (`stored_config`, in the
/// canonical form) with those the task read now (`current`, data::Task::input_files()). Throws ConfigError
/// "<flag>: <path> has changed since the run in <out> started: ..." naming the file and what changed (its size, its
/// content), or that a file the run read is not read now or one is read that the run did not. A config.json without
/// "inputs" (written before xgrad recorded them) cannot be checked: a relative path in it is refused with exit 2
/// (it would resolve against the working directory of the resume, perhaps to another file); otherwise the returned
/// warning says the files were not checked. Returns "" when every file matches.
std::string check_same_inputs(const TrainConfig& config, const nlohmann::json& stored_config,
                              const std::vector<data::InputFile>& current);

/// For --resume, before any input file is read: each file config.out/config.json records under "inputs" must still
/// be there with its recorded size (ConfigError naming the file otherwise, as check_same_inputs words it). A
/// config.json that is missing or not JSON is left to the resume to report.
void check_inputs_on_disk(const TrainConfig& config);

/// Creates config.out, takes its lock (if not taken yet), proves it writable, deletes the run's files under
/// overwrite (and a stale summary.json under resume) and temporary files of atomic writes cut short. Throws
/// ConfigError naming --out when the directory cannot be created or written.
void prepare_run_directory(const TrainConfig& config, RunLock& lock);

/// metrics.csv in `dir` for a new run, or for a resumed one cut back to its first `rows` rows. The cut is written to
/// a temporary file through MetricsLog, checked to reproduce the old rows byte for byte, and renamed over the old
/// file, so a crash during the cut leaves the old file whole. Throws std::runtime_error naming the file when it is
/// missing or does not hold `rows` complete rows under `columns`.
std::unique_ptr<MetricsLog> open_metrics(const std::filesystem::path& dir, const std::vector<std::string>& columns,
                                         bool resume, std::size_t rows);

/// The number of complete data rows of dir/metrics.csv (0 if there is none), for the warning of a resume without
/// checkpoint.
std::size_t count_metrics_rows(const std::filesystem::path& dir);

/// Writes `j` to `path` atomically (temporary file, fsync, rename): a kill never leaves a half-written config.json
/// or summary.json.
void write_json(const std::filesystem::path& path, const nlohmann::json& j);

}  // namespace xgrad::train
