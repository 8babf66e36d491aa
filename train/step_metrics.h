// metrics.csv as the trainer fills it: a table of column groups, each naming its columns and computing the values
// written to them from one training step. Column names come from train/run_files.h, which the report reads with.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

#include "data/task.h"
#include "nn/model.h"
#include "train/config.h"
#include "train/run_files.h"

namespace xgrad::train {

/// What one training step produced, as the metrics table needs it.
struct StepRecord {
  std::size_t step = 0;
  double loss = 0;       // mean cross-entropy of the batch, nats
  double accuracy = 0;   // fraction of target positions whose arg-max logit is the target
  double lr = 0;         // the optimizer's learning rate at this step
  double z_loss = 0;     // mean (log Z)^2 of the readout at the target positions (z_loss in autograd/ops_nn.h)
  double grad_norm = 0;  // global L2 norm of the gradients, before clipping
  std::vector<double> grad_norms;    // per parameter (named_parameters() order), before clipping
  bool finite = true;                // loss and gradients finite (the update was applied)
  std::string first_nonfinite;       // non-finite steps: "value of <param>" or "gradient of <param>", "" if neither
  bool measured = false;             // a log_every step: attention statistics and RMS columns are computed
  xt::xarray<std::int64_t> targets;  // the batch's targets [B, T] (-1: no loss there)
  std::vector<xt::xarray<float>> before_update;  // measured steps: the parameters before the optimizer step
  double step_ms = 0;                            // forward, backward and update, milliseconds
  bool stop_requested = false;  // several ranks: some rank was asked to stop; every rank stops after this step
};

/// The metrics.csv columns of one run and, for each, what is written there. Rows of steps that are not measured
/// leave the measured-only groups empty (they read as NaN); eval_loss holds nan except every eval_every steps and on
/// the last step.
class StepMetrics {
 public:
  /// The table for `model` (its parameters and attention layers) trained on `task` under `config`.
  StepMetrics(nn::AttentionModel& model, const data::Task& task, const TrainConfig& config);
  /// The header of metrics.csv.
  std::vector<std::string> columns() const;
  /// For a resumed run: drops the columns added since an earlier release wrote `header` (the first line of its
  /// metrics.csv), when those are all it lacks (the z_loss column, then each head's qk_spectral_norm, then the
  /// scaling's learned scalars), so that the run
  /// continues its file with the columns it began with. Any other difference is left for the resume to refuse.
  void keep_columns_of(const std::string& header);
  /// How many of columns() are written only on measured steps (every --log-every steps and the last).
  std::size_t measured_only_columns() const;
  /// Per column of columns(): whether it is written only on measured steps (MetricsLog::write leaves it empty on
  /// the others).
  std::vector<bool> measured_only_mask() const;
  /// The metrics.csv row of `record`, one value per column. Reads and then frees the attention layers' records of
  /// a measured step; runs the held-out evaluation on an eval step.
  std::vector<double> row(const StepRecord& record);

 private:
  struct Group {
    std::vector<std::string> names;
    bool measured_only;                                                       // nan on steps that are not measured
    std::function<void(const StepRecord&, std::vector<double>& row)> append;  // appends names.size() values
    // The metrics.csv release that added the columns (metrics_columns::kFirstRelease ... kNewestRelease).
    // keep_columns_of drops the columns added after the release that began a resumed run's file.
    int added_in = metrics_columns::kFirstRelease;
    std::vector<int> name_added_in;  // per name, where a group's columns were not all added at once (else empty)
    std::vector<bool> dropped;       // set by keep_columns_of: the values of `append` that are not written
  };
  void add(std::vector<std::string> names, bool measured_only,
           std::function<void(const StepRecord&, std::vector<double>&)> append);
  void add_scalar(const std::string& name, std::function<double(const StepRecord&)> value);
  void add_attention_statistics(nn::AttentionModel& model);
  void add_scaling_scalars(const std::vector<std::pair<std::string, Tensor>>& named, const std::string& scale);
  std::vector<Group> groups_;
};

/// A rough upper estimate of what a run writes to disk (bytes): metrics.csv's rows still to come and one checkpoint.
struct DiskEstimate {
  std::size_t rows = 0;         // rows still to write: steps from the starting step to the end
  std::size_t logged_rows = 0;  // of them, measured steps (every log_every steps and the last)
  double logged_row = 0;        // bytes of a measured row: every column
  double other_row = 0;         // bytes of another row, whose measured-only columns hold nothing
  double header = 0;            // metrics.csv's header row (0 when resuming: it is written already)
  double checkpoint = 0;        // checkpoint.safetensors: the parameters and the optimizer's buffers, float32
  double bytes() const { return header + logged_row * logged_rows + other_row * (rows - logged_rows) + checkpoint; }
};

/// The estimate for `config` with metrics.csv `columns` of which `measured_only` are written only on measured
/// steps, `parameters` float32 weights with `state_kinds` optimizer buffers each, starting at `from_step`.
DiskEstimate estimate_disk(const TrainConfig& config, const std::vector<std::string>& columns,
                           std::size_t measured_only, std::size_t parameters, std::size_t state_kinds,
                           std::size_t from_step);

/// A size in bytes for people: "950 B", "12.3 kB", "512.0 MB", "21.6 GB" (powers of 1000).
std::string byte_text(double bytes);

/// Fraction of target positions (target >= 0) where the arg-max class of logits [..., C] equals the target.
double accuracy(const xt::xarray<float>& logits, const xt::xarray<std::int64_t>& targets);

}  // namespace xgrad::train
