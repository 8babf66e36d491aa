#include "data/token_arrays.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>

#include "autograd/random.h"
#include "data/settings.h"

namespace xgrad::data {

namespace {
TaskEntry data_entry() {
  TaskEntry e = task_entry("data", "user token arrays: inputs.npy and targets.npy of a directory, read in order", 80);
  e.seq_len_from = "the arrays in --data";
  e.vocab_size_from = "the ids in --data, or --vocab-size";
  e.settings = {path_setting("data",
                             "directory of inputs.npy and targets.npy (int32/int64 [N, T]; target -1 = "
                             "no loss), optionally eval_inputs.npy and eval_targets.npy"),
                whole_setting("vocab_size", 0, 0, kMaxVocab, "vocabulary size (0 = max token id + 1)"),
                boolean_setting("shuffle", false, "read the rows in a seeded random order, a new one each epoch")};
  auto config = [](const SettingValues& v) {
    return TokenArraysConfig{v.get<std::string>("data"), v.get<std::size_t>("vocab_size"), v.get<bool>("shuffle")};
  };
  e.build = [config](const SettingValues& v) -> std::unique_ptr<Task> {
    return std::make_unique<TokenArrays>(config(v));
  };
  e.plan = [config](const SettingValues& v) { return TokenArrays::plan(config(v)); };
  return e;
}
const Registration<TaskEntry> token_arrays_registration{data_entry()};
}  // namespace

namespace {

constexpr std::uint64_t kShuffleStream = 0x6474;  // "dt"

std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

TokenArraysSplit read_split(const std::filesystem::path& dir, const std::string& prefix,
                            std::vector<InputFile>& files) {
  TokenArraysSplit split;
  files.emplace_back();
  split.inputs = read_npy((dir / (prefix + "inputs.npy")).string(), "data", &files.back());
  files.emplace_back();
  split.targets = read_npy((dir / (prefix + "targets.npy")).string(), "data", &files.back());
  return split;
}

// Calls f with the elements of `a` as a pointer of their own type (int32 or int64).
template <class F>
decltype(auto) with_elements(const NpyArray& a, F&& f) {
  return a.int32_values.empty() ? f(a.int64_values.data()) : f(a.int32_values.data());
}

// The checks of one split's ids: inputs >= 0, targets >= -1. Returns the largest id and whether any target is set.
template <class In, class Target>
std::pair<std::int64_t, bool> scan_ids(const In* inputs, const Target* targets, std::size_t N, std::size_t T,
                                       const std::string& in_name, const std::string& target_name) {
  std::int64_t max_id = -1;
  bool any_target = false;
  for (std::size_t i = 0; i < N * T; ++i) {
    const std::int64_t x = inputs[i], y = targets[i];
    // The common case first and branch-light: a bad id is found again below, with its place.
    max_id = std::max({max_id, x, y});
    any_target = any_target || y >= 0;
    if (x < 0 || y < -1) {
      const std::string where = " (row " + std::to_string(i / T) + ", position " + std::to_string(i % T) + ")";
      if (x < 0)
        throw TaskError("data: " + in_name + " holds token id " + std::to_string(x) + where + "; ids must be >= 0");
      throw TaskError("data: " + target_name + " holds " + std::to_string(y) + where +
                      "; targets must be >= 0, or -1 for no loss");
    }
  }
  return {max_id, any_target};
}

}  // namespace

TaskPlan TokenArrays::plan(const TokenArraysConfig& config) {
  namespace fs = std::filesystem;
  TaskPlan plan;
  plan.vocab_size = config.vocab_size;
  std::error_code ec;
  if (config.dir.empty() || !fs::is_directory(config.dir, ec)) return plan;  // the build says what is wrong
  const fs::path dir(config.dir);
  std::vector<std::string> files{"inputs.npy", "targets.npy"};
  if (fs::exists(dir / "eval_inputs.npy", ec) && fs::exists(dir / "eval_targets.npy", ec))
    files.insert(files.end(), {"eval_inputs.npy", "eval_targets.npy"});
  for (const std::string& file : files) {
    const std::string path = (dir / file).string();
    const NpyHeader header = read_npy_header(path);
    if (header.shape.size() == 2) {
      check_setting("data", path + " sequence length T", header.shape[1], 1, kMaxSeqLen);
      plan.seq_len = header.shape[1];
      if (file == "inputs.npy" && config.shuffle) plan.data_bytes += header.shape[0] * sizeof(std::size_t);
    }
    plan.data_bytes += header.bytes();
    plan.data_text += (plan.data_text.empty() ? "" : ", ") + path + " " + npy_text(header.shape, header.descr) + " (" +
                      gib_text(static_cast<double>(header.bytes())) + ")";
  }
  return plan;
}

TokenArrays::TokenArrays(TokenArraysConfig config) : config_(std::move(config)) {
  namespace fs = std::filesystem;
  if (config_.dir.empty()) throw TaskError("data: no directory given (--data DIR with inputs.npy and targets.npy)");
  std::error_code ec;
  if (!fs::is_directory(config_.dir, ec)) throw TaskError("data: '" + config_.dir + "' is not a directory");
  const fs::path dir(config_.dir);
  train_ = read_split(dir, "", files_);
  const bool has_eval_inputs = fs::exists(dir / "eval_inputs.npy", ec),
             has_eval_targets = fs::exists(dir / "eval_targets.npy", ec);
  if (has_eval_inputs != has_eval_targets)
    throw TaskError("data: " + config_.dir +
                    " has only one of eval_inputs.npy and eval_targets.npy (give both or neither)");
  if (has_eval_inputs) eval_ = read_split(dir, "eval_", files_);
  check(config_.dir + "/");
}

TokenArrays::TokenArrays(TokenArraysConfig config, TokenArraysSplit train, TokenArraysSplit eval,
                         const std::string& source)
    : config_(std::move(config)), train_(std::move(train)), eval_(std::move(eval)) {
  check(source);
}

void TokenArrays::check(const std::string& source) {
  std::int64_t max_id = -1;
  auto check_split = [&](const TokenArraysSplit& split, const std::string& prefix) {
    const std::string in_name = source + prefix + "inputs.npy", target_name = source + prefix + "targets.npy";
    if (split.inputs.shape.size() != 2)
      throw TaskError("data: " + in_name + " has shape " + shape_text(split.inputs.shape) + ", expected [N, T]");
    if (split.targets.shape != split.inputs.shape)
      throw TaskError("data: " + target_name + " has shape " + shape_text(split.targets.shape) + ", but " + in_name +
                      " has " + shape_text(split.inputs.shape) + " (they must match)");
    const std::size_t N = split.inputs.shape[0], T = split.inputs.shape[1];
    if (N == 0) throw TaskError("data: " + in_name + " has no rows");
    check_setting("data", in_name + " sequence length T", T, 1, kMaxSeqLen);
    if (seq_len_ != 0 && T != seq_len_)
      throw TaskError("data: " + in_name + " has sequences of " + std::to_string(T) + " tokens, the training split " +
                      std::to_string(seq_len_) + " (they must match)");
    seq_len_ = T;
    const auto [split_max, any_target] = with_elements(split.inputs, [&](const auto* inputs) {
      return with_elements(split.targets,
                           [&](const auto* targets) { return scan_ids(inputs, targets, N, T, in_name, target_name); });
    });
    max_id = std::max(max_id, split_max);
    if (prefix.empty() && !any_target)
      throw TaskError("data: every target in " + target_name + " is -1: there is nothing to learn");
  };
  check_split(train_, "");
  if (has_eval_split()) check_split(eval_, "eval_");
  // Before any arithmetic on it: an id near 2^63 would overflow max_id + 1 (found by fuzz_token_arrays).
  if (static_cast<std::uint64_t>(max_id) >= kMaxVocab)
    throw TaskError("data: the files hold token id " + std::to_string(max_id) + "; ids must be below " +
                    std::to_string(kMaxVocab) + " (2^24)");
  if (config_.vocab_size == 0) {
    vocab_size_ = static_cast<std::size_t>(max_id) + 1;
  } else {
    if (static_cast<std::uint64_t>(max_id) >= config_.vocab_size)
      throw TaskError("data: the files hold token id " + std::to_string(max_id) + ", not below vocab_size " +
                      std::to_string(config_.vocab_size) +
                      " (leave --vocab-size out to use max id + 1 = " + std::to_string(max_id + 1) + ")");
    vocab_size_ = config_.vocab_size;
  }
  if (vocab_size_ < 2)
    throw TaskError("data: the vocabulary has " + std::to_string(vocab_size_) + " token (needs 2 or more)");
}

std::size_t TokenArrays::data_bytes() const {
  return train_.inputs.bytes() + train_.targets.bytes() + eval_.inputs.bytes() + eval_.targets.bytes() +
         (config_.shuffle ? rows() * sizeof(std::size_t) : 0);  // the permutation of an epoch
}

double TokenArrays::chance_loss() const { return std::log(static_cast<double>(vocab_size_)); }

std::size_t TokenArrays::shuffled_row(std::uint64_t seed, std::uint64_t epoch, std::size_t r) const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (!cache_valid_ || cached_seed_ != seed || cached_epoch_ != epoch) {
    const std::size_t n = rows();
    permutation_.resize(n);
    for (std::size_t i = 0; i < n; ++i) permutation_[i] = i;
    Generator rng(seed, kShuffleStream, epoch);
    for (std::size_t i = n; i > 1; --i) std::swap(permutation_[i - 1], permutation_[rng.uniform(i)]);
    cached_seed_ = seed;
    cached_epoch_ = epoch;
    cache_valid_ = true;
  }
  return permutation_[r];
}

