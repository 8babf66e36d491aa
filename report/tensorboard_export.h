// `xgrad export tensorboard RUN_OR_SWEEP... --out DIR`: the runs found under each input (report/runs.h
// find_run_dirs) written as TensorBoard event files (train/tensorboard.h), one subdirectory of DIR per run, so that
// `tensorboard --logdir DIR` shows them as runs, named by their directories.
#pragma once

#include <string>
#include <vector>

namespace xgrad::report {

/// One run exported: its directory and the event file written for it.
struct ExportedRun {
  std::string run_dir;
  std::string event_file;
};

/// Writes the event file of every run found under `inputs` into a subdirectory of `out` (export_event_file: from the
/// run's metrics.csv; an event file there before is replaced): the name of the input it was found under, then the
/// run's path below that input ("sweeps/dk" and its run "sweeps/dk/d_k=16_seed=0": "dk/d_k=16_seed=0"; a run
/// directory given itself: its name). Throws std::invalid_argument for an input that is not a directory or holds no
/// run, or for two runs that would share a subdirectory (two inputs of one name), and ConfigError for a symbolic link
/// on the way to a subdirectory below `out` (never followed), before writing anything; std::runtime_error naming the
/// file that cannot be read or written.
std::vector<ExportedRun> export_tensorboard(const std::vector<std::string>& inputs, const std::string& out);

}  // namespace xgrad::report
