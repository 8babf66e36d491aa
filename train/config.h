// One training run's settings, resolved and validated, and their JSON form (config.json).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/enum_names.h"
#include "common/setting.h"
#include "data/input_file.h"
#include "nn/model_config.h"

namespace xgrad::data {
class Task;
}  // namespace xgrad::data

namespace xgrad::train {

/// Thrown for a bad setting; the message names the flag and the allowed values. The CLI exits 2 on it.
class ConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// What a run does at a non-finite loss or gradient (--on-nan): stop (exit 3), or skip the step and go on.
enum class OnNan { stop, skip };
/// The names of OnNan (config.json's and --on-nan's text).
inline constexpr EnumName<OnNan> kOnNanNames[] = {{OnNan::stop, "stop"}, {OnNan::skip, "skip"}};

/// One part of a run's memory: what holds it, the settings it grows with, and its size.
struct MemoryTerm {
  std::string what;     ///< "the attention scores"
  std::string factors;  ///< the flags it is a product of: "--batch-size x --n-heads x --seq-len^2 x --n-layers"
  double bytes = 0;
  bool activation = false;  ///< held while a step runs (the rough upper part), not for the whole run
};

/// A rough upper estimate of the memory one run needs, by part: weights with their gradients, optimizer moments and
/// pre-step copy; activations kept for backward and as much again for their gradients; the task's data.
struct MemoryEstimate {
  std::vector<MemoryTerm> terms;
  double bytes() const;
  double gib() const { return bytes() / (1024.0 * 1024 * 1024); }
  /// The term holding the most memory.
  const MemoryTerm& largest() const;
  /// What set the sequence length when it is not the task's own setting: "--eval-n-pairs 1500" for an evaluation
  /// at another length ("" for the run's training).
  std::string seq_len_from;
};

/// The settings of one training run. The core settings are typed members for the trainer to read; their declarations
/// (flag, config.json key, type, default, range, help) are one table in settings.cpp, which also sets the defaults
/// (the constructor), so no default is written here; the model's defaults are nn::ModelConfig's, which the table
/// declares as its defaults. The settings of the selected components (the task's, the
/// optimizer's) are values in `settings`, declared by their registry entries.
struct TrainConfig {
  TrainConfig();
  // components: registry names (data/registry.h, nn/optim.h, nn/attention.h)
  std::string task, optimizer;  // the scaling and the attention layer are model.scale, model.attention
  /// The model's settings (nn/model.h), bound to their flags and config.json keys in settings.cpp; the task fills
  /// in vocab_size and max_seq_len (model_config in trainer.h), and model.settings is left empty: the scaling's and
  /// attention layer's own settings are values in `settings`.
  nn::ModelConfig model;
  // optimisation
  std::size_t batch_size, steps;
  double lr, clip_grad_norm;  // clip 0 = off
  double z_loss;              // coefficient of the z-loss added to the cross-entropy (0 = off; the column is logged)
  std::string lr_schedule;    // a registered schedule (nn/lr_schedule.h): the learning rate of each step
  // reproducibility and output
  std::uint64_t seed, data_seed;
  std::size_t log_every;     // saturation metrics and update RMS every N steps (other rows hold nan there)
  std::size_t print_every;   // console progress every N steps
  bool tensorboard;          // also write metrics.csv's rows to a TensorBoard event file (train/tensorboard.h)
  std::size_t eval_every;    // held-out loss every N steps (0 = off); eval_loss column
  std::size_t eval_batches;  // batches per held-out evaluation
  // Evaluations at the end of training at other values of the task's seq_len / n_pairs: comma-separated whole
  // numbers ("" = none); summary.json's length_eval (train/length_eval.h)
  std::string eval_seq_len, eval_n_pairs;
  std::size_t threads;   // BLAS and xgrad's own loops (autograd/parallel.h)
  bool flush_denormals;  // flush subnormal floats to zero (see environment.h)
  std::string out;       // run directory
  // checkpoints and recovery (see trainer.h)
  std::size_t checkpoint_every;  // write out/checkpoint.safetensors every N steps (0: only at the end)
  OnNan on_nan;                  // non-finite loss or gradient: stop (exit 3) | skip (the step, and go on)
  std::string init_from;         // start from the weights of this safetensors file instead of the seed's
  /// Values of the components' own settings by key (n_keys, momentum, ...); a key the selected entry declares and
  /// this lacks takes the declared default (component_values in settings.h).
  SettingValues settings;
  // Not settings (no config.json key): how this invocation treats the run directory.
  bool overwrite = false;  // replace an existing run in `out`
  bool resume = false;     // continue the run in `out` from its checkpoint
  // false: a scheduler runs this on another machine (sweep --launcher slurm), so validate() does not hold --threads
  // against this machine's CPUs; the run checks it where it runs.
  bool threads_on_this_machine = true;
  /// The input files a run's config.json given to --config recorded ("inputs"), less those whose setting was given
  /// on the command line: a new run of that config must read the same bytes (check_recorded_inputs).
  std::vector<data::InputFile> recorded_inputs;
  std::string recorded_inputs_source;  // the config.json they come from, for messages

