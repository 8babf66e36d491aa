#include "train/step_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "nn/attention_stats.h"
#include "nn/scaling.h"
#include "train/run_files.h"

namespace xgrad::train {

namespace {

namespace columns = metrics_columns;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double rms(const float* x, std::size_t n) {
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return n ? std::sqrt(s / static_cast<double>(n)) : 0.0;
}

// The model in eval mode (no dropout) for the guard's lifetime, then in the mode it was in.
class EvalMode {
 public:
  explicit EvalMode(nn::Module& model) : model_(model), was_training_(model.is_training()) { model_.eval(); }
  ~EvalMode() { model_.train(was_training_); }
  EvalMode(const EvalMode&) = delete;
  EvalMode& operator=(const EvalMode&) = delete;

 private:
  nn::Module& model_;
  bool was_training_;
};

// Mean loss over cfg.eval_batches held-out batches, without a graph and in eval mode.
double eval_loss(nn::AttentionModel& model, const data::Task& task, const TrainConfig& cfg, std::size_t step) {
  NoGradGuard no_grad;
  const EvalMode eval_mode(model);
  double total = 0;
  for (std::size_t i = 0; i < cfg.eval_batches; ++i) {
    const data::Batch b = task.batch(cfg.data_seed, step * cfg.eval_batches + i, cfg.batch_size, data::Split::eval);
    total += nn::loss_at_targets(model, b.inputs, b.targets).loss.item();
  }
  return total / static_cast<double>(cfg.eval_batches);
}

}  // namespace

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

StepMetrics::StepMetrics(nn::AttentionModel& model, const data::Task& task, const TrainConfig& cfg) {
  const auto named = model.named_parameters();
  auto per_parameter = [&named](std::string (*column)(const std::string&)) {
    std::vector<std::string> names;
    for (const auto& [name, p] : named) names.push_back(column(name));
    return names;
  };

  add_scalar(columns::kStep, [](const StepRecord& r) { return static_cast<double>(r.step); });
  add_scalar(columns::kLoss, [](const StepRecord& r) { return r.loss; });
  add_scalar(columns::kAccuracy, [](const StepRecord& r) { return r.accuracy; });
  add_scalar(columns::kLr, [](const StepRecord& r) { return r.lr; });
  add_scalar(columns::kZLoss, [](const StepRecord& r) { return r.z_loss; });
  groups_.back().added_in = columns::kZLossAdded;
  add_scalar(columns::kGradNorm, [](const StepRecord& r) { return r.grad_norm; });
  add(per_parameter(columns::grad_norm), false, [](const StepRecord& r, std::vector<double>& row) {
    row.insert(row.end(), r.grad_norms.begin(), r.grad_norms.end());
  });
  add_attention_statistics(model);
  add(per_parameter(columns::update_rms), true, [named](const StepRecord& r, std::vector<double>& row) {
    for (std::size_t i = 0; i < named.size(); ++i) {
      const xt::xarray<float> update = named[i].second.value() - r.before_update[i];
      row.push_back(rms(update.data(), update.size()));
    }
  });
  add(per_parameter(columns::grad_rms), true, [named](const StepRecord& r, std::vector<double>& row) {
    for (std::size_t i = 0; i < named.size(); ++i)
      row.push_back(r.grad_norms[i] / std::sqrt(static_cast<double>(named[i].second.numel())));
  });
  add_scaling_scalars(named, cfg.model.scale);
  add_scalar(columns::kEvalLoss, [&model, &task, cfg](const StepRecord& r) {
    const bool evaluate = cfg.eval_every > 0 && (r.step % cfg.eval_every == 0 || r.step + 1 == cfg.steps);
    return evaluate ? eval_loss(model, task, cfg, r.step) : kNaN;
  });
  add_scalar(columns::kStepMs, [](const StepRecord& r) { return r.step_ms; });
}

// attn/l<l>h<h>/<stat>, from what each attention layer recorded during the step's forward and backward pass (the
// scores with their gradient, the weights). Queries: the positions that carry a target for the last layer (where
// the answer is read), every position for earlier layers.
void StepMetrics::add_attention_statistics(nn::AttentionModel& model) {
  const auto layers = model.attention_layers();
  std::vector<std::string> names;
  std::vector<int> later;
  for (std::size_t l = 0; l < layers.size(); ++l)
    for (std::size_t h = 0; h < layers[l]->n_heads(); ++h)
      for (const auto& stat : columns::attention_stats()) {
        names.push_back(columns::attention(l, h, stat.name));
        later.push_back(stat.added_in);
      }
  add(names, true, [layers](const StepRecord& r, std::vector<double>& row) {
    xt::xarray<bool> target_positions = xt::xarray<bool>::from_shape(r.targets.shape());
    for (std::size_t i = 0; i < r.targets.size(); ++i) target_positions.data()[i] = r.targets.data()[i] >= 0;
    for (std::size_t l = 0; l < layers.size(); ++l) {
      auto& layer = *layers[l];
      const Tensor& scores = layer.last.scores;
      const xt::xarray<float>* grad = scores.has_grad() ? &scores.grad() : nullptr;
      const bool last_layer = l + 1 == layers.size();
      const auto& rows = layer.last.query_positions;  // the last layer may have computed only the target positions
      auto heads = nn::attention_stats(scores.value(), layer.last.probs, grad, last_layer ? &target_positions : nullptr,
                                       rows.empty() ? nullptr : &rows);
      if (layer.last.qk_spectral_norms.size() == heads.size())
        for (std::size_t h = 0; h < heads.size(); ++h) heads[h].qk_spectral_norm = layer.last.qk_spectral_norms[h];
      for (const auto& head : heads)
        for (const auto& stat : columns::attention_stats()) row.push_back(head.*stat.field);
      layer.last = nn::AttentionRecord();  // free the recorded graph piece
    }
  });
  groups_.back().name_added_in = std::move(later);
}

// scalar/<parameter>[/<index>]: the values of the parameters the run's scaling names as its learned scalars, found
// by their own name (the part after the last '.') in every attention layer.
void StepMetrics::add_scaling_scalars(const std::vector<std::pair<std::string, Tensor>>& named,
                                      const std::string& scale) {
  const nn::ScalingEntry* entry = Registry<nn::ScalingEntry>::instance().find(scale);
  if (!entry || entry->scalars.empty()) return;
  std::vector<std::string> names;
  std::vector<Tensor> logged;
  for (const auto& [name, p] : named) {
    const std::string own = name.substr(name.rfind('.') + 1);
    if (std::find(entry->scalars.begin(), entry->scalars.end(), own) == entry->scalars.end()) continue;
    for (std::size_t i = 0; i < p.numel(); ++i) names.push_back(columns::scalar(name, i, p.numel()));
    logged.push_back(p);
  }
  if (names.empty()) return;
  add(std::move(names), false, [logged](const StepRecord&, std::vector<double>& row) {
    for (const Tensor& p : logged) row.insert(row.end(), p.value().begin(), p.value().end());
  });
  groups_.back().added_in = columns::kScalarsAdded;
}

void StepMetrics::add(std::vector<std::string> names, bool measured_only,
                      std::function<void(const StepRecord&, std::vector<double>&)> append) {
  Group g;
  g.names = std::move(names);
  g.measured_only = measured_only;
  g.append = std::move(append);
  groups_.push_back(std::move(g));
}

void StepMetrics::add_scalar(const std::string& name, std::function<double(const StepRecord&)> value) {
  add({name}, false, [value](const StepRecord& r, std::vector<double>& row) { row.push_back(value(r)); });
}

std::vector<std::string> StepMetrics::columns() const {
  std::vector<std::string> names;
  for (const auto& group : groups_) names.insert(names.end(), group.names.begin(), group.names.end());
  return names;
}

DiskEstimate estimate_disk(const TrainConfig& config, const std::vector<std::string>& columns,
                           std::size_t measured_only, std::size_t parameters, std::size_t state_kinds,
                           std::size_t from_step) {
  // A cell is at most 16 characters of %.9g ("-1.23456789e-308") and a comma; one not measured is the comma alone.
  constexpr double kCellBytes = 17, kNanCellBytes = 1;
  DiskEstimate e;
  for (std::size_t step = from_step; step < config.steps; ++step) {
    ++e.rows;
    if (step % config.log_every == 0 || step + 1 == config.steps) ++e.logged_rows;
  }
  if (from_step == 0)
    for (const std::string& name : columns) e.header += static_cast<double>(name.size() + 1);
  e.logged_row = kCellBytes * static_cast<double>(columns.size());
  e.other_row = kCellBytes * static_cast<double>(columns.size() - measured_only) +
                kNanCellBytes * static_cast<double>(measured_only);
  e.checkpoint = 4.0 * static_cast<double>(parameters) * static_cast<double>(1 + state_kinds);
  return e;
}

std::string byte_text(double bytes) {
  if (bytes < 1e3) return fmt::format("{:.0f} B", bytes);
  if (bytes < 1e6) return fmt::format("{:.1f} kB", bytes / 1e3);
  if (bytes < 1e9) return fmt::format("{:.1f} MB", bytes / 1e6);
  return fmt::format("{:.1f} GB", bytes / 1e9);
}

std::vector<bool> StepMetrics::measured_only_mask() const {
  std::vector<bool> mask;
  for (const auto& group : groups_) mask.insert(mask.end(), group.names.size(), group.measured_only);
  return mask;
}

std::size_t StepMetrics::measured_only_columns() const {
  std::size_t n = 0;
  for (const auto& group : groups_) n += group.measured_only ? group.names.size() : 0;
  return n;
}

void StepMetrics::keep_columns_of(const std::string& header) {
  for (int release = columns::kNewestRelease; release > columns::kFirstRelease;
       --release) {  // the newest earlier release first
    std::vector<Group> kept;
    std::string written;
    for (const auto& group : groups_) {
      if (group.added_in >= release) continue;
      Group g = group;
      if (!g.name_added_in.empty()) {
        g.dropped.assign(group.names.size(), false);
        g.names.clear();
        for (std::size_t i = 0; i < group.names.size(); ++i) {
          g.dropped[i] = group.name_added_in[i] >= release;
          if (!g.dropped[i]) g.names.push_back(group.names[i]);
        }
      }
      for (const auto& name : g.names) written += (written.empty() ? "" : ",") + name;
      kept.push_back(std::move(g));
    }
    if (header == written) {
      groups_ = std::move(kept);
      return;
    }
  }
}

std::vector<double> StepMetrics::row(const StepRecord& record) {
  std::vector<double> row;
  for (const auto& group : groups_) {
    if (group.measured_only && !record.measured) {
      row.insert(row.end(), group.names.size(), kNaN);
    } else if (group.dropped.empty()) {
      group.append(record, row);
    } else {
      std::vector<double> all;
      group.append(record, all);
      for (std::size_t i = 0; i < all.size(); ++i)
        if (!group.dropped[i]) row.push_back(all[i]);
    }
  }
  return row;
}

}  // namespace xgrad::train
