// What the task tests give the task registry: a task name and the settings it reads, as plain fields
// (data::make_task ignores the keys a task does not declare, so every field can be passed to every task).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "data/registry.h"

namespace xgrad::testing {

struct TaskOptions {
  std::string name = "kv_recall";
  std::size_t n_keys = 8, n_values = 8, n_pairs = 8, seq_len = 16, n_symbols = 8;
  std::string text_path, data_dir;
  std::size_t vocab_size = 0;
  bool shuffle = false;
};

/// data::make_task(o.name, the fields as settings).
inline std::unique_ptr<data::Task> make_task(const TaskOptions& o) {
  const nlohmann::json values{{"n_keys", o.n_keys},   {"n_values", o.n_values},     {"n_pairs", o.n_pairs},
                              {"seq_len", o.seq_len}, {"n_symbols", o.n_symbols},   {"text", o.text_path},
                              {"data", o.data_dir},   {"vocab_size", o.vocab_size}, {"shuffle", o.shuffle}};
  return data::make_task(o.name, SettingValues(values));
}

}  // namespace xgrad::testing
