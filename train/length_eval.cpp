#include "train/length_eval.h"

#include <stdexcept>

#include <fmt/format.h>

#include "data/registry.h"
#include "nn/attention_stats.h"
#include "train/settings.h"
#include "train/step_metrics.h"

namespace xgrad::train {

namespace {

// Evaluations a run makes at most: each is an entry of summary.json, whose readers refuse a file over
// kMaxRunJsonBytes (an entry takes about 200 bytes, so 64 fill a tenth of it).
constexpr std::size_t kMaxLengthEvals = 64;

// The task settings --eval-seq-len and --eval-n-pairs change, with their flags.
struct LengthFlag {
  const char* key;  // the task's setting
  const std::string TrainConfig::*list;
};
const LengthFlag kLengthFlags[] = {{"seq_len", &TrainConfig::eval_seq_len}, {"n_pairs", &TrainConfig::eval_n_pairs}};

std::string eval_flag(const std::string& key) { return flag_of("eval_" + key); }

// The tasks that declare `key`, for messages.
std::string tasks_with(const std::string& key) {
  std::string names;
  for (const ComponentSetting& c : component_settings())
    if (c.component == "task" && c.setting.key == key)
      for (const std::string& owner : c.owners) names += (names.empty() ? "" : ", ") + owner;
  return names;
}

}  // namespace

std::vector<LengthEvalPoint> length_eval_points(const TrainConfig& cfg) {
  std::vector<LengthEvalPoint> points;
  const SettingValues task_settings = component_values(cfg, "task");
  for (const LengthFlag& f : kLengthFlags) {
    const std::string& list = cfg.*f.list;
    if (list.empty()) continue;
    const std::string flag = eval_flag(f.key);
    if (!task_settings.contains(f.key))
      throw ConfigError(flag + ": the task " + cfg.task + " has no " + flag_of(f.key) + " (evaluation at another " +
                        f.key + " is defined for --task " + tasks_with(f.key) + ")" +
                        (cfg.task == "kv_recall" ? "; kv_recall's length is --n-pairs: use --eval-n-pairs" : ""));
    const Setting* declared = find_setting(f.key);
    std::size_t start = 0;
    while (true) {
      const std::size_t comma = list.find(',', start);
      const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      const bool digits =
          !item.empty() && item.size() <= 9 && item.find_first_not_of("0123456789") == std::string::npos;
      const std::string error = digits ? check_setting_value(*declared, std::stoull(item)) : "not a whole number";
      if (!error.empty())
        throw ConfigError(flag + ": '" + list + "': each value must be a whole number in " + range_text(*declared) +
                          " (comma-separated, e.g. 16,32,64); got '" + item + "'");
      const auto value = static_cast<std::size_t>(std::stoull(item));
      for (const LengthEvalPoint& p : points)  // the same evaluation twice would be run twice
        if (p.setting == f.key && p.value == value)
          throw ConfigError(flag + ": " + item + " is given twice in '" + list + "'");
      points.push_back({f.key, value});
      if (points.size() > kMaxLengthEvals)
        throw ConfigError(flag + ": more than " + std::to_string(kMaxLengthEvals) +
                          " lengths to evaluate (--eval-seq-len and --eval-n-pairs together); give fewer");
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return points;
}

std::unique_ptr<data::Task> task_at_length(const TrainConfig& cfg, const LengthEvalPoint& point,
                                           const data::Task& trained) {
  const std::string given = eval_flag(point.setting) + " " + std::to_string(point.value);
  nlohmann::json settings = component_values(cfg, "task").json();
  settings[point.setting] = point.value;
  std::unique_ptr<data::Task> task;
  try {
    task = data::make_task(cfg.task, SettingValues(settings));
  } catch (const data::TaskError& e) {
    // A task with both lengths (mqar): each list changes its own setting, the other keeps the trained value.
    const std::string other = point.setting == "seq_len" ? "n_pairs" : "seq_len";
    std::string kept;
    if (settings.contains(other))
      kept = "; each " + eval_flag(point.setting) + " value is evaluated at the trained " + flag_of(other) + " " +
             settings.at(other).dump() + " (" + eval_flag("seq_len") + " and " + eval_flag("n_pairs") +
             " are not combined): train with a " + (other == "seq_len" ? "longer --seq-len" : "other --n-pairs") +
             " to evaluate there";
    throw ConfigError(given + ": " + e.what() + kept);
  }
  if (task->vocab_size() != trained.vocab_size())
    throw ConfigError(
        fmt::format("{}: the task's vocabulary would be {} tokens instead of the trained {}; the model "
                    "has one readout",
                    given, task->vocab_size(), trained.vocab_size()));
  return task;
}

std::unique_ptr<nn::AttentionModel> model_at_length(const nn::AttentionModel& trained, const nn::ModelConfig& config,
                                                    const data::Task& trained_task, const data::Task& task) {
  nn::ModelConfig c = config;
  c.max_seq_len = task.seq_len();
  auto model = std::make_unique<nn::AttentionModel>(c, 0);
  model->eval();  // an evaluation: no dropout
  const std::vector<std::size_t> rows = task.trained_positions(trained_task);
  auto target = model->state_dict();
  const auto source = trained.state_dict();
  if (target.size() != source.size()) throw std::runtime_error("model_at_length: the models differ in their state");
  for (std::size_t i = 0; i < source.size(); ++i) {
    const auto& [name, from] = source[i];
    Tensor to = target[i].second;
    if (target[i].first != name) throw std::runtime_error("model_at_length: state " + name + " has no counterpart");
    if (name == "pos_emb.weight") {
      const std::size_t d = from.value().shape(1);
      for (std::size_t t = 0; t < rows.size(); ++t)
        for (std::size_t j = 0; j < d; ++j) to.mutable_value()(t, j) = from.value()(rows[t], j);
      continue;
    }
    if (to.value().shape() != from.value().shape())
      throw std::runtime_error("model_at_length: " + name + " differs in shape from the trained model's");
    to.mutable_value() = from.value();
  }
  return model;
}

std::vector<LengthEval> evaluate_lengths(const nn::AttentionModel& model, const data::Task& trained_task,
                                         const TrainConfig& cfg, const std::function<bool()>& stop_requested) {
  std::vector<LengthEval> out;
  NoGradGuard no_grad;
  // A batch at a long length takes seconds: a stop request is honoured between batches, not after the last.
  auto stopped = [&] { return stop_requested && stop_requested(); };
  for (const LengthEvalPoint& point : length_eval_points(cfg)) {
    if (stopped()) return out;
    const std::unique_ptr<data::Task> task = task_at_length(cfg, point, trained_task);
    const std::unique_ptr<nn::AttentionModel> at_length = model_at_length(model, model.config(), trained_task, *task);
    const auto layers = at_length->attention_layers();
    layers.back()->record_attention = true;
    LengthEval e;
    e.setting = point.setting;
    e.value = point.value;
    e.seq_len = task->seq_len();
    for (std::size_t i = 0; i < cfg.eval_batches; ++i) {
      if (stopped()) return out;
      const data::Batch b = task->batch(cfg.data_seed, i, cfg.batch_size, data::Split::eval);
      const nn::TargetLoss result = nn::loss_at_targets(*at_length, b.inputs, b.targets);
      e.loss += result.loss.item();
      e.accuracy += accuracy(result.logits.value(), result.targets);
      xt::xarray<bool> queries = xt::xarray<bool>::from_shape(b.targets.shape());
      for (std::size_t j = 0; j < b.targets.size(); ++j) queries.data()[j] = b.targets.data()[j] >= 0;
      const nn::AttentionRecord& last = layers.back()->last;
      double max_prob = 0, entropy = 0;
      const auto heads = nn::attention_stats(last.scores.value(), last.probs, nullptr, &queries,
                                             last.query_positions.empty() ? nullptr : &last.query_positions);
      for (const nn::AttentionStats& head : heads) {
        max_prob += head.max_prob_mean;
        entropy += head.entropy_mean;
      }
      e.max_prob_mean += max_prob / static_cast<double>(heads.size());
      e.entropy_mean += entropy / static_cast<double>(heads.size());
    }
    const double n = static_cast<double>(cfg.eval_batches);
    e.loss /= n;
    e.accuracy /= n;
    e.max_prob_mean /= n;
    e.entropy_mean /= n;
    out.push_back(e);
  }
  return out;
}

}  // namespace xgrad::train
