// Experiment presets: `xgrad experiment --preset NAME [--quick]` runs a named grid and writes its own report sections
// and figures after the usual report. A preset is two files, one per layer: cli/presets/NAME.cpp registers its grid
// (a Preset, here), report/presets/NAME.cpp its report sections (a report::PresetReport, report/preset_report.h) under
// the same name; a user's own executable may hold its own the same way. Nothing else lists the names (`xgrad
// experiment --help` and the --preset check read the registry). The sweep directory's sweep.json records
// {"preset": {"name", "quick"}}, so `xgrad compare DIR` writes the preset's sections again.
//
// The grid (cli/presets/my_preset.cpp; CMake picks up every .cpp there):
//
//   #include "cli/presets/preset.h"
//   namespace xgrad::cli::presets::my_preset {  // a namespace of its own: the library is a unity build
//   namespace {
//   cli::SweepConfig grid(bool quick) {
//     cli::SweepConfig c = preset_defaults();       // jobs = cores, one BLAS thread per run, logging every 10 steps
//     train::set_setting(c.base, "kv_encoding", "sum");  // new presets: the compositional encoding
//     c.base.steps = quick ? 100 : 600;
//     c.scales = all_scalings();                      // every registered scaling
//     c.d_ks = {64, 256};
//     c.seeds = quick ? std::vector<std::uint64_t>{0, 1} : std::vector<std::uint64_t>{0, 1, 2};
//     c.arms = {{"adamw", 1e-3}, {"sgd", 0.1}};
//     c.grid = {{"d_model", {32, 64}}};               // any other setting as an axis (as --grid)
//     return c;
//   }
//   const PresetRegistration my_preset_registration{
//       {"my_preset", 50, "what it asks (sources: Author et al. 2023)", grid}};
//   }  // namespace
//   }  // namespace xgrad::cli::presets::my_preset
//
// Its report (report/presets/my_preset.cpp) is shown in report/preset_report.h.
//
// Flags given with --preset override the preset's grid (e.g. --steps 50, --seeds 0, --jobs 1, --out DIR).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cli/sweep.h"
#include "report/preset_report.h"
#include "train/settings.h"

namespace xgrad::cli {

struct Preset {
  static constexpr const char* kind = "preset";
  std::string name;         // what users type: --preset NAME
  int order = 0;            // place in --help
  std::string description;  // one line: the question, with its sources
  // The grid: the full one, or (quick) the --quick one that CI runs (<= 2 minutes on 2 cores). Sets every axis and
  // the base settings; out and executable are set by the command.
  std::function<cli::SweepConfig(bool quick)> grid;
};

/// Registers `preset` (Registry<Preset>) when its file's static objects are initialised; its report registers
/// itself from report/presets/NAME.cpp (Registry<report::PresetReport>). A duplicate name ends the program at start-up
/// with the RegistryError's message.
struct PresetRegistration {
  explicit PresetRegistration(Preset preset);
};

/// The preset `xgrad experiment` runs without --preset.
constexpr const char* kDefaultPreset = "dk";

/// The common start of a grid: experiment_defaults() (kv_recall, d_model 64, 600 steps of batch 64, logging every
/// 10 steps, one run per core) with the scales, d_ks, seeds and arms of today's `dk` experiment.
cli::SweepConfig preset_defaults();

/// The number of runs of `grid`: scales x d_ks x arms x seeds x the values of each grid axis, less the points its
/// `keep` filter and its only_readers axes leave out (keeps_point).
std::size_t grid_points(const cli::SweepConfig& grid);

/// Every registered scaling, in registry order.
std::vector<std::string> all_scalings();

/// n learning rates spaced evenly in log between lo and hi (both included), rounded to 3 significant digits.
/// Throws std::invalid_argument for n < 2 or lo, hi not in 0 < lo < hi.
std::vector<double> log_spaced(double lo, double hi, std::size_t n);

}  // namespace xgrad::cli
