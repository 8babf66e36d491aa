#include "train/trainer.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "data/registry.h"
#include "nn/attention_stats.h"
#include "nn/checkpoint.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "platform/environment.h"
#include "train/metrics_log.h"
#include "train/run_checkpoint.h"
#include "train/number_format.h"

namespace xgrad::train {

namespace fs = std::filesystem;

nlohmann::json RunSummary::to_json() const {
  return {{"steps_done", steps_done},
          {"chance_loss", chance_loss},
          {"first_loss", first_loss},
          {"final_loss", final_loss},
          {"final_accuracy", final_accuracy},
          {"mean_grad_norm_w_q", mean_grad_norm_w_q},
          {"mean_grad_norm_w_k", mean_grad_norm_w_k},
          {"frac_zero_grad_w_q", frac_zero_grad_w_q},
          {"frac_zero_grad_w_k", frac_zero_grad_w_k},
          {"diverged", diverged},
          {"diverged_step", diverged_step},
          {"skipped_steps", skipped_steps},
          {"wall_seconds", wall_seconds}};
}

RunSummary RunSummary::from_json(const nlohmann::json& j) {
  // to_json writes NaN as null (JSON has no NaN): a run that diverged at step 0 has a null first_loss, and one with
  // no finite step null means.
  auto number = [&j](const char* key) {
    const nlohmann::json& v = j.at(key);
    if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
    return v.get<double>();
  };
  RunSummary s;
  s.steps_done = j.at("steps_done").get<std::size_t>();
  s.chance_loss = number("chance_loss");
  s.first_loss = number("first_loss");
  s.final_loss = number("final_loss");
  s.final_accuracy = number("final_accuracy");
  s.mean_grad_norm_w_q = number("mean_grad_norm_w_q");
  s.mean_grad_norm_w_k = number("mean_grad_norm_w_k");
  s.frac_zero_grad_w_q = j.contains("frac_zero_grad_w_q") ? number("frac_zero_grad_w_q") : 0.0;
  s.frac_zero_grad_w_k = j.contains("frac_zero_grad_w_k") ? number("frac_zero_grad_w_k") : 0.0;
  s.diverged = j.at("diverged").get<bool>();
  s.diverged_step = j.at("diverged_step").get<long>();
  s.skipped_steps = j.value("skipped_steps", std::size_t{0});
  s.wall_seconds = number("wall_seconds");
  return s;
}

namespace {

// Atomic (temporary file, fsync, rename): a kill never leaves a half-written config.json or summary.json.
void write_json(const fs::path& path, const nlohmann::json& j) {
  nn::write_file_atomically(path.string(), j.dump(2) + "\n");
}

// Fraction of target positions where the arg-max class equals the target.
double accuracy(const xt::xarray<float>& logits, const xt::xarray<std::int64_t>& targets) {
  const std::size_t C = logits.shape().back();
  std::size_t hits = 0, count = 0;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const auto t = targets.data()[i];
    if (t < 0) continue;
    const float* row = logits.data() + i * C;
    std::size_t best = 0;
    for (std::size_t c = 1; c < C; ++c)
      if (row[c] > row[best]) best = c;
    hits += best == static_cast<std::size_t>(t);
    ++count;
  }
  return count ? static_cast<double>(hits) / static_cast<double>(count) : 0.0;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

double rms(const float* x, std::size_t n) {
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return n ? std::sqrt(s / static_cast<double>(n)) : 0.0;
}

std::vector<double> stat_values(const nn::AttentionStats& s) {
  return {s.score_std,     s.score_max_abs, s.entropy_mean,   s.entropy_min,       s.max_prob_mean,
          s.frac_max_prob_above_099, s.score_grad_p10, s.score_grad_median, s.score_grad_p90};
}

// Mean loss over `batches` held-out batches, without a graph.
double eval_loss(nn::AttentionModel& model, const data::Task& task, const TrainConfig& cfg, std::size_t step) {
  NoGradGuard no_grad;
  double total = 0;
  for (std::size_t i = 0; i < cfg.eval_batches; ++i) {
    const data::Batch b = task.batch(cfg.data_seed, step * cfg.eval_batches + i, cfg.batch_size, data::Split::eval);
    total += cross_entropy(model.forward(b.inputs), b.targets).item();
  }
  return total / static_cast<double>(cfg.eval_batches);
}

}  // namespace

nn::ModelConfig model_config(const TrainConfig& cfg, const data::Task& task) {
  nn::ModelConfig mc;
  mc.vocab_size = task.vocab_size();
  mc.max_seq_len = task.seq_len();
  mc.d_model = cfg.d_model;
  mc.n_heads = cfg.n_heads;
  mc.d_k = cfg.head_dim;
  mc.n_layers = cfg.n_layers;
  mc.d_ff = cfg.d_ff;
  mc.mlp = cfg.mlp;
  mc.layer_norm = cfg.layer_norm;
  mc.residual = cfg.residual;
  mc.causal = cfg.causal;
  mc.scale = cfg.scale;
  mc.emb_init_std = cfg.emb_init_std;
  mc.proj_init_gain = cfg.proj_init_gain;
  return mc;
}

const std::vector<std::string>& attention_stat_names() {
  static const std::vector<std::string> names{"score_std",     "score_max_abs",  "entropy_mean",
                                              "entropy_min",   "max_prob_mean",  "frac_max_prob_gt_0.99",
                                              "score_grad_p10", "score_grad_median", "score_grad_p90"};
  return names;
}

namespace {

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "request_stop must be async-signal-safe");

// The files that make a directory hold a run; --overwrite deletes them, nothing else.
const std::vector<std::string>& run_files() {
  static const std::vector<std::string> files{"config.json", "metrics.csv", "summary.json", kCheckpointFile,
                                              kNonfiniteCheckpointFile};
  return files;
}

// Checks the run directory against overwrite/resume without touching it (a refused run leaves no trace).
void check_run_directory(const TrainConfig& cfg) {
  const fs::path dir(cfg.out);
  std::error_code ec;
  if (cfg.resume && cfg.overwrite)
    throw ConfigError("--resume and --overwrite exclude each other (continue the run, or start it over)");
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw ConfigError("--out: " + dir.string() + " exists and is not a directory");
  bool holds_run = false;
  for (const auto& f : run_files()) holds_run = holds_run || fs::exists(dir / f, ec);
  if (cfg.resume && !fs::exists(dir / "config.json", ec))
    throw ConfigError("--resume: " + dir.string() + " holds no run (no config.json)");
  if (!cfg.resume && !cfg.overwrite && holds_run)
    throw ConfigError("--out: " + dir.string() + " already holds a run (config.json, metrics.csv or a checkpoint); " +
                      "pass --overwrite to replace it or --resume to continue it");
}

// An exclusive flock on DIR/.lock for as long as a train() writes into DIR: a second process (or a second train()
// in this one) is refused instead of writing the same files. The kernel drops the lock when the descriptor closes,
// the process exits or is killed, so a SIGKILL leaves no stale lock (the file stays, unlocked).
class RunLock {
 public:
  RunLock() = default;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  ~RunLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool held() const { return fd_ >= 0; }
  /// Takes the lock on dir/.lock. Returns false if the file cannot be opened (and `required` is false); throws
  /// ConfigError if another holder has it.
  bool acquire(const fs::path& dir, bool required) {
    const fs::path path = dir / ".lock";
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      if (!required) return false;
      throw ConfigError("--out: run directory " + dir.string() + " is not writable: " + std::strerror(errno));
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      char buf[32] = {};
      const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
      ::close(fd);
      std::string pid = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "unknown";
      while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
      if (err == EWOULDBLOCK)
        throw ConfigError("--out/--resume: " + dir.string() + " is being written by another xgrad process (pid " +
                          pid + ")");
      throw ConfigError("--out: cannot lock " + path.string() + ": " + std::strerror(err));
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
      // the pid is only for the message; the lock itself holds
    }
    fd_ = fd;
    return true;
  }

