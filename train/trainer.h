// One training run: model, data, optimizer, the step loop, and the files it writes.
#pragma once

#include <functional>

#include <nlohmann/json.hpp>

#include "nn/model.h"
#include "nn/optim.h"
#include "train/config.h"
#include "train/data_parallel.h"
#include "train/run_files.h"

namespace xgrad::train {

/// Callbacks into each training step, for instrumenting a run from code (the tests inject faults through them: a
/// NaN gradient, ranks whose weights differ). Each is optional. `named` holds the model's parameters in
/// named_parameters() order; a callback may change their values or gradients, and is called on every rank.
struct StepHooks {
  /// At the start of `step`, before the ranks' parameter check and the batch.
  std::function<void(std::size_t step, const NamedParameters& named)> on_step_start;
  /// After backward, before the ranks' gradients are summed, the gradient norms are taken and clipping.
  std::function<void(std::size_t step, const NamedParameters& named)> after_backward;
};

/// Trains one configuration and writes into config.out: config.json (resolved config with its paths made absolute,
/// environment, and under "inputs" each file the task read with its size and content hash),
/// metrics.csv (header, then one row per step, flushed per row), checkpoint.safetensors (every
/// config.checkpoint_every steps and at the end; contents in run_checkpoint.h), summary.json. Creates the directory
/// and checks it is writable; refuses (ConfigError) a directory that already holds a run (config.json, metrics.csv,
/// summary.json or a checkpoint) unless config.overwrite (which deletes those files first) or config.resume.
///
/// While it writes, train() holds an exclusive flock on config.out/.lock (released on return, exit or kill); a second
/// train() on the same directory, in any process, is refused with ConfigError naming the holder's pid.
///
/// config.resume continues the run in config.out: config must describe the same run as its config.json
/// (check_same_run), its input files must hold the bytes recorded there (check_same_inputs: ConfigError naming the
/// file and what changed), and so must the settings in the checkpoint's metadata (ConfigError naming every
/// differing setting and both files otherwise: a checkpoint copied from another run, or a config.json edited since);
/// the weights, optimizer state and running sums come from checkpoint.safetensors (a run without one starts again at
/// step 0, with a warning saying so and how many metrics.csv rows it discards), metrics.csv is cut back to the
/// checkpoint's step (rows after it are computed again, identically) and training continues to config.steps. With one
/// BLAS thread a run interrupted at any point and resumed writes the same metrics.csv, byte for byte except step_ms, as
/// one that was never interrupted. Raising steps continues a finished run; its old last row keeps the statistics every
/// last step gets.
///
/// Non-finite loss or gradient at step s: the warning names s and the first non-finite parameter value or gradient;
/// checkpoint-nonfinite.safetensors gets the state before that step with its gradients (metadata nonfinite = true;
/// written at the first non-finite step of a session; checkpoint.safetensors keeps the last good state). on_nan =
/// "stop": the run stops there, keeps every row written and reports diverged = true (not an exception: divergence is a
/// result). on_nan = "skip": the step's update is dropped, its row is written (nan where the values are), and training
/// goes on (summary.skipped_steps counts them); a parameter value that is itself non-finite, or kMaxConsecutiveSkips
/// non-finite steps in a row, cannot be skipped past and stop the run as above.
///
/// request_stop (a SIGINT/SIGTERM/SIGHUP handler) makes the run finish the step in progress, write a checkpoint, and
/// return with stop_signal set and no summary.json.
///
/// Data parallelism (started by mpirun or srun --mpi=pmix, platform/distributed.h): every one of the P processes
/// draws the batch a one-process run draws at each step and computes rows [r·B/P, (r+1)·B/P) of it (B =
/// config.batch_size, which must be divisible by P: ConfigError otherwise); one allreduce per step sums the gradients,
/// each shard's weighted by its share of the batch's target positions, so that the update, the loss, accuracy,
/// gradient norms and attention statistics are those of one process up to the order of the sums (except under
/// --dropout: each rank draws its own masks, from (seed, step, rank), so the numbers then depend on P). Rank 0 alone
/// reads and writes the run directory (config.json records environment.world_size = P); the others start from its
/// parameters and optimizer state (also after --resume, which may use another P). Every log_every steps and at the
/// end the ranks compare a checksum of their parameters (std::runtime_error naming the step if one differs). A stop
/// request on any rank stops every rank after the same step.
///
/// Throws ConfigError for bad settings (and a --init-from file that does not fit the model), std::runtime_error for
/// I/O failures and unreadable checkpoints.
///
/// metrics.csv columns: see train/run_files.h (names) and train/step_metrics.cpp (what each holds). Attention
/// statistics and RMS columns are computed every log_every steps and on the last step, eval_loss every eval_every
/// steps; other rows hold nan there.
RunSummary train(const TrainConfig& config, const StepHooks& hooks = {});

/// Under on_nan = "skip", this many non-finite steps in a row stop the run as diverged.
inline constexpr std::size_t kMaxConsecutiveSkips = 10;

/// Asks a train() in progress (or about to start) to stop after its current step; `signal` is reported in
/// RunSummary::stop_signal. Async-signal-safe: meant to be called from a signal handler.
void request_stop(int signal) noexcept;

/// The model settings of `config` for `task` (vocabulary and positions come from the task).
nn::ModelConfig model_config(const TrainConfig& config, const data::Task& task);
/// The same for a vocabulary of `vocab_size` tokens and `max_seq_len` positions (what a run's config.json records
/// under "derived", read back without building the task).
nn::ModelConfig model_config(const TrainConfig& config, std::size_t vocab_size, std::size_t max_seq_len);

/// The run's optimizer over `model`'s named parameters with their roles (nn::optimizer_parameters) at --lr with the
/// optimizer's settings; under --parametrization mup with muP's per-parameter learning-rate factors (nn/mup.h).
/// Throws what make_optimizer and mup_plan throw.
std::unique_ptr<nn::Optimizer> make_run_optimizer(const TrainConfig& config, const nn::AttentionModel& model);

}  // namespace xgrad::train
