// Evaluation at other lengths than training (--eval-seq-len, --eval-n-pairs): the trained model on its task with
// seq_len or n_pairs changed, at the end of the run, into summary.json (run_files.h: LengthEval).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/task.h"
#include "nn/model.h"
#include "train/config.h"
#include "train/run_files.h"

namespace xgrad::train {

/// One evaluation a run asks for: the task setting (seq_len, n_pairs) and its value there.
struct LengthEvalPoint {
  std::string setting;
  std::size_t value = 0;
};

/// The evaluations of cfg.eval_seq_len, then cfg.eval_n_pairs, in the order given. Throws ConfigError, naming the
/// flag, for a list that is not comma-separated whole numbers, a value outside the setting's range, and a flag
/// given for a task that has no such setting (kv_recall's length is --n-pairs, char_lm and copy have no pairs).
std::vector<LengthEvalPoint> length_eval_points(const TrainConfig& cfg);

/// The task cfg trains on with `point`'s setting changed. Throws ConfigError naming the flag and its value for a
/// task that cannot be built so (the task's message: kv_recall's n_keys must be >= n_pairs, ...) or whose
/// vocabulary would differ from `trained`'s (the model has one readout).
std::unique_ptr<data::Task> task_at_length(const TrainConfig& cfg, const LengthEvalPoint& point,
                                           const data::Task& trained);

/// A model of `trained`'s weights for sequences of `task`: every parameter and buffer copied, and a positional
/// table of task.seq_len() rows, row t = trained's row task.trained_positions(trained_task)[t], so no position
/// takes an embedding training never updated. `config` is trained's ModelConfig. Throws std::runtime_error when a
/// state tensor differs in shape (a config that is not trained's).
std::unique_ptr<nn::AttentionModel> model_at_length(const nn::AttentionModel& trained, const nn::ModelConfig& config,
                                                    const data::Task& trained_task, const data::Task& task);

/// Loss, accuracy and the last attention layer's largest weight and entropy at the queries that carry a target,
/// over cfg.eval_batches held-out batches (Split::eval, batches 0, 1, ...: the same for a resumed run) of
/// cfg.batch_size sequences, for every point of length_eval_points(cfg). No gradient is computed. `model` is
/// unchanged (its attention layers record nothing afterwards). `stop_requested` (if given) is asked before each
/// point and each batch: once it says true the evaluation ends there and returns the points finished so far (the
/// caller, told the same by its own flag, discards them).
std::vector<LengthEval> evaluate_lengths(const nn::AttentionModel& model, const data::Task& trained_task,
                                         const TrainConfig& cfg, const std::function<bool()>& stop_requested = nullptr);

}  // namespace xgrad::train
