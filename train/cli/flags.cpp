#include "train/cli/flags.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <thread>

#include "data/registry.h"

namespace xgrad::train {

CLI::Validator whole_number(std::uint64_t lo, std::uint64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& s) -> std::string {
        if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
          return "must be a whole number in " + range + ", got '" + s + "'";
        errno = 0;
        const unsigned long long v = std::strtoull(s.c_str(), nullptr, 10);
        if (errno == ERANGE || v < lo || v > hi) return "must be in " + range + ", got " + s;
        return "";
      },
      "INT in " + range);
}

CLI::Validator decimal_number() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        static const std::regex number(R"([+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)");
        if (!std::regex_match(s, number)) return "must be a decimal number, got '" + s + "'";
        if (!std::isfinite(std::strtod(s.c_str(), nullptr))) return "must be finite, got " + s;
        return "";
      },
      "NUMBER");
}

CLI::Validator boolean_word() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s == "true" || s == "false" || s == "1" || s == "0") return "";
        return "must be true or false, got '" + s + "'";
      },
      "true|false");
}

CLI::Validator decimal_in(double lo, bool lo_closed, double hi, bool hi_closed) {
  const std::string range = std::string(lo_closed ? "[" : "(") + CLI::detail::to_string(lo) + ", " +
                            (std::isinf(hi) ? std::string("inf") : CLI::detail::to_string(hi)) + (hi_closed ? "]" : ")");
  return CLI::Validator(
      [lo, lo_closed, hi, hi_closed, range](std::string& s) -> std::string {
        std::string copy = s;
        const std::string not_number = decimal_number()(copy);
        if (!not_number.empty()) return not_number + " in " + range;
        const double v = std::strtod(s.c_str(), nullptr);
        const bool above = lo_closed ? v >= lo : v > lo;
        const bool below = hi_closed ? v <= hi : v < hi;
        if (!above || !below) return "must be in " + range + ", got " + s;
        return "";
      },
      "NUMBER in " + range);
}

void refuse_flags(CLI::App& app, const std::vector<RefusedFlag>& flags) {
  for (const RefusedFlag& f : flags) {
    if (CLI::Option* registered = app.get_option_no_throw(f.flag)) app.remove_option(registered);
    const std::string flag = f.flag, reason = f.reason;
    // Listed in --help under their own heading with the reason (a hidden option, group "", has no name in CLI11's
    // errors). The callback refuses; with expected(0, 1) a bare `--lr` is refused the same way as `--lr 0.1`.
    app.add_option(
           flag, [flag, reason](const CLI::results_t&) -> bool { throw CLI::ValidationError(flag, reason); },
           "not taken: " + reason)
        ->expected(0, 1)
        ->group("Not taken by this command")
        ->type_name("");
  }
}

std::vector<RefusedFlag> sweep_refused_flags(const std::string& command) {
  return {
      {"--lr", command + " takes learning rates through --arms (e.g. --arms sgd@0.01,adamw@0.001)"},
      {"--optimizer", command + " takes optimizers through --arms (e.g. --arms sgd@0.01,adamw@0.001)"},
      {"--seed", command + " sets each run's seed from --seeds (e.g. --seeds 0,1,2; --data-seed is the data stream "
                           "of seed 0)"},
      {"--data", command + " does not pass --data to its runs (--task data is not available to " + command +
                     "); train on a data directory with xgrad train --task data --data DIR"},
      {"--vocab-size", command + " does not pass --vocab-size to its runs (--task data is not available to " +
                           command + ")"},
      {"--shuffle", command + " does not pass --shuffle to its runs (--task data is not available to " + command + ")"},
  };
}

CLI::Option* add_list_flag_raw(CLI::App& app, const std::string& flag,
                               std::function<void(const std::vector<std::string>&)> store, const std::string& help,
                               const CLI::Validator& each) {
  return app
      .add_option(
          flag,
          [flag, store, each](const CLI::results_t& results) -> bool {
            std::vector<std::string> items;
            for (const std::string& given : results) {
              std::size_t start = 0;
              while (true) {
                const std::size_t comma = given.find(',', start);
                std::string item = given.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
                if (item.empty())
                  throw CLI::ValidationError(flag, "empty entry in '" + given +
                                                       "' (give comma-separated values, none of them empty)");
                const std::string error = each(item);
                if (!error.empty()) throw CLI::ValidationError(flag, error);
                items.push_back(item);
                if (comma == std::string::npos) break;
                start = comma + 1;
              }
            }
            store(items);
            return true;
          },
          help)
      ->type_name(each.get_description().empty() ? "LIST" : each.get_description() + ",...")
      ->expected(1, CLI::detail::expected_max_vector_size)
      ->allow_extra_args();
}

