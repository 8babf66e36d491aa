#include "train/trainer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "autograd/blas.h"
#include "data/registry.h"
#include "nn/checkpoint.h"
#include "nn/lr_schedule.h"
#include "nn/mup.h"
#include "platform/distributed.h"
#include "platform/environment.h"
#include "platform/signals.h"
#include "train/json_file.h"
#include "train/length_eval.h"
#include "train/metrics_log.h"
#include "train/number_format.h"
#include "train/run_checkpoint.h"
#include "train/run_directory.h"
#include "train/settings.h"
#include "train/shell_quote.h"
#include "train/step_metrics.h"
#include "train/tensorboard.h"

namespace xgrad::train {

namespace fs = std::filesystem;

nn::ModelConfig model_config(const TrainConfig& cfg, const data::Task& task) {
  return model_config(cfg, task.vocab_size(), task.seq_len());
}

nn::ModelConfig model_config(const TrainConfig& cfg, std::size_t vocab_size, std::size_t max_seq_len) {
  nn::ModelConfig mc = cfg.model;
  mc.vocab_size = vocab_size;
  mc.max_seq_len = max_seq_len;
  // The scaling's and the attention layer's own settings (keys are unique across registries).
  nlohmann::json model_settings = component_values(cfg, "scale").json();
  model_settings.update(component_values(cfg, "attention").json());
  mc.settings = SettingValues(model_settings);
  return mc;
}

std::unique_ptr<nn::Optimizer> make_run_optimizer(const TrainConfig& cfg, const nn::AttentionModel& model) {
  auto opt = nn::make_optimizer(cfg.optimizer, nn::optimizer_parameters(model.named_parameters()), cfg.lr,
                                component_values(cfg, "optimizer"));
  if (cfg.model.parametrization == nn::Parametrization::mup)
    opt->set_lr_multipliers(nn::mup_plan(model.config(), cfg.model.base_width).lr_multipliers(cfg.optimizer));
  return opt;
}

namespace {

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "request_stop must be async-signal-safe");

// The stop signal received (0 if none), consumed: a later train() in this process runs normally. The run has seen
// it and is stopping, so the signal handler's watchdog (platform::arm_stop_watchdog) is called off.
int take_stop_signal() {
  const int signal = g_stop_signal.exchange(0);
  if (signal) platform::disarm_stop_watchdog();
  return signal;
}

std::string first_nonfinite(const NamedParameters& named) {
  auto finite = [](const xt::xarray<float>& a) {
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!std::isfinite(a.data()[i])) return false;
    return true;
  };
  // A non-finite weight is the cause when there is one; the gradients are non-finite because of it.
  for (const auto& [name, p] : named)
    if (!finite(p.value())) return "value of " + name;
  for (const auto& [name, p] : named)
    if (p.has_grad() && !finite(p.grad())) return "gradient of " + name;
  return "";
}

// The first non-finite optimizer buffer ("v of <parameter>"), or "". A moment that overflowed makes every update 0
// (AdamW: m/sqrt(v) = 0 at v = inf) while loss and gradients stay finite, so the step check alone never sees it.
std::string first_nonfinite_state(const nn::Optimizer& opt, const NamedParameters& named) {
  const nn::OptimizerState state = opt.state();
  for (const auto& [kind, arrays] : state.buffers)
    for (std::size_t i = 0; i < arrays.size(); ++i)
      for (std::size_t k = 0; k < arrays[i].size(); ++k)
        if (!std::isfinite(arrays[i].data()[k]))
          return kind + " of " + (i < named.size() ? named[i].first : "parameter " + std::to_string(i));
  return "";
}

// What made a step non-finite, with the values: the loss, or (at a finite loss) the gradient.
std::string nonfinite_values(const StepRecord& r) {
  auto text = [](double v) { return std::isnan(v) ? std::string("nan") : fmt::format("{:.6g}", v); };
  if (std::isfinite(r.loss))
    return fmt::format("non-finite gradient (grad_norm={}; loss={} is finite)", text(r.grad_norm), text(r.loss));
  return fmt::format("non-finite loss (loss={}, grad_norm={})", text(r.loss), text(r.grad_norm));
}

