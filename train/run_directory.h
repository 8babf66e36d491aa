// The run directory as one train() owns it: its lock, the checks before anything is written, its preparation, and
// metrics.csv opened for a new or a resumed run.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/input_file.h"
#include "train/config.h"
#include "train/metrics_log.h"

namespace xgrad::train {

/// The message refusing `path`, a file xgrad would write in a run or sweep directory, because it is a symbolic link:
/// "PATH is a symbolic link; xgrad does not write through links in a run directory: remove it".
std::string linked_file_message(const std::filesystem::path& path);

/// Throws ConfigError (linked_file_message) when `path` is a symbolic link, dangling or not: writing through it would
/// create or replace a file outside the directories the user named. A path that does not exist passes.
void refuse_linked_file(const std::filesystem::path& path);

/// open(2) of `path` (a file in a run or sweep directory) with `flags` plus O_NOFOLLOW and O_CLOEXEC. Returns the
/// descriptor, or -1 with errno set; throws ConfigError (linked_file_message) when `path` is a symbolic link.
int open_not_linked(const std::filesystem::path& path, int flags, unsigned mode = 0644);

/// An exclusive flock on DIR/.lock for as long as a train() writes into DIR: a second process (or a second train()
/// in this one) is refused instead of writing the same files. The kernel drops the lock when the descriptor closes,
/// the process exits or is killed, so a SIGKILL leaves no stale lock (the file stays, unlocked). The file holds the
/// holder's pid, for the messages of those refused. `xgrad sweep` locks its sweep directory the same way.
///
/// A lock can be handed to a child process: the parent takes it, starts the child with the descriptor open (not
/// close-on-exec) and its number in the environment variable kInheritedLockVariable, then releases its own copy. The
/// child's acquire() of the same directory adopts that descriptor, so the run is never unlocked in between.
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
  /// Takes the lock on dir/.lock unless another process holds it: then returns false with that process's pid (as
  /// the file states it, "unknown" if it states none) in `holder`. Throws ConfigError naming --out if the file
  /// cannot be opened or locked.
  bool try_acquire(const std::filesystem::path& dir, std::string& holder);
  /// Records `pid` as the holder in the lock file (a sweep hands the lock to the child it started).
  void set_holder(long pid);
  /// The locked descriptor (-1 if not held), for handing the lock to a child process.
  int descriptor() const { return fd_; }
  /// Closes this process's descriptor: the lock goes with it unless a child process holds a copy.
  void release();

 private:
  // Adopts the descriptor a parent handed over (see the class comment) if it is the lock file at `path`.
  bool adopt_inherited(const std::filesystem::path& path);
  int fd_ = -1;
};

/// Whether a process holds dir/.lock, without taking the lock: "" when none does (or there is no lock file), else
/// the holder's pid as the file states it ("unknown" if it states none). The probe is a shared flock held for a few
/// microseconds; RunLock::try_acquire, finding the lock held by a process that named no live pid, tries again.
std::string run_lock_holder(const std::filesystem::path& dir);

/// The environment variable naming the descriptor of a lock a child process inherits (see RunLock).
inline constexpr const char* kInheritedLockVariable = "XGRAD_RUN_LOCK_FD";

/// Throws ConfigError "--out: empty; name <what>" for an empty `dir`, and "--out: DIR exists and is not a directory"
/// for a path that exists as anything but a directory (a regular file, /dev/null, a FIFO), and "--out: ... bytes"
/// for a path of PATH_MAX bytes or more or a name in it longer than TrainConfig::kMaxFileNameBytes: the one check of
/// the directory a command writes into (train, sweep, experiment, compare, explain, export), before anything is done.
/// `what` says what the directory is for ("a report directory").
void check_output_directory(const std::string& dir, const std::string& what);

/// Checks config.out against overwrite/resume without touching it (a refused run leaves no trace). Throws
/// ConfigError naming --out, --resume or --overwrite, and (linked_file_message) for a run file (run_file_names())
/// that is a symbolic link, dangling or not.
void check_run_directory(const TrainConfig& config);

/// Refuses `dir` and every path component below `base` that is a symbolic link (for directories xgrad names itself
/// inside a directory the user named, such as a sweep's runs/<name>): writing through one would replace files in
/// whatever the link points to. `base` itself may be a link (the user named it). Throws ConfigError naming `flag`.
void check_not_linked(const std::filesystem::path& base, const std::filesystem::path& dir, const std::string& flag);

