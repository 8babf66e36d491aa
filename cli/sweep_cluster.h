// A sweep run by other launchers than `xgrad sweep` itself: one grid point of a sweep directory's manifest
// (sweep.json) at a time (`xgrad sweep run-one`, which a Slurm array task, GNU parallel or any scheduler starts), the
// state of every point read from the run directories (`xgrad sweep status`), and the Slurm job array that runs the
// points not yet complete (`xgrad sweep --launcher slurm`). The sweep directory is the only shared state: it must be
// on storage every node sees, at the same path.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "cli/sweep.h"
#include "train/sweep_manifest.h"

namespace xgrad::cli {

/// `xgrad sweep run-one DIR --index I`: trains grid point I of DIR's manifest in this process, replacing it with
/// `xgrad train` (`executable`), so that a scheduler's signals reach the run itself: SIGTERM (scancel, a time limit)
/// writes a checkpoint. The point's lock is taken first and handed over, so a second copy is refused; a point with
/// a checkpoint is resumed (`xgrad train --resume`), one without is started over from its config file, its output
/// going to the run's train.log. Writes one line to `out` saying what it does. Returns only when nothing is to be
/// trained: 0 when the point is complete (or diverged) already, 1 when another process holds it; throws
/// ConfigError naming --index (out of range: the allowed range) or DIR (no manifest), std::runtime_error when the
/// exec fails.
int sweep_run_one(const std::string& sweep_dir, long index, const std::string& executable, std::ostream& out);

/// `xgrad sweep status DIR`: one line per grid point (index, name, state, what the state says: the pid, step, final
/// loss), then the counts ("4 points: 2 complete, 1 running, 1 pending").
void print_sweep_status(const std::string& sweep_dir, std::ostream& out);

/// The flags of `xgrad sweep --launcher slurm`.
struct SlurmOptions {
  int max_parallel = 16;  // array tasks running at once (%K)
  std::string partition;  // "" = the cluster's default partition
  std::string time;       // time limit per task in a Slurm format ("30", "2:00:00", "1-0"); "" = the partition's
  int cpus_per_task = 0;  // 0 = the sweep's --threads
  bool submit = false;    // run sbatch (else print the command)
};

/// Whether `text` is a time limit sbatch takes: minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S (digits only), or
/// UNLIMITED / INFINITE.
bool is_slurm_time(const std::string& text);

/// What `xgrad sweep --launcher slurm` prepared.
struct SlurmSubmission {
  std::string script;                // out/sweep.sbatch (absolute)
  std::vector<std::size_t> indices;  // the grid points to run: those neither complete, diverged nor running
  std::size_t points = 0;            // every grid point of this sweep
  std::vector<std::string> command;  // sbatch --array=<indices>%K <script>; empty when nothing is to run
};

/// Writes the manifest (write_sweep_manifest) and out/sweep.sbatch: an `#SBATCH --array=0-(N-1)%K` script over
/// this sweep's points whose task i runs `<executable> sweep run-one <out> --index i` (absolute paths), output in
/// out/slurm-%A_%a.out. The returned command submits the points that are not complete or running now (their
/// indices in --array, which overrides the script's). Throws ConfigError naming the flag for bad options
/// (--cpus-per-task below --threads).
SlurmSubmission prepare_slurm_sweep(const SweepConfig& config, const SlurmOptions& options);

/// Runs `command` (sbatch ... --parsable) and returns the job id it prints. Throws std::runtime_error with sbatch's
/// message when it fails or is not installed.
std::string submit_to_slurm(const std::vector<std::string>& command);

/// "0-3", "1,3", "0-2,5": indices (sorted, distinct) in Slurm's --array form.
std::string slurm_array_list(const std::vector<std::size_t>& indices);

}  // namespace xgrad::cli
