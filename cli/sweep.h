// `xgrad sweep`: a grid of scale mode × d_k × (optimizer, learning rate) × any other settings (--grid) × seed runs,
// each a child process (`xgrad train --config FILE`, FILE written by the sweep), `jobs` at a time, all below one
// sweep directory with an index file. Running the same command again skips the complete runs, resumes the
// interrupted ones from their checkpoints (`xgrad train --resume`) and leaves alone a run another process is still
// training. A run that diverges is a result, recorded with its step; the sweep goes on.
//
// One sweep at a time writes a sweep directory (a lock on DIR/.lock), and a child writes a run directory only while
// it holds the run's lock: the sweep takes it, opens train.log, and hands both to the child. Children never outlive
// the sweep: they get SIGTERM (and checkpoint) when it ends, however it ends.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/config.h"
#include "train/sweep_manifest.h"

namespace xgrad::cli {

/// One optimizer at one learning rate.
struct Arm {
  std::string optimizer;  // sgd | adamw
  double lr = 0;
};
/// "sgd@0.1" → {sgd, 0.1}; throws ConfigError naming --arms and the allowed form.
Arm parse_arm(const std::string& text);

/// One more axis of the grid: a declared setting and its values (`--grid d_model=16,64`).
struct GridAxis {
  std::string key;
  std::vector<nlohmann::json> values;
  // false (--grid): every run must read the setting. true (a preset's axis of a component's own setting, such as
  // qk_norm_scale): it varies the runs that read it, and each other run is made once, without it in its settings or
  // name, so that two values of qk_norm's multiplier do not double the runs of the other scalings.
  bool only_readers = false;
};

struct SweepConfig {
  train::TrainConfig base;  // every setting but scale, head size, seed, optimizer, lr, the grid axes and out
  std::vector<std::string> scales{"sqrt_dk", "none"};
  std::vector<std::size_t> d_ks{16, 64, 256};
  std::vector<std::uint64_t> seeds{0, 1, 2};
  std::vector<Arm> arms{{"adamw", 3e-3}};
  std::vector<GridAxis> grid;  // in the order given; runs vary the last axis fastest (before the seed)
  int jobs = 2;                // runs at once (each run uses base.threads threads, BLAS and xgrad's own)
  std::string out;             // sweep directory: runs in out/runs/<name>, the index in out/sweep.json
  std::string executable;      // the xgrad binary children run
  // false (--launcher slurm): the points run on the cluster's nodes, so --jobs x --threads is not held against the
  // CPUs of the machine that plans the sweep; each run checks --threads where it runs.
  bool runs_here = true;
  // The experiment preset that set this grid (`xgrad experiment --preset NAME [--quick]`), recorded in sweep.json as
  // "preset": {"name", "quick"} so that `xgrad compare` writes its report sections; "" for `xgrad sweep`.
  std::string preset;
  bool preset_quick = false;
  // A preset's filter of the grid (null: every point): plan_sweep leaves out the runs whose settings (scale, d_k,
  // optimizer, lr, seed and grid values applied) it returns false for, e.g. d_model = d_k only, or muP only with its
  // 1/d_k attention. Not recorded in sweep.json; the runs it keeps are.
  std::function<bool(const train::TrainConfig&)> keep;
  // The axes whose values no flag gave ("scale", "d_k", "arms", "seed"; "grid" for a preset's --grid axes), recorded
  // where the flags are parsed, so the start of a sweep can say which values came from defaults.
  std::set<std::string> axes_from_defaults;
};

struct SweepRun {
  std::size_t index = 0;  // its grid point's number in the manifest (sweep.json), kept when a later sweep adds runs
  std::string name;       // dk<d_k>-<scale>-<optimizer>-lr<lr>[-<key><value> per grid axis]-s<seed>
  train::TrainConfig config;
  nlohmann::json grid = nlohmann::json::object();           // this run's value of each grid axis
  train::SweepStatus status = train::SweepStatus::pending;  // running: pid is the process training it
  long pid = 0;
  bool stopped = false;  // running in another process that is stopped (SIGSTOP, Ctrl-Z): it goes on only if woken
  long diverged_step = -1;
  double final_loss = 0;
  double seconds = 0;
};

/// Whether the grid holds the point whose settings `point` holds (scale, optimizer, d_k, lr, seed and the grid values
/// applied; `grid`: its value of each grid axis, by key): the preset's keep filter keeps it, and no only_readers axis
/// that the point does not read has a value there other than its first (the one run made without it).
bool keeps_point(const SweepConfig& config, const train::TrainConfig& point, const nlohmann::json& grid);

/// The runs of the grid, in order (d_k, scale, arm, seed), with their directories. Throws ConfigError on bad settings
/// (empty lists, duplicates, invalid run settings).
std::vector<SweepRun> plan_sweep(const SweepConfig& config);

/// One line naming the grid's axes in plan order with their sizes and values, marking those taken from defaults, and
/// the number of runs `planned` (fewer than the product when a preset's filter leaves points out), e.g.
/// "grid: scale × 2 (none, sqrt_dk) · d_k × 3 (default: 16, 64, 256) · arms × 1 (adamw@0.01) · seed × 1 (0) = 6 runs".
std::string grid_summary(const SweepConfig& config, std::size_t planned);

struct SweepResult {
  std::vector<SweepRun> runs;
  int stop_signal = 0;  // the signal that interrupted the sweep, 0 if it ran to its end
};

/// Runs the plan; writes out/sweep.json (atomically) whenever a run starts or ends. `progress` gets each line of
/// `start_line` (if not empty) once the sweep holds its directory, so a refused sweep says nothing else, then one line
/// per finished run ("runs done / total, elapsed, ETA") and per run left alone. SIGINT, SIGTERM and SIGHUP, unless
/// ignored when the sweep started (nohup), stop it: no new run starts, the running children get SIGTERM (and SIGCONT,
/// should one be stopped) and write a checkpoint ("interrupted"), the index is written, and the result names the signal
/// (the handlers in place before are restored). Throws ConfigError naming --out when another sweep holds the
/// directory's lock (with its pid) or the directory holds other runs.
SweepResult run_sweep(const SweepConfig& config, const std::function<void(const std::string&)>& progress,
                      const std::string& start_line = "");

/// One line for the end of a sweep: "4 runs in 12 s: 3 complete, 1 failed", or "interrupted by SIGHUP: 2 of 4 runs
/// complete, 2 interrupted (resumable)". Counts that are zero are left out.
std::string sweep_summary(const SweepResult& result, double seconds);

/// The exit code of `xgrad sweep`: 128 + the signal when interrupted (the command ends by the signal itself, which a
/// shell reports as that code); 1 when a run failed, was interrupted, or is still running in another process; 0 when
/// every run is complete or diverged.
int sweep_exit_code(const SweepResult& result);

/// Writes the sweep directory's manifest without running anything: takes the sweep's lock (refused with ConfigError
/// naming --out, as run_sweep is, while another sweep holds it), checks the runs already on disk as run_sweep does,
/// writes every point's config file (out/configs/<name>.json) and out/sweep.json, whose "runs" list every grid point
/// with its "index", "name", "dir" (relative to out), "config" (its resolved settings) and status, then lets go of
/// the lock. A point keeps the index an earlier sweep into `out` gave it; new points get the next free ones. Returns
/// the plan with each run's index and status (skipped = complete on disk, pending = to run).
std::vector<SweepRun> write_sweep_manifest(const SweepConfig& config);

/// What the run directory config.out holds for a point to be run with `config`: nothing (or an unreadable run, to be
/// redone), this very run finished (summary.json, diverged or not), this run cut short with a checkpoint (to be
/// resumed) or without one (to be redone), or a run with other settings (refused: a sweep never silently replaces
/// another's results; `differing_key`, if given, gets the first setting that differs, with both values).
enum class OnDisk { none, complete, resumable, partial, other };
OnDisk on_disk(const train::TrainConfig& config, std::string* differing_key);

/// Where the sweep writes the config file of run `name` (`xgrad train --config FILE` runs it): out/configs/name.json.
std::string run_config_path(const SweepConfig& config, const std::string& name);

}  // namespace xgrad::cli
