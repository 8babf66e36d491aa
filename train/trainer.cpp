#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <spdlog/spdlog.h>

#include "data/kv_recall.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "train/environment.h"
#include "train/metrics_log.h"

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
          {"diverged", diverged},
          {"diverged_step", diverged_step},
          {"wall_seconds", wall_seconds}};
}

RunSummary RunSummary::from_json(const nlohmann::json& j) {
  RunSummary s;
  s.steps_done = j.at("steps_done").get<std::size_t>();
  s.chance_loss = j.at("chance_loss").get<double>();
  s.first_loss = j.at("first_loss").get<double>();
  s.final_loss = j.at("final_loss").is_number() ? j.at("final_loss").get<double>() : NAN;
  s.final_accuracy = j.at("final_accuracy").get<double>();
  s.mean_grad_norm_w_q = j.at("mean_grad_norm_w_q").is_number() ? j.at("mean_grad_norm_w_q").get<double>() : NAN;
  s.mean_grad_norm_w_k = j.at("mean_grad_norm_w_k").is_number() ? j.at("mean_grad_norm_w_k").get<double>() : NAN;
  s.diverged = j.at("diverged").get<bool>();
  s.diverged_step = j.at("diverged_step").get<long>();
  s.wall_seconds = j.at("wall_seconds").get<double>();
  return s;
}

namespace {

void write_json(const fs::path& path, const nlohmann::json& j) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path.string());
  out << j.dump(2) << "\n";
  if (!out) throw std::runtime_error("writing " + path.string() + " failed");
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

}  // namespace

RunSummary train(const TrainConfig& cfg) {
  cfg.validate();
  const auto wall_start = std::chrono::steady_clock::now();
  const fs::path dir(cfg.out);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("--out: cannot create run directory " + dir.string() + ": " + ec.message());
  set_threads(cfg.threads);

  data::KeyValueRecall task({cfg.n_keys, cfg.n_values, cfg.n_pairs});
  nn::ModelConfig mc;
  mc.vocab_size = task.vocab_size();
  mc.max_seq_len = task.seq_len();
  mc.d_model = cfg.d_model;
  mc.n_heads = cfg.n_heads;
  mc.n_layers = cfg.n_layers;
  mc.d_ff = cfg.d_ff;
  mc.mlp = cfg.mlp;
  mc.causal = cfg.causal;
  mc.scale = cfg.scale;
  nn::AttentionModel model(mc, cfg.seed);
  const auto named = model.named_parameters();
  std::unique_ptr<nn::Optimizer> opt;
  if (cfg.optimizer == "sgd")
    opt = std::make_unique<nn::SGD>(model.parameters(), cfg.lr, cfg.momentum, cfg.weight_decay);
  else
    opt = std::make_unique<nn::AdamW>(model.parameters(), cfg.lr, 0.9, 0.999, 1e-8, cfg.weight_decay);

  nlohmann::json config_json = cfg.to_json();
  config_json["vocab_size"] = task.vocab_size();
  config_json["seq_len"] = task.seq_len();
  config_json["chance_loss"] = task.chance_loss();
  config_json["num_parameters"] = model.num_parameters();
  config_json["environment"] = environment_json();
  write_json(dir / "config.json", config_json);

  std::vector<std::string> columns{"step", "loss", "accuracy", "lr", "grad_norm"};
  std::vector<std::size_t> wq_idx, wk_idx;
  for (std::size_t i = 0; i < named.size(); ++i) {
    columns.push_back("grad_norm/" + named[i].first);
    if (ends_with(named[i].first, "attn.w_q.weight")) wq_idx.push_back(i);
    if (ends_with(named[i].first, "attn.w_k.weight")) wk_idx.push_back(i);
  }
  columns.push_back("step_ms");
  MetricsLog log((dir / "metrics.csv").string(), columns);

  auto logger = spdlog::default_logger();
  const std::string run_name = dir.filename().string();
  logger->info("[{}] training: d_model={} n_heads={} d_k={} scale={} optimizer={} lr={} steps={} params={}", run_name,
               cfg.d_model, cfg.n_heads, cfg.d_k(), nn::to_string(cfg.scale), cfg.optimizer, cfg.lr, cfg.steps,
               model.num_parameters());

  RunSummary summary;
  summary.chance_loss = task.chance_loss();
  const std::size_t window = std::min<std::size_t>(20, cfg.steps);
  double sum_wq = 0, sum_wk = 0, tail_loss = 0, tail_acc = 0;
  std::vector<double> row(columns.size());
  for (std::size_t step = 0; step < cfg.steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    const data::Batch batch = task.batch(cfg.data_seed, step, cfg.batch_size);
    Tensor logits = model.forward(batch.inputs);
    Tensor loss = cross_entropy(logits, batch.targets);
    const double loss_value = loss.item();
    const double acc = accuracy(logits.value(), batch.targets);
    opt->zero_grad();
    loss.backward();

    std::vector<double> norms(named.size());
    for (std::size_t i = 0; i < named.size(); ++i) norms[i] = nn::grad_norm(named[i].second);
    const double total_norm = nn::clip_grad_norm(model.parameters(), cfg.clip_grad_norm);
    const bool finite = std::isfinite(loss_value) && std::isfinite(total_norm);
    if (finite) opt->step();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

    std::size_t c = 0;
    row[c++] = static_cast<double>(step);
    row[c++] = loss_value;
    row[c++] = acc;
    row[c++] = opt->lr();
    row[c++] = total_norm;
    for (double n : norms) row[c++] = n;
    row[c++] = ms;
    log.write(row);

    double wq = 0, wk = 0;
    for (auto i : wq_idx) wq += norms[i] * norms[i];
    for (auto i : wk_idx) wk += norms[i] * norms[i];
    sum_wq += std::sqrt(wq);
    sum_wk += std::sqrt(wk);
    if (step == 0) summary.first_loss = loss_value;
    if (step + window >= cfg.steps) {
      tail_loss += loss_value;
      tail_acc += acc;
    }
    summary.steps_done = step + 1;
    if (!finite) {
      summary.diverged = true;
      summary.diverged_step = static_cast<long>(step);
      logger->warn("[{}] diverged at step {}: loss={} grad_norm={}; stopping (every row so far is in metrics.csv)",
                   run_name, step, loss_value, total_norm);
      break;
    }
    if ((step + 1) % cfg.log_every == 0 || step + 1 == cfg.steps)
      logger->info("[{}] step {:>5}/{}  loss {:.4f}  acc {:.3f}  grad_norm {:.3g}  {:.2f} ms/step", run_name, step + 1,
                   cfg.steps, loss_value, acc, total_norm, ms);
  }
  const double n = static_cast<double>(summary.steps_done);
  summary.mean_grad_norm_w_q = sum_wq / n;
  summary.mean_grad_norm_w_k = sum_wk / n;
  summary.final_loss = summary.diverged ? NAN : tail_loss / static_cast<double>(window);
  summary.final_accuracy = summary.diverged ? 0.0 : tail_acc / static_cast<double>(window);
  summary.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  write_json(dir / "summary.json", summary.to_json());
  return summary;
}

}  // namespace xgrad::train