// The config.json of a run being resumed (as read into `stored_json`), checked to describe the run `cfg` asks for;
// nothing if there is none.
bool read_stored_config(const TrainConfig& cfg, TrainConfig& stored, nlohmann::json& stored_json) {
  const fs::path config_path = fs::path(cfg.out) / kConfigFile;
  std::error_code ec;
  if (!cfg.resume || !fs::exists(config_path, ec)) return false;
  try {
    stored_json = read_json_file(config_path);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError("--resume: " + config_path.string() + " is not valid JSON: " + e.what());
  }
  stored = TrainConfig::from_json(stored_json, config_path.string());
  stored.out = cfg.out;
  check_same_run(stored, cfg);
  return true;
}

const char* nonempty_env(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}

// One run in progress: its directory, task, model, optimizer and running sums, with the steps of train()'s loop.
class Run {
 public:
  // `built` is the task validate() built from cfg: its files are read once.
  Run(const TrainConfig& cfg, std::unique_ptr<data::Task> built);
  StepRecord train_step(std::size_t step);
  // With several ranks: sums the gradients, loss and hits of the ranks' shards into `r` (one allreduce) and, on a
  // measured step, gathers the attention records of the global batch.
  void after_optimizer_step(bool updated);
  void reduce_step(StepRecord& r, const data::Batch& shard, std::size_t shard_begin, double shard_loss,
                   std::size_t global_targets);
  // With several ranks: stops the run (std::runtime_error naming `where`) unless every rank holds rank 0's weights.
  void check_same_parameters_across_ranks(const std::string& where) const;
  // Adds a step to the running sums, or handles a non-finite one (skip, or stop as diverged). False: stop the run.
  bool account(const StepRecord& record, RunSummary& summary);
  void save(const fs::path& path, bool nonfinite);
  void log_start(const StepMetrics& metrics) const;
  void print_progress(const StepRecord& record) const;
  // The checkpoint at the end (or where a stop request left the run) and, for a run that was not stopped,
  // summary.json.
  RunSummary finish(RunSummary summary);

  const TrainConfig& cfg;
  // Data parallelism: this process is rank `rank` of `world_size`; rank 0 alone reads and writes the run directory.
  const int world_size = platform::world_size();
  const int rank = platform::rank();
  bool root() const { return rank == 0; }
  double allreduce_seconds = 0;  // this session's time in the gradient allreduce
  std::size_t allreduce_steps = 0;
  const std::chrono::steady_clock::time_point wall_start = std::chrono::steady_clock::now();
  const fs::path dir;
  const std::string name;  // the run directory's name, in log lines
  const fs::path checkpoint_path;
  RunLock lock;
  std::unique_ptr<data::Task> task;
  std::vector<data::InputFile> inputs;  // recorded in config.json
  std::unique_ptr<nn::AttentionModel> model;
  NamedParameters named;
  std::unique_ptr<nn::Optimizer> opt;
  // The learning rate of each step (a function of the step alone: nothing to broadcast or checkpoint).
  const nn::LRScheduleEntry& schedule = nn::LRScheduleRegistry::instance().at(cfg.lr_schedule);
  const SettingValues schedule_settings = component_values(cfg, "lr_schedule");
  RunProgress progress;
  StepHooks hooks;

 private:
  void resume_from_checkpoint(const TrainConfig* stored);
  void start_from_scratch();
  void write_config_json() const;
  double session_seconds() const;
  bool nonfinite_saved_ = false;
  std::vector<float> allreduce_buffer_;
  // XGRAD_SGEMM_COUNT=FILE (bench/nanogpt_cpu.sh): every sgemm call inside step_ms's window of the steps that record
  // no statistics is counted by shape and written to FILE by finish(); unset, nothing is counted.
  const char* const sgemm_count_file_ = nonempty_env("XGRAD_SGEMM_COUNT");
  std::size_t sgemm_counted_steps_ = 0;
  void write_sgemm_counts() const;
};

