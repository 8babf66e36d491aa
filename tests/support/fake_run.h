// A run directory as the trainer would write it, with the series given by hand: config.json, metrics.csv and
// summary.json under their names in train/run_files.h, metrics.csv's columns named by its metrics_columns. For the
// tests of what reads runs (compare, its statistics and plots) without training one.
#pragma once

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/attention_stats.h"
#include "train/run_files.h"

namespace xgrad::testing {

/// The series and settings of a fabricated run (missing series: 1 for gradient norms, nan for attention
/// statistics). Its model: kv_recall, d_model 64, two layers of two heads.
struct FakeRun {
  std::size_t d_k = 16;
  std::string scale = "none";
  std::string optimizer = "adamw";
  double lr = 0.01;
  int seed = 0;
  int data_seed = -1;  // -1: the seed
  std::string environment = "machine-a";
  std::vector<double> loss, accuracy;
  std::vector<double> w_q0, w_q1, w_k0, w_k1;  // per-layer gradient norms of W_q and W_k (two layers)
  std::vector<double> entropy;                 // first layer, both heads
  std::vector<double> score_std;
  std::vector<double> eval_loss;  // nan where not given
  bool summary = true;
  bool diverged = false;
  long diverged_step = -1;
  std::size_t steps = 0;                                   // config "steps"; 0: the number of rows
  std::string on_nan;                                      // config "on_nan" when not empty
  std::string tail;                                        // raw text after the last row (a cut-short line)
  nlohmann::json extra_config = nlohmann::json::object();  // more config.json keys (a scaling's own settings)
};

/// `v` as the trainer writes a number into metrics.csv: 9 significant digits (%.9g).
inline std::string csv_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

namespace fake_run_detail {

inline double at(const std::vector<double>& v, std::size_t i, double fallback) {
  return i < v.size() ? v[i] : fallback;
}

/// metrics.csv's columns as FakeRun writes them, in order, each with its value at row i.
using Column = std::pair<std::string, std::function<double(const FakeRun&, std::size_t)>>;
inline std::vector<Column> columns() {
  namespace mc = train::metrics_columns;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::string score_std = mc::attention_stat_name(&nn::AttentionStats::score_std);
  const std::string entropy = mc::attention_stat_name(&nn::AttentionStats::entropy_mean);
  auto series = [](std::vector<double> FakeRun::*s, double fallback) {
    return [s, fallback](const FakeRun& r, std::size_t i) { return at(r.*s, i, fallback); };
  };
  return {
      {mc::kStep, [](const FakeRun&, std::size_t i) { return static_cast<double>(i); }},
      {mc::kLoss, [](const FakeRun& r, std::size_t i) { return r.loss[i]; }},
      {mc::kAccuracy, series(&FakeRun::accuracy, 0.0)},
      {mc::kLr, [](const FakeRun& r, std::size_t) { return r.lr; }},
      {mc::kGradNorm, [nan](const FakeRun& r, std::size_t i) { return std::isfinite(r.loss[i]) ? 1.0 : nan; }},
      {mc::grad_norm("tok_emb.weight"), [](const FakeRun&, std::size_t) { return 0.5; }},
      {mc::grad_norm("blocks.0.attn.w_q.weight"), series(&FakeRun::w_q0, 1.0)},
      {mc::grad_norm("blocks.0.attn.w_k.weight"), series(&FakeRun::w_k0, 1.0)},
      {mc::grad_norm("blocks.1.attn.w_q.weight"), series(&FakeRun::w_q1, 1.0)},
      {mc::grad_norm("blocks.1.attn.w_k.weight"), series(&FakeRun::w_k1, 1.0)},
      {mc::attention(0, 0, score_std), series(&FakeRun::score_std, nan)},
      {mc::attention(0, 0, entropy), series(&FakeRun::entropy, nan)},
      {mc::attention(0, 1, score_std), series(&FakeRun::score_std, nan)},
      {mc::attention(0, 1, entropy), series(&FakeRun::entropy, nan)},
      // A second layer's entropy: compare reads the first layer only.
      {mc::attention(1, 0, entropy), [](const FakeRun&, std::size_t) { return 99.0; }},
      {mc::kEvalLoss, series(&FakeRun::eval_loss, nan)},
      {mc::kStepMs, [](const FakeRun&, std::size_t) { return 1.0; }},
  };
}

inline nlohmann::json config(const std::filesystem::path& dir, const FakeRun& r) {
  const std::size_t steps = r.steps ? r.steps : r.loss.size();
  nlohmann::json config{{"task", "kv_recall"},
                        {"n_values", 8},
                        {"chance_loss", std::log(8.0)},
                        {"d_model", 64},
                        {"d_k", r.d_k},
                        {"n_heads", 2},
                        {"n_layers", 2},
                        {"scale", r.scale},
                        {"optimizer", r.optimizer},
                        {"lr", r.lr},
                        {"batch_size", 64},
                        {"steps", steps},
                        {"mlp", true},
                        {"layer_norm", true},
                        {"residual", true},
                        {"seed", r.seed},
                        {"data_seed", r.data_seed < 0 ? r.seed : r.data_seed},
                        {"out", dir.string()},
                        {"print_every", 100},
                        {"log_every", 1},
                        {"threads", 1},
                        {"environment", {{"machine", r.environment}}}};
  if (!r.on_nan.empty()) config["on_nan"] = r.on_nan;
  config.update(r.extra_config);
  return config;
}

inline nlohmann::json summary(const FakeRun& r) {
  return {{"steps_done", r.loss.size()},
          {"chance_loss", std::log(8.0)},
          {"first_loss", r.loss.front()},
          {"final_loss", 0.0},
          {"final_accuracy", 0.0},
          {"mean_grad_norm_w_q", 0.0},
          {"mean_grad_norm_w_k", 0.0},
          {"frac_zero_grad_w_q", 0.0},
          {"frac_zero_grad_w_k", 0.0},
          {"diverged", r.diverged},
          {"diverged_step", r.diverged_step},
          {"wall_seconds", 1.0}};
}

}  // namespace fake_run_detail

/// Writes run `r` into `dir` (created): config.json, metrics.csv (one row per loss, then r.tail) and, when
/// r.summary, summary.json.
inline void write_run(const std::filesystem::path& dir, const FakeRun& r) {
  namespace detail = fake_run_detail;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / train::kConfigFile) << detail::config(dir, r).dump(2);
  const std::vector<detail::Column> columns = detail::columns();
  std::ofstream csv(dir / train::kMetricsFile);
  for (std::size_t c = 0; c < columns.size(); ++c) csv << (c ? "," : "") << columns[c].first;
  csv << "\n";
  for (std::size_t i = 0; i < r.loss.size(); ++i) {
    for (std::size_t c = 0; c < columns.size(); ++c) csv << (c ? "," : "") << csv_number(columns[c].second(r, i));
    csv << "\n";
  }
  csv << r.tail;
  csv.close();
  if (r.summary) std::ofstream(dir / train::kSummaryFile) << detail::summary(r).dump(2);
}

}  // namespace xgrad::testing