Batch TokenArrays::make_batch(std::uint64_t seed, std::uint64_t index, std::size_t batch_size, Split split) const {
  if (split == Split::eval && !has_eval_split())
    throw TaskError("data: no held-out split (add eval_inputs.npy and eval_targets.npy to " + config_.dir + ")");
  const TokenArraysSplit& s = split == Split::train ? train_ : eval_;
  const std::size_t N = s.inputs.shape[0], T = seq_len_;
  const bool shuffle = config_.shuffle && split == Split::train;
  Batch b;
  b.inputs = xt::xarray<std::int64_t>::from_shape({batch_size, T});
  b.targets = xt::xarray<std::int64_t>::from_shape({batch_size, T});
  for (std::size_t k = 0; k < batch_size; ++k) {
    // 128 bits: index * batch_size overflows 64 bits for the largest indices a caller may pass.
    const unsigned __int128 position = static_cast<unsigned __int128>(index) * batch_size + k;
    const auto r = static_cast<std::size_t>(position % N);
    const auto epoch = static_cast<std::uint64_t>(position / N);
    const std::size_t row = shuffle ? shuffled_row(seed, epoch, r) : r;
    with_elements(s.inputs, [&](const auto* v) { std::copy_n(v + row * T, T, &b.inputs(k, 0)); });
    with_elements(s.targets, [&](const auto* v) { std::copy_n(v + row * T, T, &b.targets(k, 0)); });
  }
  return b;
}

}  // namespace xgrad::data