Run::Run(const TrainConfig& config, std::unique_ptr<data::Task> built)
    : cfg(config),
      dir(config.out),
      name(dir.filename().string()),
      checkpoint_path(dir / kCheckpointFile),
      task(std::move(built)) {
  if (!root()) {
    // The other ranks compute and touch no file of the run: they start from rank 0's state (broadcast_from_root).
    platform::set_threads(cfg.threads);
    platform::set_flush_denormals(cfg.flush_denormals);
    model = std::make_unique<nn::AttentionModel>(model_config(cfg, *task), cfg.seed);
    named = model->named_parameters();
    opt = make_run_optimizer(cfg, *model);
    broadcast_from_root(cfg, *model, *opt, progress);
    return;
  }
  std::error_code ec;
  // A directory that exists is locked before anything in it is read: a second process is told so, whatever else
  // it would be refused for.
  if (fs::is_directory(dir, ec)) lock.acquire(dir, false);
  TrainConfig stored;
  nlohmann::json stored_json;
  const bool have_stored = read_stored_config(cfg, stored, stored_json);
  check_run_directory(cfg);
  // The files the run reads: the task's, and the weights it starts from (read again if it restarts from step 0).
  inputs = task->input_files();
  if (!cfg.init_from.empty())
    inputs.push_back(data::fingerprint_file(cfg.init_from, "init_from", "--init-from: file '" + cfg.init_from + "'"));
  if (have_stored) {
    const std::string unchecked = check_same_inputs(cfg, stored_json, inputs);
    if (!unchecked.empty()) spdlog::warn("[{}] --resume: {}", name, unchecked);
  }
  if (!cfg.resume) check_recorded_inputs(cfg, inputs);
  platform::set_threads(cfg.threads);
  platform::set_flush_denormals(cfg.flush_denormals);

  model = std::make_unique<nn::AttentionModel>(model_config(cfg, *task), cfg.seed);
  named = model->named_parameters();
  opt = make_run_optimizer(cfg, *model);

  // Refused before "resuming from ..." is said of a run that cannot go on.
  if (cfg.resume) check_writable(dir);
  if (cfg.resume && fs::exists(checkpoint_path))
    resume_from_checkpoint(have_stored ? &stored : nullptr);
  else
    start_from_scratch();
  prepare_run_directory(cfg, lock);
  write_config_json();
  broadcast_from_root(cfg, *model, *opt, progress);
}

void Run::resume_from_checkpoint(const TrainConfig* stored) {
  nn::Checkpoint c;
  try {
    c = nn::load_checkpoint(checkpoint_path.string());
  } catch (const nn::CheckpointError& e) {
    throw std::runtime_error(std::string("cannot resume: ") + e.what() + " (start over with --overwrite)");
  }
  // The checkpoint must be this run's: one copied from another run, or a config.json edited since, would mix two
  // runs silently.
  if (stored && c.metadata.count("config")) {
    TrainConfig written;
    try {
      const std::string source = checkpoint_path.string() + " (metadata 'config')";
      std::istringstream text(c.metadata.at("config"));
      written = TrainConfig::from_json(parse_json(text, source), source);
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error("cannot resume: " + checkpoint_path.string() +
                               ": metadata 'config' is not valid JSON: " + e.what());
    }
    const nlohmann::json in_checkpoint = written.to_json(), in_config = stored->to_json();
    std::string differences;
    for (const std::string& key : differing_settings(written, *stored)) {
      const bool first = differences.empty();  // names the files; the settings after it refer to them
      differences += "; " + flag_of(key) + " is " + in_checkpoint.value(key, nlohmann::json()).dump() + " in " +
                     (first ? checkpoint_path.string() : "the checkpoint") + " but " +
                     in_config.value(key, nlohmann::json()).dump() + " in " +
                     (first ? (dir / kConfigFile).string() : std::string(kConfigFile));
    }
    if (!differences.empty())
      throw ConfigError("--resume: " + differences.substr(2) +
                        "; the checkpoint is not this run's (start over with --overwrite)");
  }
  try {
    restore_run_checkpoint(c, checkpoint_path.string(), cfg, *model, *opt, progress);
  } catch (const nn::CheckpointError& e) {
    throw std::runtime_error(std::string("cannot resume: ") + e.what() + " (start over with --overwrite)");
  }
  if (progress.step > cfg.steps)
    throw ConfigError("--steps: the checkpoint in " + dir.string() + " is at step " + std::to_string(progress.step) +
                      ", beyond --steps " + std::to_string(cfg.steps));
  spdlog::info("[{}] resuming from {} at step {}", name, checkpoint_path.string(), progress.step);
}