CLI::Validator arm_entry() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        const std::size_t at = s.find('@');
        if (at != std::string::npos) {
          std::string lr = s.substr(at + 1);
          const std::string error = decimal_number()(lr);
          if (!error.empty())
            return "learning rate in '" + s + "' " + error +
                   " (form: optimizer@lr, e.g. sgd@0.1 or adamw@0.003; optimizers: sgd, adamw)";
        }
        try {
          parse_arm(s);
        } catch (const ConfigError& e) {
          std::string message = e.what();
          if (message.rfind("--arms: ", 0) == 0) message = message.substr(8);
          return message;
        }
        return "";
      },
      "OPTIMIZER@LR");
}

std::vector<RefusedFlag> probe_refused_flags() {
  std::vector<RefusedFlag> out;
  for (const std::string flag : {"--lr", "--optimizer", "--momentum", "--weight-decay", "--clip-grad-norm", "--steps",
                                 "--log-every", "--print-every", "--eval-every", "--eval-batches"})
    out.push_back({flag, "probe trains nothing (one forward batch at initialisation), so it does not read " + flag +
                             "; leave it out"});
  return out;
}

void add_training_flags(CLI::App& app, TrainConfig& c, std::string& scale, bool with_model_size,
                        const std::string& no_data_task) {
  if (no_data_task.empty()) {
    app.add_option("--task", c.task, "task (allowed: " + CLI::detail::join(data::task_names()) + ")")
        ->capture_default_str()
        ->check(CLI::IsMember(data::task_names()));
  } else {
    std::vector<std::string> names;
    for (const auto& n : data::task_names())
      if (n != "data") names.push_back(n);
    const std::string allowed = CLI::detail::join(names, ", ");
    app.add_option("--task", c.task, "task (allowed: " + allowed + ")")
        ->capture_default_str()
        ->check(CLI::Validator(
            [names, allowed, no_data_task](std::string& s) -> std::string {
              if (s == "data")
                return "data is not taken by " + no_data_task + " (its runs get no --data directory); train on a "
                       "data directory with xgrad train --task data --data DIR";
              for (const auto& n : names)
                if (s == n) return "";
              return s + " not in {" + allowed + "}";
            },
            "TASK"));
  }
  app.add_option("--n-keys", c.n_keys, "kv_recall: distinct keys")->capture_default_str()
      ->check(whole_number(1, 4096));
  app.add_option("--n-values", c.n_values, "kv_recall: distinct values (answer classes)")->capture_default_str()
      ->check(whole_number(2, 4096));
  app.add_option("--n-pairs", c.n_pairs, "kv_recall: key-value pairs per sequence")->capture_default_str()
      ->check(whole_number(1, 4096));
  app.add_option("--seq-len", c.seq_len, "copy/reverse/sort/majority/induction/char_lm: tokens per sequence")
      ->capture_default_str()
      ->check(whole_number(2, 65536));
  app.add_option("--n-symbols", c.n_symbols, "copy/reverse/sort/majority/induction: alphabet size")
      ->capture_default_str()
      ->check(whole_number(2, 4096));
  app.add_option("--text", c.text_path, "char_lm: a UTF-8 text file (the last 10% is held out for eval_loss)");
  app.add_option("--d-model", c.d_model, "model width")->capture_default_str()
      ->check(whole_number(1, 16384));
  if (with_model_size) {
    const auto& scalings = Registry<nn::ScalingEntry>::instance();
    app.add_option("--scale", scale, "attention score scaling (allowed: " + scalings.joined_names() + ")")
        ->capture_default_str()
        ->check(CLI::IsMember(scalings.names()));
  }
  if (with_model_size)
    app.add_option("--d-k", c.head_dim, "head size d_k (0 = d_model / n_heads)")
        ->capture_default_str()
        ->check(whole_number(0, 8192));
  app.add_option("--n-heads", c.n_heads, "attention heads (d_k = d_model / n_heads)")->capture_default_str()
      ->check(whole_number(1, 1024));
  app.add_option("--n-layers", c.n_layers, "transformer blocks")->capture_default_str()
      ->check(whole_number(1, 64));
  app.add_option("--d-ff", c.d_ff, "MLP hidden size (0 = 4 * d_model)")->capture_default_str()
      ->check(whole_number(0, 65536));
  app.add_option("--mlp", c.mlp, "include the MLP in each block (true/false)")->capture_default_str()
      ->check(boolean_word());
  app.add_option("--layer-norm", c.layer_norm, "LayerNorm before each sublayer and the readout (true/false)")
      ->capture_default_str()
      ->check(boolean_word());
  app.add_option("--residual", c.residual, "residual connections (true/false)")->capture_default_str()
      ->check(boolean_word());
  app.add_option("--causal", c.causal, "causal attention mask (true/false)")->capture_default_str()
      ->check(boolean_word());
  app.add_option("--emb-init-std", c.emb_init_std, "std of the token and position embeddings at init")
      ->capture_default_str()
      ->check(decimal_number());
  app.add_option("--proj-init-gain", c.proj_init_gain, "multiplies the LeCun init std of W_q, W_k, W_v, W_o")
      ->capture_default_str()
      ->check(decimal_number());
  app.add_option("--batch-size", c.batch_size, "sequences per step")->capture_default_str()
      ->check(whole_number(1, 1 << 20));
  app.add_option("--steps", c.steps, "training steps")->capture_default_str()
      ->check(whole_number(1, 1000000000));
  app.add_option("--lr", c.lr, "learning rate")->capture_default_str()
      ->check(decimal_number());
  app.add_option("--optimizer", c.optimizer, "optimizer (allowed: sgd, adamw)")
      ->capture_default_str()
      ->check(CLI::IsMember({"sgd", "adamw"}));
  app.add_option("--momentum", c.momentum, "SGD momentum")->capture_default_str()
      ->check(decimal_number());
  app.add_option("--weight-decay", c.weight_decay, "weight decay (decoupled for AdamW)")->capture_default_str()
      ->check(decimal_number());
  app.add_option("--clip-grad-norm", c.clip_grad_norm, "clip the global gradient norm (0 = off)")
      ->capture_default_str()
      ->check(decimal_number());
  app.add_option("--seed", c.seed, "seed of the initial weights")->capture_default_str()
      ->check(whole_number(0, UINT64_MAX));
  app.add_option("--data-seed", c.data_seed, "seed of the data stream (default: --seed)")
      ->check(whole_number(0, UINT64_MAX));
  app.add_option("--log-every", c.log_every, "attention statistics and update RMS every N steps")
      ->capture_default_str()
      ->check(whole_number(1, 1000000000));
  app.add_option("--print-every", c.print_every, "console progress every N steps")->capture_default_str()
      ->check(whole_number(1, 1000000000));
  app.add_option("--eval-every", c.eval_every, "held-out loss every N steps (0 = off)")->capture_default_str()
      ->check(whole_number(0, 1000000000));
  app.add_option("--eval-batches", c.eval_batches, "batches per held-out evaluation")->capture_default_str()
      ->check(whole_number(1, 10000));
  app.add_option("--flush-denormals", c.flush_denormals, "flush subnormal floats to zero (faster saturated softmax)")
      ->capture_default_str()
      ->check(boolean_word());
  app.add_option("--threads", c.threads, "threads per run, for BLAS and xgrad's own loops")->capture_default_str()
      ->check(whole_number(1, 64));
}

