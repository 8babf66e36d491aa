#include "data/registry.h"

#include "data/char_lm.h"
#include "data/induction.h"
#include "data/kv_recall.h"
#include "data/majority.h"
#include "data/sequence_transform.h"
#include "data/token_arrays.h"

namespace xgrad::data {

const std::vector<std::string>& task_names() {
  static const std::vector<std::string> names{"kv_recall", "copy", "reverse", "sort", "majority", "induction",
                                              "char_lm", "data"};
  return names;
}

std::unique_ptr<Task> make_task(const TaskOptions& options) {
  const std::string& name = options.name;
  const SymbolSequenceConfig symbols{options.seq_len, options.n_symbols};
  if (name == "kv_recall")
    return std::make_unique<KeyValueRecall>(KeyValueRecallConfig{options.n_keys, options.n_values, options.n_pairs});
  if (name == "copy") return std::make_unique<CopySequence>(symbols);
  if (name == "reverse") return std::make_unique<ReverseSequence>(symbols);
  if (name == "sort") return std::make_unique<SortSequence>(symbols);
  if (name == "majority") return std::make_unique<Majority>(symbols);
  if (name == "induction") return std::make_unique<InductionHeads>(symbols);
  if (name == "char_lm") return std::make_unique<CharLM>(CharLMConfig{options.text_path, options.seq_len});
  if (name == "data")
    return std::make_unique<TokenArrays>(TokenArraysConfig{options.data_dir, options.vocab_size, options.shuffle});
  std::string allowed;
  for (const std::string& n : task_names()) allowed += (allowed.empty() ? "" : ", ") + n;
  throw TaskError("task '" + name + "' is unknown (allowed: " + allowed + ")");
}

}  // namespace xgrad::data
