#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include <spdlog/spdlog.h>

#include "data/registry.h"
#include "nn/attention_stats.h"
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
          {"frac_zero_grad_w_q", frac_zero_grad_w_q},
          {"frac_zero_grad_w_k", frac_zero_grad_w_k},
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
  s.frac_zero_grad_w_q = j.value("frac_zero_grad_w_q", 0.0);
  s.frac_zero_grad_w_k = j.value("frac_zero_grad_w_k", 0.0);
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

RunSummary train(const TrainConfig& cfg) {
  cfg.validate();
  const auto wall_start = std::chrono::steady_clock::now();
  const fs::path dir(cfg.out);
  if (!cfg.overwrite && fs::exists(dir / "metrics.csv"))
    throw ConfigError("--out: " + dir.string() + " already holds a run (metrics.csv); pass --overwrite to replace it");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("--out: cannot create run directory " + dir.string() + ": " + ec.message());
  set_threads(cfg.threads);
  set_flush_denormals(cfg.flush_denormals);

  const std::unique_ptr<data::Task> task = data::make_task(cfg.task_options());
  nn::AttentionModel model(model_config(cfg, *task), cfg.seed);
  const auto named = model.named_parameters();
  const auto attn_layers = model.attention_layers();
  std::unique_ptr<nn::Optimizer> opt;
  if (cfg.optimizer == "sgd")
    opt = std::make_unique<nn::SGD>(model.parameters(), cfg.lr, cfg.momentum, cfg.weight_decay);
  else
    opt = std::make_unique<nn::AdamW>(model.parameters(), cfg.lr, 0.9, 0.999, 1e-8, cfg.weight_decay);

  nlohmann::json config_json = cfg.to_json();
  config_json["vocab_size"] = task->vocab_size();
  config_json["seq_len"] = task->seq_len();
  config_json["chance_loss"] = task->chance_loss();
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
  for (std::size_t l = 0; l < attn_layers.size(); ++l)
    for (std::size_t h = 0; h < attn_layers[l]->n_heads; ++h)
      for (const auto& stat : attention_stat_names())
        columns.push_back("attn/l" + std::to_string(l) + "h" + std::to_string(h) + "/" + stat);
  for (const auto& [name, p] : named) columns.push_back("update_rms/" + name);
  for (const auto& [name, p] : named) columns.push_back("grad_rms/" + name);
  columns.push_back("eval_loss");
  columns.push_back("step_ms");
  MetricsLog log((dir / "metrics.csv").string(), columns);

  auto logger = spdlog::default_logger();
  const std::string run_name = dir.filename().string();
  logger->info("[{}] training {}: d_model={} n_heads={} d_k={} n_layers={} scale={} optimizer={} lr={} steps={} "
               "params={}",
               run_name, cfg.task, cfg.d_model, cfg.n_heads, cfg.d_k(), cfg.n_layers, nn::to_string(cfg.scale),
               cfg.optimizer, cfg.lr, cfg.steps, model.num_parameters());

  RunSummary summary;
  summary.chance_loss = task->chance_loss();
  const std::size_t window = std::min<std::size_t>(20, cfg.steps);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  double sum_wq = 0, sum_wk = 0, tail_loss = 0, tail_acc = 0;
  std::size_t zero_wq = 0, zero_wk = 0;
  std::vector<double> row;
  std::vector<xt::xarray<float>> before_step(named.size());
  for (std::size_t step = 0; step < cfg.steps; ++step) {
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

    std::vector<double> norms(named.size());
    for (std::size_t i = 0; i < named.size(); ++i) norms[i] = nn::grad_norm(named[i].second);
    const double total_norm = nn::clip_grad_norm(model.parameters(), cfg.clip_grad_norm);
    const bool finite = std::isfinite(loss_value) && std::isfinite(total_norm);
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
    log.write(row);

    double wq = 0, wk = 0;
    for (auto i : wq_idx) wq += norms[i] * norms[i];
    for (auto i : wk_idx) wk += norms[i] * norms[i];
    sum_wq += std::sqrt(wq);
    sum_wk += std::sqrt(wk);
    zero_wq += wq == 0.0 ? 1 : 0;
    zero_wk += wk == 0.0 ? 1 : 0;
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
    if ((step + 1) % cfg.print_every == 0 || step + 1 == cfg.steps)
      logger->info("[{}] step {:>5}/{}  loss {:.4f}  acc {:.3f}  grad_norm {:.3g}  {:.2f} ms/step", run_name, step + 1,
                   cfg.steps, loss_value, acc, total_norm, ms);
  }
  const double n = static_cast<double>(summary.steps_done);
  summary.mean_grad_norm_w_q = sum_wq / n;
  summary.mean_grad_norm_w_k = sum_wk / n;
  summary.frac_zero_grad_w_q = static_cast<double>(zero_wq) / n;
  summary.frac_zero_grad_w_k = static_cast<double>(zero_wk) / n;
  summary.final_loss = summary.diverged ? NAN : tail_loss / static_cast<double>(window);
  summary.final_accuracy = summary.diverged ? 0.0 : tail_acc / static_cast<double>(window);
  summary.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  write_json(dir / "summary.json", summary.to_json());
  return summary;
}

}  // namespace xgrad::train
