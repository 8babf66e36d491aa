#include "data/char_lm.h"

#include <cmath>
#include <filesystem>
#include <utility>

#include "autograd/random.h"
#include "data/npy.h"
#include "data/registry.h"
#include "data/settings.h"

namespace xgrad::data {

namespace {
TaskEntry char_lm_entry() {
  TaskEntry e = task_entry("char_lm", "character-level language modelling: next-byte prediction on a text file", 70);
  e.vocab_size_from = "the 256 byte values";
  e.settings = {path_setting("text", "a UTF-8 text file (the last 10% is held out for eval_loss)"), seq_len_setting()};
  e.build = [](const SettingValues& v) -> std::unique_ptr<Task> {
    return std::make_unique<CharLM>(CharLMConfig{v.get<std::string>("text"), v.get<std::size_t>("seq_len")});
  };
  // The file's bytes are held whole: its size is known before reading it.
  e.plan = [](const SettingValues& v) {
    TaskPlan plan;
    plan.seq_len = v.get<std::size_t>("seq_len");
    plan.vocab_size = 256;
    const std::string path = v.get<std::string>("text");
    std::error_code ec;
    if (path.empty() || !std::filesystem::is_regular_file(path, ec)) return plan;  // the build says what is wrong
    const auto size = static_cast<std::size_t>(std::filesystem::file_size(path, ec));
    if (ec) return plan;
    plan.data_bytes = size;
    plan.data_text = path + " (" + gib_text(static_cast<double>(size)) + ")";
    return plan;
  };
  return e;
}
const Registration<TaskEntry> char_lm_registration{char_lm_entry()};
}  // namespace

namespace {

std::vector<std::uint8_t> read_file(const std::string& path, InputFile& fingerprint) {
  InputReader in(path, "text", "char_lm: --text file '" + path + "'");
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(in.size()));
  in.read(bytes.data(), bytes.size());
  fingerprint = in.finish();
  return bytes;
}

}  // namespace

CharLM::CharLM(CharLMConfig config) : config_(std::move(config)) {
  check_setting("char_lm", "seq_len", config_.seq_len, 1, kMaxSeqLen);
  if (config_.text_path.empty()) throw TaskError("char_lm: --text is required: name a UTF-8 text file (--text FILE)");
  bytes_ = read_file(config_.text_path, file_);
  const std::size_t size = bytes_.size(), window = config_.seq_len + 1;
  eval_begin_ = size - size / 10;
  const std::size_t train_size = eval_begin_, eval_size = size - eval_begin_;
  if (train_size < window || eval_size < window)
    throw TaskError("char_lm: --text file '" + config_.text_path + "' is too short for --seq-len " +
                    std::to_string(config_.seq_len) + ": it has " + std::to_string(size) + " bytes, split into " +
                    std::to_string(train_size) + " train and " + std::to_string(eval_size) +
                    " eval (the last 10%), and each split needs at least --seq-len + 1 = " + std::to_string(window) +
                    " bytes, so the file needs at least " + std::to_string(10 * window) + " bytes");
}

double CharLM::chance_loss() const { return std::log(256.0); }

Batch CharLM::make_batch(std::uint64_t seed, std::uint64_t index, std::size_t batch_size, Split split) const {
  const std::size_t T = config_.seq_len;
  const std::size_t begin = split == Split::train ? 0 : eval_begin_;
  const std::size_t end = split == Split::train ? eval_begin_ : bytes_.size();
  const std::size_t n_starts = end - begin - T;  // window starts begin .. end - (T + 1), inclusive
  Batch b;
  b.inputs = xt::xarray<std::int64_t>::from_shape({batch_size, T});
  b.targets = xt::xarray<std::int64_t>::from_shape({batch_size, T});
  Generator rng(seed, split_stream(0x636c /* "cl" */, split), index);
  for (std::size_t s = 0; s < batch_size; ++s) {
    const std::uint8_t* window = bytes_.data() + begin + rng.uniform(n_starts);
    std::int64_t* in = &b.inputs(s, 0);
    std::int64_t* target = &b.targets(s, 0);
    for (std::size_t t = 0; t < T; ++t) {
      in[t] = window[t];
      target[t] = window[t + 1];
    }
  }
  return b;
}

}  // namespace xgrad::data