/// The temporary files of atomic writes cut short in `dir` (".<file>.tmp-<pid>", e.g. a second signal during a
/// checkpoint write), sorted; empty if none or `dir` cannot be read. The next run in `dir` removes them.
std::vector<std::filesystem::path> leftover_partial_writes(const std::filesystem::path& dir);

/// For --resume: compares the input files the run's config.json recorded under "inputs" (`stored_config`, in the
/// canonical form) with those the task read now (`current`, data::Task::input_files()). Throws ConfigError
/// "<flag>: <path> has changed since the run in <out> started: ..." naming the file and what changed (its size, its
/// content), or that a file the run read is not read now or one is read that the run did not. A config.json without
/// "inputs" (written before xgrad recorded them) cannot be checked: a relative path in it is refused with exit 2
/// (it would resolve against the working directory of the resume, perhaps to another file); otherwise the returned
/// warning says the files were not checked. Returns "" when every file matches.
std::string check_same_inputs(const TrainConfig& config, const nlohmann::json& stored_config,
                              const std::vector<data::InputFile>& current);

/// How `now` differs from `was` (one file read at two times): "" if not at all, else "3004 bytes now, 3000 then" or
/// "same size (3000 bytes), other content (XXH3 ... now, ... then)".
std::string input_difference(const data::InputFile& was, const data::InputFile& now);

/// For `train --config` of a run's config.json (config.recorded_inputs): each recorded file whose setting the run
/// reads must be among `current` (what the task read now) with the same size and content. Throws ConfigError
/// "<flag>: <path> has changed since the run of <config.json> read it: ..." naming how to take the file as it is now.
void check_recorded_inputs(const TrainConfig& config, const std::vector<data::InputFile>& current);

/// For a sweep that finds a run in `run_dir`: each file its config.json records under "inputs" must be there now with
/// the recorded size and content (read and hashed; `cache` keeps the fingerprints of files already read, by path).
/// Throws ConfigError "<flag>: <path> has changed since the run in <run_dir> read it: ..." (or that it is gone),
/// ending in `advice`, and "--out: <config.json>: 'inputs' is not what xgrad writes" for a damaged record. A
/// config.json that is missing, not JSON or without "inputs" is not checked.
void check_run_inputs_unchanged(const std::string& run_dir, const std::string& advice,
                                std::map<std::string, data::InputFile>& cache);

/// For --resume, before any input file is read: each file config.out/config.json records under "inputs" must still
/// be there with its recorded size (ConfigError naming the file otherwise, as check_same_inputs words it). A
/// config.json that is missing or not JSON is left to the resume to report.
void check_inputs_on_disk(const TrainConfig& config);

/// Throws ConfigError "--out: run directory DIR is not writable: <reason>" unless a file can be created in `dir`.
void check_writable(const std::filesystem::path& dir);

/// Creates config.out, takes its lock (if not taken yet), proves it writable, deletes the run's files under
/// overwrite (and a stale summary.json under resume) and temporary files of atomic writes cut short. Throws
/// ConfigError naming --out when the directory cannot be created or written.
void prepare_run_directory(const TrainConfig& config, RunLock& lock);

/// metrics.csv in `dir` for a new run, or for a resumed one cut back to its first `rows` rows. The cut is written to
/// a temporary file through MetricsLog, checked to reproduce the old rows byte for byte, and renamed over the old
/// file, so a crash during the cut leaves the old file whole. A resume from step 0 (`rows` 0) starts the file
/// afresh, whatever it holds. Throws std::runtime_error naming the file when it is missing or does not hold `rows`
/// complete rows under `columns`.
std::unique_ptr<MetricsLog> open_metrics(const std::filesystem::path& dir, const std::vector<std::string>& columns,
                                         bool resume, std::size_t rows);

/// The number of complete data rows of dir/metrics.csv (0 if there is none), for the warning of a resume without
/// checkpoint.
std::size_t count_metrics_rows(const std::filesystem::path& dir);

/// Whether dir/metrics.csv holds at least `steps_done` complete rows: a run whose summary.json says it finished but
/// whose metrics.csv was deleted or cut short since is not complete (compare could not read it whole).
bool metrics_complete(const std::filesystem::path& dir, std::size_t steps_done);

/// Writes `j` to `path` atomically (temporary file, fsync, rename): a kill never leaves a half-written config.json
/// or summary.json.
void write_json(const std::filesystem::path& path, const nlohmann::json& j);

}  // namespace xgrad::train