void Run::start_from_scratch() {
  if (cfg.resume) {
    const std::size_t rows = count_metrics_rows(dir);
    spdlog::warn(
        "[{}] --resume: {} holds no {} (deleted, or the run stopped before its first checkpoint); "
        "starting again from step 0 and restarting metrics.csv{}",
        name, dir.string(), kCheckpointFile, rows ? fmt::format(" ({} rows discarded)", rows) : std::string());
  }
  if (!cfg.init_from.empty()) {
    try {
      load_model_weights(nn::load_checkpoint(cfg.init_from), cfg.init_from, *model);
    } catch (const nn::CheckpointError& e) {
      throw ConfigError(std::string("--init-from: ") + e.what());
    }
  }
}

void Run::write_config_json() const {
  nlohmann::json config_json = cfg.to_json();
  config_json["derived"] = {{"vocab_size", task->vocab_size()},
                            {"seq_len", task->seq_len()},
                            {"chance_loss", task->chance_loss()},
                            {"num_parameters", model->num_parameters()}};
  config_json["environment"] = platform::environment_json();
  config_json["environment"]["world_size"] = world_size;  // MPI processes of this session (1 without mpirun)
  config_json["inputs"] = nlohmann::json::array();
  for (const data::InputFile& f : inputs) config_json["inputs"].push_back(f.to_json());
  write_json(dir / kConfigFile, config_json);
}

void Run::log_start(const StepMetrics& metrics) const {
  spdlog::info(
      "[{}] training {}: d_model={} n_heads={} d_k={} n_layers={} scale={} optimizer={} lr={} steps={} "
      "params={}",
      name, cfg.task, cfg.model.d_model, cfg.model.n_heads, cfg.head_size(), cfg.model.n_layers, cfg.model.scale,
      cfg.optimizer, cfg.lr, cfg.steps, model->num_parameters());
  // Said before the first step: a model of many heads writes half a megabyte per logged row, which a long run turns
  // into gigabytes before anyone looks.
  const DiskEstimate disk = estimate_disk(cfg, metrics.columns(), metrics.measured_only_columns(),
                                          model->num_parameters(), opt->state_kinds().size(), progress.step);
  spdlog::info(
      "[{}] estimate: memory about {:.2f} GiB; disk about {} ({} rows of metrics.csv, {} per logged row; "
      "checkpoint {})",
      name, cfg.estimate_memory(*task).gib(), byte_text(disk.bytes()), disk.rows, byte_text(disk.logged_row),
      byte_text(disk.checkpoint));
}

double Run::session_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
}

void Run::save(const fs::path& path, bool nonfinite) {
  RunProgress p = progress;
  p.wall_seconds += session_seconds();
  nn::save_checkpoint(path.string(), make_run_checkpoint(cfg, *model, *opt, p, nonfinite));
}