void add_run_flags(CLI::App& app, TrainConfig& c, std::string& resume_dir) {
  app.add_option("--out", c.out, "run directory to write");
  app.add_flag("--overwrite", c.overwrite, "replace a run already in --out");
  app.add_option("--resume", resume_dir,
                 "continue the run in DIR from its checkpoint (its settings are kept; --steps may be raised)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--checkpoint-every", c.checkpoint_every,
                 "write DIR/checkpoint.safetensors every N steps (0 = only at the end)")
      ->capture_default_str()
      ->check(whole_number(0, 1000000000));
  app.add_option("--on-nan", c.on_nan, "non-finite loss or gradient: stop the run (exit 3) or skip the step (allowed: stop, skip)")
      ->capture_default_str()
      ->check(CLI::IsMember({"stop", "skip"}));
  add_data_flags(app, c);
  app.add_option("--init-from", c.init_from, "start from the weights in this .safetensors file (shapes must match)")
      ->check(CLI::ExistingFile);
}

void add_data_flags(CLI::App& app, TrainConfig& c) {
  app.add_option("--data", c.data_dir,
                 "data: directory of inputs.npy and targets.npy (int32/int64 [N, T]; target -1 = no loss), optionally "
                 "eval_inputs.npy and eval_targets.npy")
      ->check(CLI::ExistingDirectory);
  app.add_option("--vocab-size", c.data_vocab_size, "data: vocabulary size (0 = max token id + 1)")
      ->capture_default_str()
      ->check(whole_number(0, 1u << 24));
  app.add_flag("--shuffle", c.shuffle, "data: read the rows in a seeded random order, a new one each epoch");
}

