// A sweep directory's manifest (sweep.json: every grid point with its index, name, run directory and settings) and
// where each point stands, read from its run directory: one reader for `xgrad sweep status`, `sweep run-one`, the
// Slurm launcher and `xgrad compare`, which all say how much of a sweep is done.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/enum_names.h"
#include "train/config.h"
#include "train/run_files.h"

namespace xgrad::train {

/// Where a sweep's run stands as the sweep records it (sweep.json's "status"): pending | running (a process trains
/// it, this sweep's child or another's) | complete | diverged | interrupted (stopped with a checkpoint: the next
/// sweep resumes it) | failed | skipped (complete before this sweep).
enum class SweepStatus { pending, running, complete, diverged, interrupted, failed, skipped };
/// The names of SweepStatus (sweep.json's text).
inline constexpr EnumName<SweepStatus> kSweepStatusNames[] = {
    {SweepStatus::pending, "pending"},   {SweepStatus::running, "running"},         {SweepStatus::complete, "complete"},
    {SweepStatus::diverged, "diverged"}, {SweepStatus::interrupted, "interrupted"}, {SweepStatus::failed, "failed"},
    {SweepStatus::skipped, "skipped"}};

/// One grid point of a sweep directory's manifest.
struct ManifestPoint {
  std::size_t index = 0;
  std::string name;
  std::string dir;        // the run directory: the sweep directory / the entry's "dir"
  nlohmann::json config;  // the resolved settings (config.json keys); null in an index written before manifests
  std::optional<SweepStatus> recorded_status;  // the entry's "status" as the sweep last wrote it; none if absent
};

/// The grid points of `sweep_dir`/sweep.json, by index. Throws ConfigError naming `sweep_dir` when it holds no
/// sweep.json or one that is not a manifest (not JSON, or runs without index and name), or a point whose "status" is
/// not one of kSweepStatusNames (naming the allowed ones).
std::vector<ManifestPoint> read_sweep_manifest(const std::string& sweep_dir);

/// The entries of `sweep_dir`/sweep.json that read as grid points, by index, and why each other entry does not, one
/// sentence each naming the file ("<dir>/sweep.json gives point 3 the run directory '../x' (allowed: ...)"), so that a
/// reader who needs only the points' run directories (`xgrad compare`) reads the others. Throws ConfigError as
/// read_sweep_manifest does for the file as a whole; the points are not checked to number 0 to N-1.
struct ManifestEntries {
  std::vector<ManifestPoint> points;
  std::vector<std::string> refused;
};
ManifestEntries read_manifest_entries(const std::string& sweep_dir);

/// Where one grid point stands, read from its run directory alone, so it holds whichever launcher and host ran it.
/// Where a sweep's point stands on disk (`sweep status`): complete | diverged (summary.json) | running (a process holds
/// the run's lock) | interrupted (a checkpoint, nobody training: the next run-one or sweep resumes it) | failed (files
/// of an attempt, but neither a checkpoint nor a summary: it failed or was killed before its first checkpoint; the
/// next attempt starts it over) | incomplete (a summary.json or checkpoint without a readable config.json: the next
/// attempt starts it over, as on_disk decides) | conflicting (its config.json contradicts the manifest, or run-one
/// refuses the manifest's settings for it) | invalid (its summary.json is one no trainer writes: read_run_summary
/// refuses it, and so do run-one and the sweep) | missing (its directory is gone, though the manifest recorded an
/// attempt) | pending (no run directory).
enum class PointStatus {
  complete,
  diverged,
  running,
  interrupted,
  failed,
  incomplete,
  conflicting,
  invalid,
  missing,
  pending
};
/// The names of PointStatus, in the order `sweep status` counts them.
inline constexpr EnumName<PointStatus> kPointStatusNames[] = {
    {PointStatus::complete, "complete"},       {PointStatus::diverged, "diverged"},
    {PointStatus::running, "running"},         {PointStatus::interrupted, "interrupted"},
    {PointStatus::failed, "failed"},           {PointStatus::incomplete, "incomplete"},
    {PointStatus::conflicting, "conflicting"}, {PointStatus::invalid, "invalid"},
    {PointStatus::missing, "missing"},         {PointStatus::pending, "pending"}};

struct PointState {
  PointStatus status = PointStatus::pending;
  std::string holder;     // running: the pid its lock file names (a pid on another host under Slurm)
  std::string conflict;   // conflicting: how, and what run-one and the sweep then do, as `sweep status` shows it
  std::string refused;    // invalid: read_run_summary's refusal (the file, why, what to do), as `sweep status` shows it
  long step = -1;         // diverged: the step; interrupted: the checkpoint's step; running: rows in metrics.csv
  double final_loss = 0;  // complete: mean loss of the last steps, as summary.json has it
};
PointState point_state(const std::string& run_dir);

/// The summary.json of run directory `dir`: none when it has none, or one that is not JSON (a write cut short: the run
/// is continued or redone as if it had none). Throws ConfigError naming the file, why and what to do for one that no
/// trainer writes (JSON that RunSummary::from_json refuses, not a regular file): resuming or redoing its run would
/// replace a finished run's results unseen.
std::optional<RunSummary> read_run_summary(const std::filesystem::path& dir);

/// The step a run checkpoint was written after (its safetensors metadata "step"), read from the header alone; -1 when
/// the file cannot be read as one.
long checkpoint_step(const std::string& path);

/// The first setting in which a run's config.json (`stored`, in the canonical form: canonical_config_json) differs
/// from `want`, the settings a sweep plans for that run, as "'lr' (0.1 there, 0.01 here)" (there: the run
/// directory; here: the plan); "" when none does. The settings a resumed run may change that only record where and
/// how it reports (its directory, its progress lines) are not compared. A key `stored` lacks is compared at what
/// TrainConfig::from_json reads a missing key as (its default), so a run whose file lost keys is not taken as the
/// plan's unless those defaults are the plan's values. The one check of a run against its sweep:
/// a sweep and run-one refuse such a run, sweep status calls it conflicting.
std::string first_conflicting_setting(const nlohmann::json& stored, const TrainConfig& want);

/// The state of manifest point `point`: point_state of its run directory, except that a point without a run
/// directory whose sweep.json entry records it started (any status but "pending") is "missing": its directory was
/// deleted, and the next sweep or run-one trains it again; and a point whose settings in sweep.json run-one refuses,
/// or whose run (complete, diverged, interrupted or failed) has a config.json that contradicts them
/// (first_conflicting_setting) or is refused, is "conflicting", whatever else its directory holds.
PointState point_state(const ManifestPoint& point);

/// How far a sweep directory is: its points by state (point_state) and the leftover partial writes of their runs.
struct SweepStanding {
  std::size_t points = 0;                        // grid points in sweep.json (entries that read as one)
  std::map<PointStatus, std::size_t> count;      // by PointState::status
  std::vector<std::filesystem::path> leftovers;  // leftover_partial_writes of every point's run directory
  std::size_t count_of(PointStatus status) const;
};

/// Reads `sweep_dir`/sweep.json and the run directory of every entry that reads as a point (read_manifest_entries):
/// `points` counts those. Throws as read_manifest_entries.
SweepStanding sweep_standing(const std::string& sweep_dir);

/// "2 complete, 1 running, 1 missing": the non-zero counts of `standing`, in a fixed order.
std::string standing_counts(const SweepStanding& standing);

}  // namespace xgrad::train