// Forward, loss, backward, gradient norms, clipping and the update; a non-finite step saves the state before it
// (with the gradients that broke it) and applies no update.
StepRecord Run::train_step(std::size_t step) {
  const auto t0 = std::chrono::steady_clock::now();
  StepRecord r;
  r.step = step;
  r.measured = step % cfg.log_every == 0 || step + 1 == cfg.steps;
  if (sgemm_count_file_) blas::set_gemm_counting(!r.measured);
  for (auto& layer : model->attention_layers()) layer->record_attention = r.measured;

  if (hooks.on_step_start) hooks.on_step_start(step, named);
  if (world_size > 1 && r.measured) check_same_parameters_across_ranks(fmt::format("step {}", step));
  // Every rank draws the one-process batch and computes its own rows of it.
  data::Batch global = task->batch(cfg.data_seed, step, cfg.batch_size);
  const auto [shard_begin, shard_end] = shard_rows(cfg.batch_size, rank, world_size);
  data::Batch batch = world_size > 1 ? batch_rows(global, shard_begin, shard_end) : std::move(global);
  // The step's dropout masks: a function of the seed, the step and the rank (each rank drops from its own rows).
  if (cfg.model.dropout > 0)
    model->set_dropout_generator(
        Generator(cfg.seed, nn::AttentionModel::kDropoutStream ^ (static_cast<std::uint64_t>(rank) << 32), step));
  const nn::TargetLoss out = nn::loss_at_targets(*model, batch.inputs, batch.targets);  // readout at targets only
  const Tensor z = z_loss(out.logits, out.targets);  // logged for every run, added to the loss with --z-loss
  Tensor loss = cfg.z_loss > 0 ? out.loss + z * cfg.z_loss : out.loss;
  r.loss = out.loss.item();
  r.z_loss = z.item();
  r.accuracy = accuracy(out.logits.value(), out.targets);
  opt->zero_grad();
  loss.backward();
  if (hooks.after_backward) hooks.after_backward(step, named);
  if (world_size > 1) reduce_step(r, batch, shard_begin, r.loss, count_targets(global.targets));
  r.targets = world_size > 1 ? std::move(global.targets) : std::move(batch.targets);

  std::vector<Tensor> params;
  for (const auto& entry : named) params.push_back(entry.second);
  r.grad_norms = nn::grad_norms(params);
  double sum_squares = 0;  // the global norm as clip_grad_norm computes it, before any clipping
  for (const double norm : r.grad_norms) sum_squares += norm * norm;
  r.grad_norm = std::sqrt(sum_squares);
  r.finite = is_finite_step(r.loss, r.grad_norm);
  if (r.finite) {
    nn::clip_grads_with_norm(model->parameters(), cfg.clip_grad_norm, r.grad_norm);  // the norm just logged
  } else {
    r.first_nonfinite = first_nonfinite(named);
    // The state before this step, with the gradients that broke it; checkpoint.safetensors keeps the last good one.
    if (!nonfinite_saved_ && root()) save(dir / kNonfiniteCheckpointFile, true);
    nonfinite_saved_ = true;
  }
  if (r.measured)
    for (const auto& [param, p] : named) r.before_update.push_back(p.value());
  opt->set_lr(schedule.lr_at(cfg.lr, step, cfg.steps, schedule_settings));
  if (r.finite) opt->step();
  after_optimizer_step(r.finite);
  r.lr = opt->lr();
  r.step_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (sgemm_count_file_) blas::set_gemm_counting(false);
  sgemm_counted_steps_ += sgemm_count_file_ && !r.measured;
  return r;
}

// Lets each attention layer's scaling act on the weights the update left (QK-Clip) given the step's largest logits:
// under data parallelism every rank takes the maximum over all ranks' rows, so that every rank clips alike.
void Run::after_optimizer_step(bool updated) {
  for (const auto& layer : model->attention_layers()) {
    if (layer->step_max_logits.empty()) continue;
    if (world_size > 1) platform::allreduce_max(layer->step_max_logits.data(), layer->step_max_logits.size());
    layer->after_optimizer_step(updated);
  }
}

void Run::reduce_step(StepRecord& r, const data::Batch& shard, std::size_t shard_begin, double shard_loss,
                      std::size_t global_targets) {
  // The loss is a mean over the positions that carry a target, whose count differs between shards: each shard's
  // mean (and gradient) counts in proportion to its targets.
  const std::size_t shard_targets = count_targets(shard.targets);
  const double weight = global_targets ? static_cast<double>(shard_targets) / static_cast<double>(global_targets) : 0.0;
  const double hits = std::round(r.accuracy * static_cast<double>(shard_targets));
  const ReducedStep reduced =
      allreduce_gradients(named, weight, shard_targets ? shard_loss * weight : 0.0,
                          shard_targets ? r.z_loss * weight : 0.0, hits, g_stop_signal.load() != 0, allreduce_buffer_);
  allreduce_seconds += reduced.seconds;
  ++allreduce_steps;
  r.loss = global_targets ? reduced.loss : shard_loss;
  r.z_loss = global_targets ? reduced.z_loss : r.z_loss;
  r.accuracy = global_targets ? reduced.hits / static_cast<double>(global_targets) : 0.0;
  r.stop_requested = reduced.stop;
  if (r.measured) gather_attention_records(*model, shard_begin, cfg.batch_size, weight);
}

