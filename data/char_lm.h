// Character-level language modelling on a text file: next-byte prediction over random windows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/task.h"

namespace xgrad::data {

struct CharLMConfig {
  std::string text_path;  // any file; UTF-8 text is modelled byte by byte, multi-byte characters included
  std::size_t seq_len;    // T (default: the shared seq_len declaration, data/settings.h)
};

/// The tokens are the file's bytes (vocabulary 256, token = byte value 0..255, no UTF-8 decoding). The file is split
/// once: the first size - floor(size / 10) bytes are the train split and the last floor(size / 10) bytes the held-out
/// eval split. Batch `index` of a split is batch_size windows of T + 1 consecutive bytes, each starting at a position
/// drawn uniformly (generator from (seed, index), one stream per split) among those whose window lies wholly inside
/// the split; inputs = window[0 .. T), targets = window[1 .. T]. The loss is taken at every position.
/// Chance loss: ln(256).
class CharLM : public Task {
 public:
  /// Reads the whole file, once, in bulk (hashing it on the way, input_files()). Throws TaskError naming the path if
  /// text_path is empty, the file is missing or cannot be read, or either split holds fewer than seq_len + 1 bytes; and
  /// unless seq_len is in [1, 65536].
  explicit CharLM(CharLMConfig config);
  std::string name() const override { return "char_lm"; }
  std::size_t vocab_size() const override { return 256; }
  std::size_t seq_len() const override { return config_.seq_len; }
  double chance_loss() const override;
  std::size_t data_bytes() const override { return bytes_.size(); }
  std::vector<InputFile> input_files() const override { return {file_}; }
  const CharLMConfig& config() const { return config_; }
  /// Byte offset where the eval split begins; the train split is [0, eval_begin()), the eval split the rest.
  std::size_t eval_begin() const { return eval_begin_; }
  const std::vector<std::uint8_t>& bytes() const { return bytes_; }

 private:
  Batch make_batch(std::uint64_t seed, std::uint64_t index, std::size_t batch_size, Split split) const override;
  CharLMConfig config_;
  std::vector<std::uint8_t> bytes_;
  InputFile file_;
  std::size_t eval_begin_ = 0;
};

}  // namespace xgrad::data