  /// The head size used: model.d_k, or model.d_model / model.n_heads when d_k is 0.
  std::size_t head_size() const { return model.d_k ? model.d_k : model.d_model / model.n_heads; }
  /// Throws ConfigError naming the first bad flag. Task settings are checked by building the task (reading its
  /// files), which is returned for the run to use, so that no file is read twice. Also refused: an estimated memory
  /// above kMaxMemoryGiB (naming the settings of the largest part), and more threads than the CPUs this process may
  /// use (platform::available_cpus) unless XGRAD_ALLOW_THREADS_ABOVE_CPUS=1 is in the environment, a text setting
  /// (--out, --text, ...) that is not UTF-8, and an --out with a name longer than kMaxFileNameBytes. Throws
  /// platform::AddressSpaceError when the address-space limit (ulimit -v) cannot hold the run
  /// (refuse_above_address_space).
  std::unique_ptr<data::Task> validate() const;
  /// The memory a run of these settings on `task` needs (its vocabulary, sequence length and data).
  MemoryEstimate estimate_memory(const data::Task& task) const;
  /// The same for a task of `vocab_size` tokens, sequences of `seq_len` with at most `targets` positions carrying a
  /// target (0: every position), and `data_bytes` of data held. `seq_len_from` (MemoryEstimate::seq_len_from): the
  /// flag and value that set seq_len when they are not the task's setting, "" otherwise.
  MemoryEstimate estimate_memory(std::size_t vocab_size, std::size_t seq_len, std::size_t data_bytes,
                                 std::size_t targets = 0, const std::string& seq_len_from = "") const;
  /// What MemoryTerm::what calls the task's data.
  static constexpr const char* kDataTerm = "the task's data";
  /// The longest name of one file or directory (NAME_MAX of Linux file systems), in bytes.
  static constexpr std::size_t kMaxFileNameBytes = 255;
  /// validate() rejects a configuration estimated above this.
  static constexpr double kMaxMemoryGiB = 12.0;
  /// The task these settings describe (data/registry.h); throws what the task's build throws.
  std::unique_ptr<data::Task> make_task() const;
  /// The settings as config.json holds them: every core setting and every setting of the selected components
  /// (defaults filled in), plus "config_version". Not resume or overwrite.
  nlohmann::json to_json() const;
  /// The configuration a config.json describes, of this release's format or the legacy one (canonical_config_json);
  /// settings `j` lacks keep their defaults. Throws ConfigError naming the key and `source` for a key that is not a
  /// setting, a value of the wrong type or out of its range. The records (is_record_key) are ignored.
  static TrainConfig from_json(const nlohmann::json& j, const std::string& source);

 private:
  // ConfigError when `memory` is above kMaxMemoryGiB, naming the settings of its largest part; `data_text` describes
  // the task's files when they are known only by their headers (TaskPlan::data_text). Then
  // refuse_above_address_space.
  void refuse_above_limit(const MemoryEstimate& memory, const std::string& data_text) const;
  // platform::AddressSpaceError (a runtime failure, exit 1) when the address-space limit (ulimit -v) cannot hold the
  // weights and optimizer state of `memory` (not its activation terms, an upper estimate often several times what a
  // run maps, nor the data, whose failed read names its file), the BLAS buffers and thread stacks of --threads
  // (platform::threads_address_space) and what the process has mapped: refused before the run allocates, instead of
  // failing or stalling part-way.
  void refuse_above_address_space(const MemoryEstimate& memory) const;
};

/// Throws ConfigError unless `requested` describes the same run as `stored` (the run directory's config.json): every
/// setting not declared resumable must be equal, and requested.steps >= stored.steps. The message names every
/// differing flag with both values, and what may change.
void check_same_run(const TrainConfig& stored, const TrainConfig& requested);

/// The to_json keys not declared resumable whose values differ between `a` and `b` (a setting given before what
/// follows from it: d_k and d_ff last); none if they describe the same run.
std::vector<std::string> differing_settings(const TrainConfig& a, const TrainConfig& b);

}  // namespace xgrad::train