void Run::check_same_parameters_across_ranks(const std::string& where) const {
  check_same_parameters(parameter_checksums(named), where);
}

bool Run::account(const StepRecord& r, RunSummary& summary) {
  if (r.step == 0) progress.first_loss = r.loss;
  summary.steps_done = r.step + 1;
  double wq = 0, wk = 0;
  for (std::size_t i = 0; i < named.size(); ++i) {
    const double square = r.grad_norms[i] * r.grad_norms[i];
    if (metrics_columns::is_query_weight(named[i].first)) wq += square;
    if (metrics_columns::is_key_weight(named[i].first)) wk += square;
  }
  progress.gradients.add(r.loss, r.grad_norm, std::sqrt(wq), std::sqrt(wk));
  if (r.finite) {
    progress.consecutive_skips = 0;
    progress.recent_loss.push_back(r.loss);
    progress.recent_accuracy.push_back(r.accuracy);
    if (progress.recent_loss.size() > RunProgress::kRecent) {
      progress.recent_loss.pop_front();
      progress.recent_accuracy.pop_front();
    }
    progress.step = r.step + 1;
    return true;
  }
  // Skipping cannot help once a weight itself is non-finite, nor when step after step fails (weights so large that
  // every forward pass overflows): the run would skip to its end without learning.
  const bool weight_broken = r.first_nonfinite.rfind("value of ", 0) == 0;
  // At a non-finite loss every gradient is non-finite too: naming the first of them would read as a second cause.
  const bool named = weight_broken || (std::isfinite(r.loss) && !r.first_nonfinite.empty());
  const std::string where = named ? "first non-finite: " + r.first_nonfinite
                            : std::isfinite(r.loss)
                                ? "no parameter or gradient is non-finite (the forward pass overflowed)"
                                : "every weight is finite (the forward pass overflowed)";
  const bool too_many = progress.consecutive_skips + 1 >= kMaxConsecutiveSkips;
  if (cfg.on_nan == OnNan::skip && !weight_broken && !too_many) {
    ++progress.skipped_steps;
    ++progress.consecutive_skips;
    progress.step = r.step + 1;
    spdlog::warn("[{}] step {}: {}; {}; step skipped (--on-nan skip)", name, r.step, nonfinite_values(r), where);
    return true;
  }
  summary.diverged = true;
  summary.diverged_step = static_cast<long>(r.step);
  const std::string why = cfg.on_nan == OnNan::stop ? ""
                          : weight_broken           ? " (a weight is non-finite: skipping cannot recover)"
                                                    : " (" + std::to_string(kMaxConsecutiveSkips) +
                                                " non-finite steps in a row: skipping does not recover)";
  spdlog::warn(
      "[{}] diverged at step {}: {}; {}; stopping{} (every row so far is in metrics.csv, the state before "
      "this step in {})",
      name, r.step, nonfinite_values(r), where, why, (dir / kNonfiniteCheckpointFile).string());
  return false;
}

void Run::print_progress(const StepRecord& r) const {
  if ((r.step + 1) % cfg.print_every == 0 || r.step + 1 == cfg.steps)
    spdlog::info("[{}] step {:>5}/{}  loss {}  acc {:.3f}  grad_norm {:.3g}  {:.2f} ms/step", name, r.step + 1,
                 cfg.steps, format_number(r.loss, 4), r.accuracy, r.grad_norm, r.step_ms);
}

// CSV: steps (how many were counted), trans_a, trans_b (0/1), m, n, k, calls (over all counted steps).
void Run::write_sgemm_counts() const {
  std::ofstream out(sgemm_count_file_);
  out << "steps,trans_a,trans_b,m,n,k,calls\n";
  for (const blas::GemmCount& g : blas::gemm_counts())
    out << sgemm_counted_steps_ << ',' << g.trans_a << ',' << g.trans_b << ',' << g.m << ',' << g.n << ',' << g.k << ','
        << g.calls << '\n';
  if (!out.flush()) throw std::runtime_error(std::string("XGRAD_SGEMM_COUNT: cannot write ") + sgemm_count_file_);
}

