#include "train/experiment.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>

extern char** environ;

namespace xgrad::train {

namespace fs = std::filesystem;

std::vector<std::string> to_args(const TrainConfig& c) {
  auto num = [](double v) { return fmt::format("{:.17g}", v); };
  std::vector<std::string> a{"train",
                             "--task", c.task,
                             "--n-keys", std::to_string(c.n_keys),
                             "--n-values", std::to_string(c.n_values),
                             "--n-pairs", std::to_string(c.n_pairs),
                             "--seq-len", std::to_string(c.seq_len),
                             "--n-symbols", std::to_string(c.n_symbols),
                             "--d-model", std::to_string(c.d_model),
                             "--n-heads", std::to_string(c.n_heads),
                             "--n-layers", std::to_string(c.n_layers),
                             "--d-ff", std::to_string(c.d_ff),
                             "--mlp", c.mlp ? "true" : "false",
                             "--layer-norm", c.layer_norm ? "true" : "false",
                             "--residual", c.residual ? "true" : "false",
                             "--causal", c.causal ? "true" : "false",
                             "--scale", nn::to_string(c.scale),
                             "--emb-init-std", num(c.emb_init_std),
                             "--proj-init-gain", num(c.proj_init_gain),
                             "--batch-size", std::to_string(c.batch_size),
                             "--steps", std::to_string(c.steps),
                             "--lr", num(c.lr),
                             "--optimizer", c.optimizer,
                             "--momentum", num(c.momentum),
                             "--weight-decay", num(c.weight_decay),
                             "--clip-grad-norm", num(c.clip_grad_norm),
                             "--seed", std::to_string(c.seed),
                             "--data-seed", std::to_string(c.data_seed),
                             "--log-every", std::to_string(c.log_every),
                             "--print-every", std::to_string(c.print_every),
                             "--eval-every", std::to_string(c.eval_every),
                             "--eval-batches", std::to_string(c.eval_batches),
                             "--threads", std::to_string(c.threads),
                             "--out", c.out};
  if (!c.text_path.empty()) a.insert(a.end(), {"--text", c.text_path});
  if (c.overwrite) a.push_back("--overwrite");
  return a;
}

namespace {

pid_t spawn(const std::string& exe, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (auto& s : args) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), environ);
  if (rc != 0) throw std::runtime_error("cannot start " + exe + ": " + std::strerror(rc));
  return pid;
}

}  // namespace

std::vector<ExperimentRow> run_experiment(const ExperimentConfig& cfg) {
  if (cfg.d_ks.empty()) throw ConfigError("--d-k: give at least one head size");
  if (cfg.jobs < 1) throw ConfigError("--jobs must be >= 1");
  if (cfg.out.empty()) throw ConfigError("--out: an experiment directory is required");
  std::vector<ExperimentRow> rows;
  std::vector<TrainConfig> runs;
  for (auto d_k : cfg.d_ks) {
    if (d_k == 0) throw ConfigError("--d-k: head sizes must be >= 1");
    for (auto scale : cfg.scales) {
      TrainConfig c = cfg.base;
      c.d_model = d_k * c.n_heads;
      c.scale = scale;
      c.out = (fs::path(cfg.out) / fmt::format("dk{}-{}", d_k, nn::to_string(scale))).string();
      c.validate();
      runs.push_back(c);
      rows.push_back({d_k, scale, c.out, false, {}});
    }
  }
  fs::create_directories(cfg.out);

  std::map<pid_t, std::size_t> running;
  std::size_t next = 0, done = 0;
  while (done < runs.size()) {
    while (next < runs.size() && running.size() < static_cast<std::size_t>(cfg.jobs)) {
      running[spawn(cfg.executable, to_args(runs[next]))] = next;
      ++next;
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("waitpid failed: ") + std::strerror(errno));
    }
    auto it = running.find(pid);
    if (it == running.end()) continue;
    ExperimentRow& row = rows[it->second];
    running.erase(it);
    ++done;
    const fs::path summary_path = fs::path(row.dir) / "summary.json";
    const bool finished = WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 3);  // 3: diverged
    if (finished && fs::exists(summary_path)) {
      std::ifstream in(summary_path);
      row.summary = RunSummary::from_json(nlohmann::json::parse(in));
      row.ok = true;
    } else {
      spdlog::error("run {} failed (exit status {}); see its directory", row.dir,
                    WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    spdlog::info("experiment: {}/{} runs done", done, runs.size());
  }
  return rows;
}

std::string format_table(const std::vector<ExperimentRow>& rows) {
  std::ostringstream out;
  out << fmt::format("{:>6}  {:<8}  {:>10}  {:>10}  {:>9}  {:>12}  {:>12}  {:>13}  {}\n", "d_k", "scale", "loss@0",
                     "final_loss", "final_acc", "|grad W_q|", "|grad W_k|", "zero-grad W_q", "note");
  for (const auto& r : rows) {
    if (!r.ok) {
      out << fmt::format("{:>6}  {:<8}  {:>10}  {}\n", r.d_k, nn::to_string(r.scale), "-", "run failed: see " + r.dir);
      continue;
    }
    const auto& s = r.summary;
    std::string note = s.diverged ? fmt::format("diverged at step {}", s.diverged_step) : "";
    out << fmt::format("{:>6}  {:<8}  {:>10.4f}  {:>10.4f}  {:>9.3f}  {:>12.4g}  {:>12.4g}  {:>12.1f}%  {}\n", r.d_k,
                       nn::to_string(r.scale), s.first_loss, s.final_loss, s.final_accuracy, s.mean_grad_norm_w_q,
                       s.mean_grad_norm_w_k, 100.0 * s.frac_zero_grad_w_q, note);
  }
  if (!rows.empty() && rows.front().ok)
    out << fmt::format("chance loss (uniform over the answers) = {:.4f} nats; final = mean of the last 20 steps; "
                       "|grad W| = mean over steps of the L2 norm of the gradient;\nzero-grad W_q = share of steps "
                       "whose query-weight gradient was exactly 0\n",
                       rows.front().summary.chance_loss);
  return out.str();
}

}  // namespace xgrad::train
