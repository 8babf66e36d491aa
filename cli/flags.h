// Command-line flags of the `xgrad` executable (CLI11 stays out of the libraries).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/sweep.h"
#include "cli/sweep_cluster.h"
#include "train/config.h"

namespace xgrad::cli {

/// A plain decimal whole number in [lo, hi]. CLI11 2.1 would turn "-1" into 2^64 - 1 for an unsigned flag; this
/// validator rejects it, and empty strings, naming the allowed range.
CLI::Validator whole_number(std::uint64_t lo, std::uint64_t hi);
/// A finite decimal number (no hex, no inf/nan, not empty).
CLI::Validator decimal_number();
/// true/false (also 1/0).
CLI::Validator boolean_word();
/// A finite decimal number in an interval, e.g. decimal_in(0, false, 1, true) for (0, 1]; the message names the
/// interval. Rejects nan and inf (CLI::Range lets nan through: every comparison with it is false).
CLI::Validator decimal_in(double lo, bool lo_closed, double hi, bool hi_closed);

/// A flag the command does not take because it sets the value itself (or never reads it), with the reason and what
/// to use instead. refuse_flags removes each flag that add_setting_flags registered and puts back a hidden option
/// that fails on any value with "<flag>: <reason>" (exit 2), listed in --help under "Not taken by this command" with
/// the reason, so a script that passes it learns why instead of "not expected".
struct RefusedFlag {
  std::string flag;    // "--lr"
  std::string reason;  // "sweep takes learning rates through --arms (e.g. --arms sgd@0.01,adamw@0.001)"
};
void refuse_flags(CLI::App& app, const std::vector<RefusedFlag>& flags);
/// The training flags `sweep` / `experiment` (command = its name) set per run: --lr, --optimizer, --seed, and the
/// data task's settings (its runs get no data directory).
std::vector<RefusedFlag> sweep_refused_flags(const std::string& command);
/// The training flags `probe` never reads: it builds the model and runs one forward batch, with no optimiser, no
/// steps and no logging (the core settings of `train` and `sweep` that probe's declarations leave out, and every
/// optimizer's settings); nor, as it measures none and sqrt_dk only, the other scalings' settings (`explain` reads
/// them).
std::vector<RefusedFlag> probe_refused_flags(const std::string& command);

/// Setting values given on a command line, in the order given, applied after parsing by apply_given_settings.
struct GivenSettings {
  std::vector<std::pair<std::string, nlohmann::json>> values;
  bool contains(const std::string& key) const;
};

/// One flag per declared setting the command takes (`command`: Setting::kTrain, kSweep or kProbe): the core
/// settings whose declaration names the command and every registered component's settings (a task's, an
/// optimizer's), each checked against its declaration when parsed (exit 2 naming the flag and the allowed values).
/// Path values are made absolute. The defaults shown are those of `shown`. A non-empty `no_data_task` (the command's
/// name) leaves `data` out of --task, with a message saying so: that command's runs get no data directory.
void add_setting_flags(CLI::App& app, unsigned command, GivenSettings& given, const train::TrainConfig& shown,
                       const std::string& no_data_task = "");
/// Applies `given` to `config`: the components (--task, --optimizer, ...) first, so that a setting given for the new
/// task is not dropped with the old task's settings. Throws ConfigError as set_setting does.
void apply_given_settings(train::TrainConfig& config, const GivenSettings& given);

/// Flags of `train` that are not settings: --overwrite, --resume DIR (into `resume_dir`), --config FILE.
void add_run_flags(CLI::App& app, train::TrainConfig& config, std::string& resume_dir, std::string& config_file);

/// A comma-separated list flag: every entry must pass `each`; an empty entry ("a,", ",a", "a,,b", "") is refused
/// naming the flag (CLI11's own delimiter drops them silently). Replaces `values` when given; the help shows them as
/// the default.
CLI::Option* add_list_flag_raw(CLI::App& app, const std::string& flag,
                               std::function<void(const std::vector<std::string>&)> store, const std::string& help,
                               const CLI::Validator& each);
template <class T>
CLI::Option* add_list_flag(CLI::App& app, const std::string& flag, std::vector<T>& values, const std::string& help,
                           const CLI::Validator& each) {
  const std::string defaults = CLI::detail::join(values, ",");
  auto store = [&values](const std::vector<std::string>& items) {
    values.clear();
    for (const std::string& item : items) {
      T v{};
      CLI::detail::lexical_cast(item, v);
      values.push_back(v);
    }
  };
  return add_list_flag_raw(app, flag, store, help, each)->default_str(defaults);
}
/// One --arms entry, optimizer@lr: the lr is checked like --lr (decimal, no hex, no spaces), then parse_arm.
CLI::Validator arm_entry();

/// A setting key whose values tell arms apart (Setting::Role::arm): compare's --compare.
CLI::Validator arm_setting_name();

/// The value of `flag DIR` (or `flag=DIR`) in argv for the `train` command, "" if absent: --resume and --config are
/// read before parsing so that the stored settings become the defaults the given flags override.
std::string find_train_flag_value(int argc, char** argv, const std::string& flag);

/// Reads a config.json-shaped file (any of its settings; the legacy format too) as a TrainConfig. A relative path
/// in it (--text, --data, --init-from) is taken relative to the file's directory, as a path written in a file is
/// meant; --out, the place the command writes, stays relative to the working directory. Throws ConfigError naming
/// `flag` and the file when it cannot be read or holds a bad setting.
train::TrainConfig read_config_file(const std::string& path, const std::string& flag);

/// The input files a run's config.json at `path` records ("inputs"), empty if it records none. Throws ConfigError
/// naming --config and the file when the record is not what xgrad writes.
std::vector<data::InputFile> recorded_input_files(const std::string& path);

/// Raw values of the list flags of `sweep` / `experiment`, turned into a SweepConfig by finish_sweep_flags.
struct SweepFlags {
  GivenSettings given;
  std::vector<std::string> scales, arms;
  std::vector<std::uint64_t> seeds;
  std::vector<std::size_t> d_ks;
  std::vector<std::string> grid;  // each "key=v1,v2,..."
};
/// Flags of `sweep` and `experiment`: the training flags plus --scale, --d-k, --seeds, --arms, --grid, --jobs,
/// --out; the defaults shown are those already in `config`.
void add_sweep_flags(CLI::App& app, SweepConfig& config, SweepFlags& flags);
/// Flags of `sweep` only: --launcher local|slurm and the Slurm launcher's --max-parallel, --partition, --time,
/// --cpus-per-task, --submit (into `slurm`).
void add_launcher_flags(CLI::App& app, std::string& launcher, SlurmOptions& slurm);
/// Refuses (ConfigError naming the flag) a Slurm launcher flag given with --launcher local, and --jobs with
/// --launcher slurm, which runs --max-parallel array tasks at a time instead.
void check_launcher_flags(const CLI::App& app, const std::string& launcher);
/// Copies the flags that were given into `config` (throws ConfigError on a bad --arms or --grid entry).
void finish_sweep_flags(const CLI::App& app, SweepConfig& config, const SweepFlags& flags);
/// One --grid entry "key=v1,v2,...": the key must be a declared setting that is not set per run by another flag
/// (--scale, --d-k, --seeds, --arms), each value must fit its declaration. Throws ConfigError naming --grid.
GridAxis parse_grid_axis(const std::string& text);
/// The default experiment: key-value recall (8 pairs), one block, d_model 64, d_k 16, 64, 256, scaled (sqrt_dk) and
/// unscaled, SGD at two learning rates and AdamW, seeds 0, 1, 2, one BLAS thread per run, one run per core.
SweepConfig experiment_defaults();

}  // namespace xgrad::cli
