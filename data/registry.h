// One place that turns a task name and its settings into a Task, for the trainer and the CLI.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/task.h"

namespace xgrad::data {

/// Every task's settings in one plain struct; each task reads only its own fields.
struct TaskOptions {
  std::string name = "kv_recall";  // one of task_names()
  // kv_recall
  std::size_t n_keys = 16;
  std::size_t n_values = 16;
  std::size_t n_pairs = 8;
  // copy, reverse, sort, majority, induction, char_lm: T, the number of tokens the model sees
  std::size_t seq_len = 16;
  // copy, reverse, sort, majority, induction: the alphabet of the random sequences
  std::size_t n_symbols = 8;
  // char_lm: the text file to model
  std::string text_path;
  // data: the directory of token arrays (see token_arrays.h), the vocabulary size (0: max id + 1), shuffling
  std::string data_dir;
  std::size_t vocab_size = 0;
  bool shuffle = false;
};

/// The task names make_task accepts: kv_recall, copy, reverse, sort, majority, induction, char_lm, data.
const std::vector<std::string>& task_names();

/// Builds the task options.name names. Throws TaskError for an unknown name (the message lists the allowed ones), for
/// a setting outside its range (the message names the setting and the range), for char_lm, for a missing,
/// unreadable or too short text file (the message names the path), and for data, for missing or malformed
/// token arrays (the message names the file).
std::unique_ptr<Task> make_task(const TaskOptions& options);

}  // namespace xgrad::data
