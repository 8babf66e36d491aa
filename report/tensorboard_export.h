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

/// Writes the event file of every run found under `inputs` (from its metrics.csv, replacing one there before) into
/// `out`/<input's name>/<the run's path below it> ("sweeps/dk/d_k=16_seed=0" of input "sweeps/dk": "dk/d_k=16_seed=0").
/// Before writing anything, throws std::invalid_argument for an input that is not a directory or holds no run, or two
/// runs of one subdirectory, and ConfigError for a symbolic link on the way below `out`; std::runtime_error naming a
/// file that cannot be read or written.
std::vector<ExportedRun> export_tensorboard(const std::vector<std::string>& inputs, const std::string& out);

}  // namespace xgrad::report
