// The `xgrad` command line: `xgrad train` runs one configuration, `xgrad experiment` the scaled-vs-unscaled
// comparison. Exit codes: 0 success, 1 runtime failure, 2 bad usage (the message names the flag).
#include <chrono>
#include <filesystem>
#include <ctime>
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "autograd/blas.h"
#include "train/environment.h"
#include "train/experiment.h"
#include "train/trainer.h"

using namespace xgrad;
using namespace xgrad::train;

namespace {

// Flags shared by `train` and `experiment` (the model, task and optimiser). `with_model_size` adds --d-model
// and --scale, which the experiment sets per run itself.
void add_training_flags(CLI::App& app, TrainConfig& c, std::string& scale, bool with_model_size) {
  app.add_option("--task", c.task, "task (allowed: kv_recall)")->capture_default_str();
  app.add_option("--n-keys", c.n_keys, "kv_recall: distinct keys")->capture_default_str();
  app.add_option("--n-values", c.n_values, "kv_recall: distinct values (answer classes)")->capture_default_str();
  app.add_option("--n-pairs", c.n_pairs, "kv_recall: key-value pairs per sequence")->capture_default_str();
  if (with_model_size) {
    app.add_option("--d-model", c.d_model, "model width")->capture_default_str();
    app.add_option("--scale", scale, "attention score scaling (allowed: none, sqrt_dk, dk)")
        ->capture_default_str()
        ->check(CLI::IsMember(nn::scale_mode_names()));
  }
  app.add_option("--n-heads", c.n_heads, "attention heads (d_k = d_model / n_heads)")->capture_default_str();
  app.add_option("--n-layers", c.n_layers, "transformer blocks")->capture_default_str();
  app.add_option("--d-ff", c.d_ff, "MLP hidden size (0 = 4 * d_model)")->capture_default_str();
  app.add_option("--mlp", c.mlp, "include the MLP in each block (true/false)")->capture_default_str();
  app.add_option("--causal", c.causal, "causal attention mask (true/false)")->capture_default_str();
  app.add_option("--batch-size", c.batch_size, "sequences per step")->capture_default_str();
  app.add_option("--steps", c.steps, "training steps")->capture_default_str();
  app.add_option("--lr", c.lr, "learning rate")->capture_default_str();
  app.add_option("--optimizer", c.optimizer, "optimizer (allowed: sgd, adamw)")
      ->capture_default_str()
      ->check(CLI::IsMember({"sgd", "adamw"}));
  app.add_option("--momentum", c.momentum, "SGD momentum")->capture_default_str();
  app.add_option("--weight-decay", c.weight_decay, "weight decay (decoupled for AdamW)")->capture_default_str();
  app.add_option("--clip-grad-norm", c.clip_grad_norm, "clip the global gradient norm (0 = off)")
      ->capture_default_str();
  app.add_option("--seed", c.seed, "seed of the initial weights")->capture_default_str();
  app.add_option("--data-seed", c.data_seed, "seed of the data stream (default: --seed)");
  app.add_option("--log-every", c.log_every, "console progress every N steps")->capture_default_str();
  app.add_option("--threads", c.threads, "BLAS threads per run")->capture_default_str();
}

std::string default_experiment_dir() {
  const std::time_t now = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "runs/experiment-%Y%m%d-%H%M%S", std::localtime(&now));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  select_blas_core(argc, argv);
  spdlog::set_pattern("[%H:%M:%S] %^%l%$ %v");

  CLI::App app{"xgrad: train toy attention models with and without 1/sqrt(d_k) score scaling and compare them"};
  app.require_subcommand(1);

  TrainConfig train_cfg;
  std::string train_scale = "sqrt_dk";
  CLI::App* train_cmd = app.add_subcommand("train", "train one configuration; writes config.json and metrics.csv");
  add_training_flags(*train_cmd, train_cfg, train_scale, true);
  train_cmd->add_option("--out", train_cfg.out, "run directory to write")->required();

  ExperimentConfig exp;
  std::string unused_scale;
  CLI::App* exp_cmd = app.add_subcommand(
      "experiment", "train scaled (sqrt_dk) and unscaled (none) at several d_k and print a comparison table");
  add_training_flags(*exp_cmd, exp.base, unused_scale, false);
  exp_cmd->add_option("--d-k", exp.d_ks, "head sizes to compare (d_model = d_k * n_heads)")->capture_default_str();
  exp_cmd->add_option("--jobs", exp.jobs, "runs in parallel")->capture_default_str();
  exp_cmd->add_option("--out", exp.out, "experiment directory (default: runs/experiment-<date>-<time>)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "xgrad: " << e.what() << "\n(run 'xgrad --help' or 'xgrad <command> --help' for the flags)\n";
    return 2;
  }

  try {
    if (*train_cmd) {
      if (train_cmd->count("--data-seed") == 0) train_cfg.data_seed = train_cfg.seed;
      train_cfg.scale = nn::parse_scale_mode(train_scale);
      const RunSummary s = xgrad::train::train(train_cfg);
      spdlog::info("done: final loss {:.4f}, final accuracy {:.3f}{}; wrote {}/metrics.csv", s.final_loss,
                   s.final_accuracy, s.diverged ? " (diverged)" : "", train_cfg.out);
      return 0;
    }
    if (*exp_cmd) {
      if (exp_cmd->count("--data-seed") == 0) exp.base.data_seed = exp.base.seed;
      if (exp.out.empty()) exp.out = default_experiment_dir();
      exp.base.out = exp.out;  // replaced per run; validate() needs it set
      exp.executable = std::filesystem::canonical("/proc/self/exe").string();
      spdlog::info("experiment: {} runs into {} ({} at a time); OpenBLAS core {}", exp.d_ks.size() * exp.scales.size(),
                   exp.out, exp.jobs, blas::core_name());
      const auto t0 = std::chrono::steady_clock::now();
      const auto rows = run_experiment(exp);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::cout << "\n" << format_table(rows) << "\nRun directories (config.json, metrics.csv, summary.json):\n";
      bool all_ok = true;
      for (const auto& r : rows) {
        std::cout << "  " << r.dir << "\n";
        all_ok = all_ok && r.ok;
      }
      std::cout << "Experiment wall time: " << static_cast<int>(secs) << " s\n";
      return all_ok ? 0 : 1;
    }
  } catch (const ConfigError& e) {
    std::cerr << "xgrad: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "xgrad: error: " << e.what() << "\n";
    return 1;
  }
  return 2;
}
