// The task registry: every task registers itself from its own file with its settings (common/registry.h), so the
// CLI's --task choices, its task flags, config.json and sweeps all come from the entries. No list of task names
// exists elsewhere.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/registry.h"
#include "common/setting.h"
#include "data/settings.h"
#include "data/task.h"

namespace xgrad::data {

/// What a task that reads files will hold, known from its settings, the files' sizes and headers before their data
/// is read (TaskEntry::plan).
struct TaskPlan {
  std::size_t data_bytes = 0;  ///< bytes the built task will hold (its data_bytes())
  std::size_t seq_len = 0;     ///< T if the headers or settings give it, else 0
  std::size_t vocab_size = 0;  ///< the vocabulary if the settings give it, else 0 (known only from the data)
  std::string data_text;       ///< the files and their sizes, for messages: "/d/inputs.npy [N, T] int32 (28.0 GiB)"
};

struct TaskEntry {
  static constexpr const char* kind = "task";
  std::string name;         ///< what --task takes
  std::string description;  ///< one line: what the model must learn
  int order = 0;            ///< place in listings
  /// The task's own settings (flags and config.json keys). A key used by several tasks (seq_len, n_symbols) has one
  /// declaration they share (data/settings.h).
  std::vector<Setting> settings;
  /// What sets the task's sequence length T and vocabulary V, for messages that name them ("--n-pairs",
  /// "--n-keys and --n-values", "the arrays in --data"); empty where a setting named seq_len / vocab_size does.
  std::string seq_len_from, vocab_size_from;
  /// Builds the task from its settings (every declared key present). Throws TaskError for values it cannot use
  /// (naming the setting) and for unreadable inputs (naming the file).
  std::function<std::unique_ptr<Task>(const SettingValues&)> build;
  /// Optional, for a task that reads files: its plan from the settings and the files' headers alone, so that a
  /// run that cannot hold the data is refused before any of it is read. Throws TaskError as build would for what
  /// it finds wrong (a missing file, a malformed header, a sequence length out of range).
  std::function<TaskPlan(const SettingValues&)> plan;
};

using TaskRegistry = Registry<TaskEntry>;

/// An entry with its name (what --task takes), description (one line: what the model must learn) and order (its
/// place in listings); the caller fills in the rest.
inline TaskEntry task_entry(std::string name, std::string description, int order) {
  TaskEntry e;
  e.name = std::move(name);
  e.description = std::move(description);
  e.order = order;
  return e;
}

/// The entry of a task on sequences of symbols, built as TaskT(symbol_sequence_config(settings)): settings seq_len
/// and n_symbols, vocabulary set by --n-symbols (copy, reverse, sort, induction, majority).
template <class TaskT>
TaskEntry symbol_sequence_task(std::string name, std::string description, int order) {
  TaskEntry e = task_entry(std::move(name), std::move(description), order);
  e.settings = {seq_len_setting(), n_symbols_setting()};
  e.vocab_size_from = "--n-symbols";
  e.build = [](const SettingValues& v) -> std::unique_ptr<Task> {
    return std::make_unique<TaskT>(symbol_sequence_config(v));
  };
  return e;
}

/// Builds the task `name` with `given` settings over the entry's defaults (keys the task does not declare are
/// ignored). Throws TaskError for an unknown name ("task 'x' is unknown (allowed: ...)") and whatever the entry's
/// build throws.
std::unique_ptr<Task> make_task(const std::string& name, const SettingValues& given = SettingValues());

}  // namespace xgrad::data