 private:
  int fd_ = -1;
};

// Creates the run directory, takes its lock (if not taken yet), proves it writable, and clears what must go.
void prepare_run_directory(const TrainConfig& cfg, RunLock& lock) {
  const fs::path dir(cfg.out);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw ConfigError("--out: cannot create run directory " + dir.string() + ": " + ec.message());
  if (!lock.held()) lock.acquire(dir, true);
  // A directory can exist and still refuse files (permissions, read-only mount): find out before training.
  const fs::path probe = dir / (".xgrad-write-test-" + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw ConfigError("--out: run directory " + dir.string() + " is not writable: " + std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  if (cfg.overwrite)
    for (const auto& f : run_files()) fs::remove(dir / f, ec);
  // A stale summary would mark a run that is being continued as finished (xgrad sweep skips finished runs).
  if (cfg.resume) fs::remove(dir / "summary.json", ec);
  // Temporary files of atomic writes cut short by a kill.
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 1 && name[0] == '.' && name.find(".tmp-") != std::string::npos) fs::remove(entry.path(), ec);
  }
}

std::string first_nonfinite(const std::vector<std::pair<std::string, Tensor>>& named) {
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

// metrics.csv for a new run, or for a resumed one cut back to its first `rows` rows. The cut is written to a
// temporary file through MetricsLog, checked to reproduce the old rows byte for byte, and renamed over the old
// file, so a crash during the cut leaves the old file whole.
std::unique_ptr<MetricsLog> open_metrics(const fs::path& dir, const std::vector<std::string>& columns, bool resume,
                                         std::size_t rows) {
  const fs::path path = dir / "metrics.csv";
  std::error_code ec;
  if (resume && rows > 0 && !fs::exists(path, ec))
    throw std::runtime_error("cannot resume: " + path.string() + " is missing but the checkpoint is at step " +
                             std::to_string(rows) + " (start over with --overwrite)");
  if (!resume || !fs::exists(path, ec)) return std::make_unique<MetricsLog>(path.string(), columns);
  const MetricsPrefix prefix = read_metrics_prefix(path.string(), columns, rows);
  const fs::path tmp = dir / ".metrics.csv.tmp-resume";
  auto log = std::make_unique<MetricsLog>(tmp.string(), columns);
  for (const auto& row : prefix.rows) log->write(row);
  std::ifstream in(tmp, std::ios::binary);
  const std::string rewritten((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (rewritten != prefix.text) {
    fs::remove(tmp, ec);
    throw std::runtime_error(path.string() + ": rewriting its first " + std::to_string(rows) +
                             " rows did not reproduce them byte for byte; cannot resume");
  }
  fs::rename(tmp, path);  // the open log now writes to metrics.csv
  return log;
}

}  // namespace

void request_stop(int signal) noexcept { g_stop_signal.store(signal); }

RunSummary train(const TrainConfig& cfg) {
  cfg.validate();
  const auto wall_start = std::chrono::steady_clock::now();
  const fs::path dir(cfg.out);
  std::error_code ec;
  // A directory that exists is locked before anything in it is read: a second process is told so, whatever else
  // it would be refused for.
  RunLock lock;
  if (fs::is_directory(dir, ec)) lock.acquire(dir, false);
  const fs::path config_path = dir / "config.json";
  TrainConfig stored;
  const bool have_stored = cfg.resume && fs::exists(config_path, ec);
  if (have_stored) {
    std::ifstream in(config_path);
    nlohmann::json stored_json;
    try {
      stored_json = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw ConfigError("--resume: " + config_path.string() + " is not valid JSON: " + e.what());
    }
    stored = TrainConfig::from_json(stored_json, config_path.string());
    stored.out = cfg.out;
    check_same_run(stored, cfg);
  }
  check_run_directory(cfg);
  platform::set_threads(cfg.threads);
  platform::set_flush_denormals(cfg.flush_denormals);

  const std::unique_ptr<data::Task> task = data::make_task(cfg.task_options());
  nn::AttentionModel model(model_config(cfg, *task), cfg.seed);
  const auto named = model.named_parameters();
  const auto attn_layers = model.attention_layers();
  std::unique_ptr<nn::Optimizer> opt;
  if (cfg.optimizer == "sgd")
    opt = std::make_unique<nn::SGD>(model.parameters(), cfg.lr, cfg.momentum, cfg.weight_decay);
  else
    opt = std::make_unique<nn::AdamW>(model.parameters(), cfg.lr, 0.9, 0.999, 1e-8, cfg.weight_decay);

  auto logger = spdlog::default_logger();
  const std::string run_name = dir.filename().string();
  const fs::path checkpoint_path = dir / kCheckpointFile;
  RunProgress progress;
  if (cfg.resume && fs::exists(checkpoint_path)) {
    nn::Checkpoint c;
    try {
      c = nn::load_checkpoint(checkpoint_path.string());
    } catch (const nn::CheckpointError& e) {
      throw std::runtime_error(std::string("cannot resume: ") + e.what() + " (start over with --overwrite)");
    }
    // The checkpoint must be this run's: one copied from another run, or a config.json edited since, would mix two
    // runs silently.
    if (have_stored && c.metadata.count("config")) {
      TrainConfig written;
      try {
        written = TrainConfig::from_json(nlohmann::json::parse(c.metadata.at("config")),
                                         checkpoint_path.string() + " (metadata 'config')");
      } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error("cannot resume: " + checkpoint_path.string() +
                                 ": metadata 'config' is not valid JSON: " + e.what());
      }
      const std::string key = first_differing_setting(written, stored);
      if (!key.empty())
        throw ConfigError("--resume: " + flag_of(key) + " is " + written.to_json().at(key).dump() + " in " +
                          checkpoint_path.string() + " but " + stored.to_json().at(key).dump() + " in " +
                          config_path.string() + "; the checkpoint is not this run's (start over with --overwrite)");
    }
    try {
      restore_run_checkpoint(c, checkpoint_path.string(), cfg, model, *opt, progress);
    } catch (const nn::CheckpointError& e) {
      throw std::runtime_error(std::string("cannot resume: ") + e.what() + " (start over with --overwrite)");
    }
    if (progress.step > cfg.steps)
      throw ConfigError("--steps: the checkpoint in " + dir.string() + " is at step " + std::to_string(progress.step) +
                        ", beyond --steps " + std::to_string(cfg.steps));
    logger->info("[{}] resuming from {} at step {}", run_name, checkpoint_path.string(), progress.step);
  } else {
    if (cfg.resume) {
      std::size_t rows = 0;
      {
        std::ifstream in(dir / "metrics.csv");
        std::string line;
        while (std::getline(in, line))
          if (!in.eof()) ++rows;  // complete lines only
        if (rows > 0) --rows;     // the header
      }
      logger->warn("[{}] --resume: {} holds no {} (deleted, or the run stopped before its first checkpoint); "
                   "starting again from step 0 and restarting metrics.csv{}",
                   run_name, dir.string(), kCheckpointFile,
                   rows ? fmt::format(" ({} rows discarded)", rows) : std::string());
    }
    if (!cfg.init_from.empty()) {
      try {
        load_model_weights(nn::load_checkpoint(cfg.init_from), cfg.init_from, model);
      } catch (const nn::CheckpointError& e) {
        throw ConfigError(std::string("--init-from: ") + e.what());
      }
    }
  }
  prepare_run_directory(cfg, lock);

  nlohmann::json config_json = cfg.to_json();
  config_json["vocab_size"] = task->vocab_size();
  config_json["seq_len"] = task->seq_len();
  config_json["chance_loss"] = task->chance_loss();
  config_json["num_parameters"] = model.num_parameters();
  config_json["environment"] = platform::environment_json();
  write_json(dir / "config.json", config_json);

  std::vector<std::string> columns{"step", "loss", "accuracy", "lr", "grad_norm"};
  std::vector<std::size_t> wq_idx, wk_idx;
  for (std::size_t i = 0; i < named.size(); ++i) {
    columns.push_back("grad_norm/" + named[i].first);
    if (ends_with(named[i].first, "attn.w_q.weight")) wq_idx.push_back(i);
    if (ends_with(named[i].first, "attn.w_k.weight")) wk_idx.push_back(i);
  }
  for (std::size_t l = 0; l < attn_layers.size(); ++l)
    for (std::size_t h = 0; h < attn_layers[l]->n_heads; ++h)
      for (const auto& stat : attention_stat_names())
        columns.push_back("attn/l" + std::to_string(l) + "h" + std::to_string(h) + "/" + stat);
  for (const auto& [name, p] : named) columns.push_back("update_rms/" + name);
  for (const auto& [name, p] : named) columns.push_back("grad_rms/" + name);
  columns.push_back("eval_loss");
  columns.push_back("step_ms");
  const std::unique_ptr<MetricsLog> log = open_metrics(dir, columns, cfg.resume, progress.step);

  logger->info("[{}] training {}: d_model={} n_heads={} d_k={} n_layers={} scale={} optimizer={} lr={} steps={} "
               "params={}",
               run_name, cfg.task, cfg.d_model, cfg.n_heads, cfg.d_k(), cfg.n_layers, cfg.scale,
               cfg.optimizer, cfg.lr, cfg.steps, model.num_parameters());

  auto session_seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  };
  auto save = [&](const fs::path& path, bool nonfinite) {
    RunProgress p = progress;
    p.wall_seconds += session_seconds();
    nn::save_checkpoint(path.string(), make_run_checkpoint(cfg, model, *opt, p, nonfinite));
  };

  RunSummary summary;
  summary.chance_loss = task->chance_loss();
  summary.steps_done = progress.step;
  bool nonfinite_saved = false;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> row;
  std::vector<xt::xarray<float>> before_step(named.size());
  for (std::size_t step = progress.step; step < cfg.steps; ++step) {
    if (const int sig = g_stop_signal.exchange(0)) {  // consumed: a later train() in this process runs normally
      summary.stop_signal = sig;
      break;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const bool measure = step % cfg.log_every == 0 || step + 1 == cfg.steps;
    for (auto& layer : attn_layers) layer->record_attention = measure;

    const data::Batch batch = task->batch(cfg.data_seed, step, cfg.batch_size);
    Tensor logits = model.forward(batch.inputs);
    Tensor loss = cross_entropy(logits, batch.targets);
    const double loss_value = loss.item();
    const double acc = accuracy(logits.value(), batch.targets);
    opt->zero_grad();
    loss.backward();
    if (std::find(cfg.nan_gradient_steps.begin(), cfg.nan_gradient_steps.end(), step) != cfg.nan_gradient_steps.end())
      for (auto [name, p] : named)  // a copy of the handle: the tensor itself is shared
        if (ends_with(name, "attn.w_q.weight") && p.has_grad()) {
          p.mutable_grad().data()[0] = std::numeric_limits<float>::quiet_NaN();
          break;
        }

    std::vector<double> norms(named.size());
    double sum_squares = 0;  // the global norm as clip_grad_norm computes it, before any clipping
    for (std::size_t i = 0; i < named.size(); ++i) {
      norms[i] = nn::grad_norm(named[i].second);
      sum_squares += norms[i] * norms[i];
    }
    const double total_norm = std::sqrt(sum_squares);
    const bool finite = std::isfinite(loss_value) && std::isfinite(total_norm);
    std::string culprit;
    if (finite) {
      nn::clip_grad_norm(model.parameters(), cfg.clip_grad_norm);
    } else {
      culprit = first_nonfinite(named);
      // The state before this step, with the gradients that broke it; checkpoint.safetensors keeps the last good one.
      if (!nonfinite_saved) save(dir / kNonfiniteCheckpointFile, true);
      nonfinite_saved = true;
    }
    if (measure)
      for (std::size_t i = 0; i < named.size(); ++i) before_step[i] = named[i].second.value();
    if (finite) opt->step();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

    row.clear();
    row.insert(row.end(), {static_cast<double>(step), loss_value, acc, opt->lr(), total_norm});
    row.insert(row.end(), norms.begin(), norms.end());
    // Saturation statistics, beside the graph (not timed in step_ms).
    xt::xarray<bool> target_positions = xt::xarray<bool>::from_shape(batch.targets.shape());
    for (std::size_t i = 0; i < batch.targets.size(); ++i) target_positions.data()[i] = batch.targets.data()[i] >= 0;
    for (std::size_t l = 0; l < attn_layers.size(); ++l) {
      auto& layer = *attn_layers[l];
      if (!measure) {
        row.insert(row.end(), layer.n_heads * attention_stat_names().size(), nan);
        continue;
      }
      const Tensor& scores = layer.last.scores;
      const xt::xarray<float>* grad = scores.has_grad() ? &scores.grad() : nullptr;
      const bool last_layer = l + 1 == attn_layers.size();
      for (const auto& s : nn::attention_stats(scores.value(), layer.last.probs, grad,
                                               last_layer ? &target_positions : nullptr)) {
        const auto v = stat_values(s);
        row.insert(row.end(), v.begin(), v.end());
      }
      layer.last = nn::AttentionRecord();  // free the recorded graph piece
    }
    for (std::size_t i = 0; i < named.size(); ++i) {
      if (!measure) {
        row.push_back(nan);
        continue;
      }
      xt::xarray<float> update = named[i].second.value() - before_step[i];
      row.push_back(rms(update.data(), update.size()));
    }
    for (std::size_t i = 0; i < named.size(); ++i)
      row.push_back(measure ? norms[i] / std::sqrt(static_cast<double>(named[i].second.numel())) : nan);
    const bool evaluate = cfg.eval_every > 0 && (step % cfg.eval_every == 0 || step + 1 == cfg.steps);
    row.push_back(evaluate ? eval_loss(model, *task, cfg, step) : nan);
    row.push_back(ms);
    log->write(row);

    if (step == 0) progress.first_loss = loss_value;
    summary.steps_done = step + 1;
    if (!finite) {
      const std::string where = culprit.empty() ? "no parameter or gradient is non-finite (the forward pass overflowed)"
                                                : "first non-finite: " + culprit;
      // Skipping cannot help once a weight itself is non-finite, nor when step after step fails (weights so large
      // that every forward pass overflows): the run would skip to its end without learning.
      const bool weight_broken = culprit.rfind("value of ", 0) == 0;
      const bool too_many = progress.consecutive_skips + 1 >= kMaxConsecutiveSkips;
      if (cfg.on_nan == "skip" && !weight_broken && !too_many) {
        ++progress.skipped_steps;
        ++progress.consecutive_skips;
        progress.step = step + 1;
        logger->warn("[{}] step {}: non-finite loss={} grad_norm={}; {}; step skipped (--on-nan skip)", run_name, step,
                     loss_value, total_norm, where);
      } else {
        summary.diverged = true;
        summary.diverged_step = static_cast<long>(step);
        const std::string why = cfg.on_nan == "stop" ? ""
                                : weight_broken      ? " (a weight is non-finite: skipping cannot recover)"
                                                     : " (" + std::to_string(kMaxConsecutiveSkips) +
                                                      " non-finite steps in a row: skipping does not recover)";
        logger->warn("[{}] diverged at step {}: loss={} grad_norm={}; {}; stopping{} (every row so far is in "
                     "metrics.csv, the state before this step in {})",
                     run_name, step, loss_value, total_norm, where, why, (dir / kNonfiniteCheckpointFile).string());
        break;
      }
    } else {
      progress.consecutive_skips = 0;
      double wq = 0, wk = 0;
      for (auto i : wq_idx) wq += norms[i] * norms[i];
      for (auto i : wk_idx) wk += norms[i] * norms[i];
      progress.sum_grad_norm_w_q += std::sqrt(wq);
      progress.sum_grad_norm_w_k += std::sqrt(wk);
      progress.zero_grad_w_q += wq == 0.0 ? 1 : 0;
      progress.zero_grad_w_k += wk == 0.0 ? 1 : 0;
      ++progress.finite_steps;
      progress.recent_loss.push_back(loss_value);
      progress.recent_accuracy.push_back(acc);
      if (progress.recent_loss.size() > RunProgress::kRecent) {
        progress.recent_loss.pop_front();
        progress.recent_accuracy.pop_front();
      }
      progress.step = step + 1;
    }
    if (cfg.checkpoint_every > 0 && progress.step % cfg.checkpoint_every == 0 && progress.step < cfg.steps)
      save(checkpoint_path, false);
    if ((step + 1) % cfg.print_every == 0 || step + 1 == cfg.steps)
      logger->info("[{}] step {:>5}/{}  loss {}  acc {:.3f}  grad_norm {:.3g}  {:.2f} ms/step", run_name, step + 1,
                   cfg.steps, format_number(loss_value, 4), acc, total_norm, ms);
  }
  if (!summary.diverged) save(checkpoint_path, false);  // the end, or where a stop request left the run
  if (summary.stop_signal) {
    logger->warn("[{}] stopped by signal {} after step {}; checkpoint written to {}; continue with: xgrad train "
                 "--resume {}",
                 run_name, summary.stop_signal, progress.step, checkpoint_path.string(), dir.string());
    summary.wall_seconds = progress.wall_seconds + session_seconds();
    return summary;
  }

  const double n = static_cast<double>(progress.finite_steps);
  summary.first_loss = progress.first_loss;
  summary.mean_grad_norm_w_q = progress.sum_grad_norm_w_q / n;
  summary.mean_grad_norm_w_k = progress.sum_grad_norm_w_k / n;
  summary.frac_zero_grad_w_q = static_cast<double>(progress.zero_grad_w_q) / n;
  summary.frac_zero_grad_w_k = static_cast<double>(progress.zero_grad_w_k) / n;
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
  summary.wall_seconds = progress.wall_seconds + session_seconds();
  write_json(dir / "summary.json", summary.to_json());
  return summary;
}

}  // namespace xgrad::train