std::string find_resume_dir(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) != "train") return "";
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--resume" && i + 1 < argc) return argv[i + 1];
    if (arg.rfind("--resume=", 0) == 0) return arg.substr(9);
  }
  return "";
}

SweepConfig experiment_defaults() {
  SweepConfig c;
  c.base.steps = 600;
  c.base.batch_size = 64;
  c.base.log_every = 10;
  c.base.print_every = 100;
  c.d_ks = {16, 64, 256};
  c.scales = {"sqrt_dk", "none"};
  c.seeds = {0, 1, 2};
  c.arms = {{"sgd", 0.01}, {"sgd", 0.03}, {"adamw", 1e-3}};
  const unsigned cores = std::thread::hardware_concurrency();
  c.jobs = cores ? static_cast<int>(cores) : 1;
  return c;
}

void add_sweep_flags(CLI::App& app, SweepConfig& config, SweepFlags& flags) {
  std::string unused_scale;
  add_training_flags(app, config.base, unused_scale, false, app.get_name());
  flags.scales = config.scales;
  for (auto& a : config.arms) flags.arms.push_back(a.optimizer + "@" + CLI::detail::to_string(a.lr));
  flags.seeds = config.seeds;
  flags.d_ks = config.d_ks;
  add_list_flag(app, "--scale", flags.scales,
                "scalings, e.g. --scale sqrt_dk,none (allowed: " +
                    Registry<nn::ScalingEntry>::instance().joined_names() + ")",
                CLI::IsMember(Registry<nn::ScalingEntry>::instance().names()));
  add_list_flag(app, "--d-k", flags.d_ks, "head sizes, e.g. --d-k 16,64,256 (d_model stays --d-model)",
                whole_number(1, 8192));
  add_list_flag(app, "--seeds", flags.seeds, "weight seeds; seed k also picks data stream data_seed + k",
                whole_number(0, UINT64_MAX));
  add_list_flag(app, "--arms", flags.arms, "optimizer@lr pairs, e.g. --arms sgd@0.1,adamw@0.003", arm_entry());
  app.add_option("--jobs", config.jobs, "runs in parallel (default: one per core)")
      ->capture_default_str()
      ->check(whole_number(1, 256));
  app.add_option("--out", config.out, "sweep directory (sweep: required; experiment: default runs/experiment-<date>-<time>)");
}

void finish_sweep_flags(const CLI::App& app, SweepConfig& config, const SweepFlags& flags) {
  if (app.count("--data-seed") == 0) config.base.data_seed = 0;
  config.scales.clear();
  config.scales = flags.scales;
  config.arms.clear();
  for (auto& a : flags.arms) config.arms.push_back(parse_arm(a));
  config.seeds = flags.seeds;
  config.d_ks = flags.d_ks;
  config.base.out = config.out.empty() ? "-" : config.out;  // replaced per run
}

}  // namespace xgrad::train
