// `xgrad export tensorboard RUN_OR_SWEEP... --out DIR`: each run found as a TensorBoard event file in a
// subdirectory of DIR, so that `tensorboard --logdir DIR` shows them named by their directories.
#pragma once

#include <string>
#include <vector>

namespace xgrad::report {

/// One run exported: its directory and the event file written for it.
struct ExportedRun {
  std::string run_dir;
  std::string event_file;
};

/// Writes every run's event file into `out`/<input's name>/<the run's path below it>. Before writing anything,
/// throws std::invalid_argument for an input without runs or two runs of one subdirectory, ConfigError for a
/// symbolic link below `out`; std::runtime_error naming a file that cannot be read or written.
std::vector<ExportedRun> export_tensorboard(const std::vector<std::string>& inputs, const std::string& out);

}  // namespace xgrad::report