RunSummary Run::finish(RunSummary summary) {
  if (sgemm_count_file_ && root()) write_sgemm_counts();
  if (world_size > 1) {
    const std::vector<std::uint64_t> checksums = parameter_checksums(named);
    std::string listed;
    for (std::size_t i = 0; i < checksums.size(); ++i)
      listed += fmt::format("{}rank {} {:016x}", i ? ", " : "", i, checksums[i]);
    spdlog::info("[{}] {} ranks; parameter checksums after step {}: {}; allreduce {:.3f} ms/step over {} steps", name,
                 world_size, progress.step, listed, allreduce_steps ? 1e3 * allreduce_seconds / allreduce_steps : 0.0,
                 allreduce_steps);
    check_same_parameters(checksums, fmt::format("after step {}", progress.step));
  }
  if (!root()) {
    platform::barrier();  // rank 0 has written its files before any rank ends (a launcher stops the job then)
    return summary;
  }
  if (!summary.diverged) save(checkpoint_path, false);
  if (summary.stop_signal) {
    spdlog::warn("[{}] stopped by {} after step {}; checkpoint written to {}; continue with: xgrad train --resume {}",
                 name, platform::signal_name(summary.stop_signal), progress.step, checkpoint_path.string(),
                 shell_quote_path(dir.string()));
    summary.wall_seconds = progress.wall_seconds + session_seconds();
    platform::barrier();
    return summary;
  }
  summary.first_loss = progress.first_loss;
  summary.mean_grad_norm_w_q = progress.gradients.mean_grad_norm_w_q();
  summary.mean_grad_norm_w_k = progress.gradients.mean_grad_norm_w_k();
  summary.frac_zero_grad_w_q = progress.gradients.frac_zero_grad_w_q();
  summary.frac_zero_grad_w_k = progress.gradients.frac_zero_grad_w_k();
  summary.frac_near_zero_grad_w_q = progress.gradients.frac_near_zero_grad_w_q();
  summary.frac_near_zero_grad_w_k = progress.gradients.frac_near_zero_grad_w_k();
  summary.skipped_steps = progress.skipped_steps;
  // The last min(20, steps) finite steps, summed oldest first.
  const std::size_t window = std::min<std::size_t>({RunProgress::kRecent, cfg.steps, progress.recent_loss.size()});
  double tail_loss = 0, tail_acc = 0;
  for (std::size_t i = progress.recent_loss.size() - window; i < progress.recent_loss.size(); ++i) {
    tail_loss += progress.recent_loss[i];
    tail_acc += progress.recent_accuracy[i];
  }
  summary.final_loss = summary.diverged || window == 0 ? NAN : tail_loss / static_cast<double>(window);
  summary.final_accuracy = summary.diverged || window == 0 ? 0.0 : tail_acc / static_cast<double>(window);
  // The final weights alone decide these, so a resumed run gets the uninterrupted one's.
  if (!summary.diverged) {
    summary.length_eval = evaluate_lengths(*model, *task, cfg, [] { return g_stop_signal.load() != 0; });
    // Stopped during the evaluation: ended as a stop during training is (the checkpoint holds every step; no
    // summary.json, so --resume evaluates again).
    if (const int sig = take_stop_signal()) {
      summary.stop_signal = sig;
      spdlog::warn(
          "[{}] stopped by {} during the evaluation at other lengths, after all {} steps; checkpoint written "
          "to {}; evaluate with: xgrad train --resume {}",
          name, platform::signal_name(sig), progress.step, checkpoint_path.string(), shell_quote_path(dir.string()));
      summary.length_eval.clear();
      summary.wall_seconds = progress.wall_seconds + session_seconds();
      platform::barrier();
      return summary;
    }
  }
  summary.wall_seconds = progress.wall_seconds + session_seconds();
  write_json(dir / kSummaryFile, summary.to_json());
  platform::barrier();
  return summary;
}

// One step's row: to metrics.csv and, under --tensorboard, to the event file, as it is written.
void write_row(MetricsLog& log, EventFile* events, const std::vector<double>& row, const std::vector<bool>& empty) {
  log.write(row, empty);
  if (events) events->write(wall_time_now(), row, empty);
}

}  // namespace

