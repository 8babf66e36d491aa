// Settings shared by the symbol-sequence tasks, and the one range check every task reports its errors through.
#pragma once

#include <cstddef>
#include <string>

#include "common/setting.h"
#include "data/task.h"

namespace xgrad::data {

/// Settings of copy, reverse, sort, majority and induction. seq_len is T, the number of tokens the model sees.
/// The defaults live in the shared setting declarations below.
struct SymbolSequenceConfig {
  std::size_t seq_len;
  std::size_t n_symbols;  // the alphabet the random sequence is drawn from
};

/// Upper bounds that keep vocabularies and sequences within what a toy model can hold.
inline constexpr std::size_t kMaxSeqLen = 65536;
inline constexpr std::size_t kMaxSymbols = 4096;
/// Token ids of user data (--task data) must be below this: 2^24, far above any tokenizer's vocabulary.
inline constexpr std::size_t kMaxVocab = std::size_t(1) << 24;

/// The declarations of seq_len and n_symbols, shared by every task that reads them (one definition each).
inline Setting seq_len_setting() { return whole_setting("seq_len", 16, 2, kMaxSeqLen, "tokens per sequence, T"); }
inline Setting n_symbols_setting() {
  return whole_setting("n_symbols", 8, 2, kMaxSymbols, "alphabet size of the random sequences");
}
/// The declarations of the key-value recall tasks' settings (kv_recall, mqar), one each. n_pairs takes the task's
/// default (kv_recall 8, the default experiment's; mqar 4, which fits the shared default seq_len 16), and --help
/// names every owner's default where they differ (train/settings.cpp: component_settings).
inline Setting n_keys_setting() { return whole_setting("n_keys", 8, 1, kMaxSymbols, "distinct keys"); }
inline Setting n_values_setting() {
  return whole_setting("n_values", 8, 2, kMaxSymbols, "distinct values (answer classes)");
}
inline Setting n_pairs_setting(std::size_t default_value) {
  return whole_setting("n_pairs", default_value, 1, kMaxSymbols, "key-value pairs per sequence");
}
/// The settings of a symbol-sequence task, read from its resolved values.
inline SymbolSequenceConfig symbol_sequence_config(const SettingValues& values) {
  return SymbolSequenceConfig{values.get<std::size_t>("seq_len"), values.get<std::size_t>("n_symbols")};
}

/// A task whose sequences are seq_len symbols of an alphabet of n_symbols, which is its vocabulary (induction,
/// majority): what such a task reports of its SymbolSequenceConfig.
class SymbolSequenceTask : public Task {
 public:
  std::size_t vocab_size() const override { return config_.n_symbols; }
  std::size_t seq_len() const override { return config_.seq_len; }
  const SymbolSequenceConfig& config() const { return config_; }

 protected:
  explicit SymbolSequenceTask(SymbolSequenceConfig config) : config_(config) {}
  SymbolSequenceConfig config_;
};

/// Throws TaskError "<task>: <setting> must be in [min, max], got <value>" unless min <= value <= max.
inline void check_setting(const std::string& task, const std::string& setting, std::size_t value, std::size_t min,
                          std::size_t max) {
  if (value < min || value > max)
    throw TaskError(task + ": " + setting + " must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                    "], got " + std::to_string(value));
}

}  // namespace xgrad::data