void request_stop(int signal) noexcept { g_stop_signal.store(signal); }

RunSummary train(const TrainConfig& requested, const StepHooks& hooks) {
  const platform::FloatControlScope restore_float_control;  // the run sets flush_denormals on this thread
  // A resumed run keeps the paths its config.json holds: check_same_inputs refuses relative ones it cannot check.
  const TrainConfig cfg = requested.resume ? requested : with_absolute_paths(requested);
  const int world_size = platform::world_size();
  if (cfg.batch_size % static_cast<std::size_t>(world_size) != 0)
    throw ConfigError(
        fmt::format("--batch-size: {} is not divisible by the {} MPI processes (mpirun -np {}); the "
                    "global batch is split evenly between them",
                    cfg.batch_size, world_size, world_size));
  const bool root = platform::rank() == 0;
  // a file moved away or resized: said so before reading anything
  if (cfg.resume && root) check_inputs_on_disk(cfg);
  if (cfg.resume && root) {  // what a resumed run may not change comes first: validate()'s advice is for a new run
    TrainConfig stored;
    nlohmann::json stored_json;
    read_stored_config(cfg, stored, stored_json);
  }
  Run run(cfg, cfg.validate());
  run.hooks = hooks;
  StepMetrics metrics(*run.model, *run.task, cfg);
  if (cfg.resume && root) {
    std::ifstream existing(run.dir / kMetricsFile);
    std::string header;
    if (std::getline(existing, header)) metrics.keep_columns_of(header);
  }
  const std::unique_ptr<MetricsLog> log =
      root ? open_metrics(run.dir, metrics.columns(), cfg.resume, run.progress.step) : nullptr;
  // After open_metrics: a resumed run's event file is rewritten from the rows metrics.csv keeps.
  const std::unique_ptr<EventFile> events =
      root && cfg.tensorboard ? open_event_file(run.dir, metrics.columns(), cfg.resume) : nullptr;
  if (root) run.log_start(metrics);
  const std::vector<bool> unmeasured = metrics.measured_only_mask();
  RunSummary summary;
  summary.chance_loss = run.task->chance_loss();
  summary.steps_done = run.progress.step;
  for (std::size_t step = run.progress.step; step < cfg.steps; ++step) {
    // With several ranks the request travels in the step's allreduce, so that every rank stops after the same step.
    if (world_size == 1)
      if (const int sig = take_stop_signal()) {
        summary.stop_signal = sig;
        break;
      }
    const StepRecord record = run.train_step(step);
    if (log)
      write_row(*log, events.get(), metrics.row(record), record.measured ? std::vector<bool>{} : unmeasured);
    else
      for (auto& layer : run.model->attention_layers()) layer->last = nn::AttentionRecord();
    if (!run.account(record, summary)) break;
    const std::size_t done = run.progress.step;
    // Checked where a checkpoint or progress line is due (a copy of the state per check, not per step): a
    // non-finite buffer would be saved as finite and the run would end "done" having frozen.
    const bool checkpoint_due = cfg.checkpoint_every > 0 && done % cfg.checkpoint_every == 0;
    if (checkpoint_due || done % cfg.print_every == 0 || done == cfg.steps) {
      const std::string broken = first_nonfinite_state(*run.opt, run.named);
      if (!broken.empty()) {
        summary.diverged = true;
        summary.diverged_step = static_cast<long>(record.step);
        if (root)
          spdlog::warn(
              "[{}] diverged by step {}: non-finite optimizer state: {} (every update is 0 or non-finite "
              "from here); stopping (every row so far is in metrics.csv, the last finite checkpoint in {})",
              run.name, record.step, broken, run.checkpoint_path.string());
        break;
      }
    }
    if (root && cfg.checkpoint_every > 0 && done % cfg.checkpoint_every == 0 && done < cfg.steps)
      run.save(run.checkpoint_path, false);
    if (root) run.print_progress(record);
    if (record.stop_requested) {
      const int sig = take_stop_signal();
      summary.stop_signal = sig ? sig : SIGTERM;  // another rank's signal
      break;
    }
  }
  return run.finish(summary);
}

}  // namespace xgrad::train
