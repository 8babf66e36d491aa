#include "train/sample.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <stdexcept>

#include "common/escape.h"
#include "train/config.h"
#include "train/json_file.h"
#include "train/run_checkpoint.h"
#include "train/run_files.h"
#include "train/settings.h"
#include "train/trainer.h"

namespace xgrad::train {

namespace fs = std::filesystem;

namespace {

// The vocabulary of char_lm, the one task sample takes: its tokens are bytes.
constexpr std::size_t kByteVocabulary = 256;

// The generator stream of the draws ("sample"), apart from the init and data streams of the same seed.
constexpr std::uint64_t kSampleStream = 0x73616d706c65;

// The run's config.json, parsed. Throws ConfigError naming RUN_DIR and the file.
nlohmann::json read_run_config(const fs::path& dir) {
  const fs::path path = dir / kConfigFile;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw ConfigError("RUN_DIR: no " + std::string(kConfigFile) + " in '" + dir.string() +
                      "' (give the --out directory of an xgrad train run)");
  try {
    return read_json_file(path);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError("RUN_DIR: " + path.string() + " is not valid JSON: " + e.what());
  }
}

// A size the run recorded under "derived" (vocab_size, seq_len), which must be `expected` (`why` says why): checked
// before a model of that size is built, so that an edited or damaged file is named, not an allocation of terabytes
// attempted. Throws ConfigError naming the file and key.
std::size_t derived_size(const nlohmann::json& config, const std::string& key, const fs::path& path,
                         std::size_t expected, const std::string& why) {
  const auto derived = config.find("derived");
  if (derived == config.end() || !derived->is_object() || !derived->contains(key))
    throw ConfigError("RUN_DIR: " + path.string() + " records no derived." + key +
                      " (not a config.json xgrad train wrote)");
  const nlohmann::json& value = derived->at(key);
  if (!value.is_number_unsigned() || value.get<std::size_t>() != expected)
    throw ConfigError("RUN_DIR: " + path.string() + ": 'derived." + key + "' holds " + value.dump() +
                      ", which is not " + std::to_string(expected) + " (" + why + ")");
  return expected;
}

// The run's settings, refused unless a char_lm run of a causal model.
TrainConfig sampling_config(const nlohmann::json& json, const fs::path& path) {
  const TrainConfig cfg = TrainConfig::from_json(json, path.string());
  if (cfg.task != "char_lm")
    throw ConfigError("RUN_DIR: the run's task is " + cfg.task +
                      "; xgrad sample generates text from char_lm runs only (their tokens are bytes)");
  if (!cfg.model.causal)
    throw ConfigError(
        "RUN_DIR: the run's model is not causal (--causal false): its positions attend to later ones, "
        "so it cannot generate left to right");
  return cfg;
}

// The run's checkpoint, read whole (it holds the weights the model is about to take, so it is no larger than the
// model). Throws ConfigError naming RUN_DIR and the file.
nn::Checkpoint read_run_checkpoint(const fs::path& dir) {
  const fs::path path = dir / kCheckpointFile;
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw ConfigError("RUN_DIR: no " + std::string(kCheckpointFile) + " in '" + dir.string() +
                      "' (the run has not written a checkpoint yet)");
  try {
    return nn::load_checkpoint(path.string());
  } catch (const nn::CheckpointError& e) {
    throw ConfigError(std::string("RUN_DIR: ") + e.what());
  }
}

// The sizes config.json gives against the tensors of the checkpoint, before a model of those sizes is built: an
// edited config.json (or one of another run) would otherwise allocate the model it describes, gigabytes for a
// checkpoint of kilobytes, and fail as out of memory naming training flags. Checks the tensors every model of the
// built-in layers has; a tensor the checkpoint lacks is left to load_model_weights, which names it.
class ShapeCheck {
 public:
  ShapeCheck(const nn::Checkpoint& c, const fs::path& config_path, const fs::path& checkpoint_path)
      : checkpoint_(c), config_path_(config_path), checkpoint_path_(checkpoint_path) {
    for (const auto& [name, value] : c.tensors)
      if (name.rfind("model.", 0) == 0) prefix_ = "model.";  // a run checkpoint (with optimizer state)
  }

  // The dimension `dim` of tensor `name` (without the prefix) is `expected`, the size config.json's `key` implies.
  void dimension(const std::string& name, std::size_t dim, std::size_t expected, const std::string& key) const {
    const xt::xarray<float>* value = checkpoint_.find(prefix_ + name);
    if (!value) return;
    if (value->dimension() <= dim || value->shape()[dim] != expected)
      throw mismatch(key, std::to_string(expected),
                     prefix_ + name + " of shape " + shape_str(shape_t(value->shape().begin(), value->shape().end())));
  }

  // config.json's n_layers is the number of blocks the checkpoint holds.
  void blocks(std::size_t n_layers) const {
    std::size_t count = 0;
    const std::string stem = prefix_ + "blocks.";
    for (const auto& [name, value] : checkpoint_.tensors) {
      if (name.rfind(stem, 0) != 0) continue;
      std::size_t index = 0;
      // At most 9 digits: no overflow, and far above any n_layers config.json may give.
      for (std::size_t i = stem.size();
           i < name.size() && i < stem.size() + 9 && std::isdigit(static_cast<unsigned char>(name[i])); ++i)
        index = index * 10 + static_cast<std::size_t>(name[i] - '0');
      count = std::max(count, index + 1);
    }
    if (count != n_layers) throw mismatch("n_layers", std::to_string(n_layers), std::to_string(count) + " blocks");
  }

  // config.json's `key` says the blocks have an MLP: the checkpoint has its first weight.
  void has(const std::string& name, const std::string& key) const {
    if (!checkpoint_.find(prefix_ + name)) throw mismatch(key, "true", "no tensor " + prefix_ + name);
  }

 private:
  ConfigError mismatch(const std::string& key, const std::string& value, const std::string& found) const {
    return ConfigError("RUN_DIR: " + config_path_.string() + ": '" + key + "' gives " + value + ", but " +
                       checkpoint_path_.string() + " holds " + found +
                       " (config.json is edited or not this checkpoint's run)");
  }

  const nn::Checkpoint& checkpoint_;
  const fs::path config_path_, checkpoint_path_;
  std::string prefix_;
};

void check_checkpoint_shapes(const nn::Checkpoint& c, const nn::ModelConfig& mc, const fs::path& dir) {
  const ShapeCheck check(c, dir / kConfigFile, dir / kCheckpointFile);
  check.dimension("tok_emb.weight", 1, mc.d_model, "d_model");
  check.dimension("pos_emb.weight", 1, mc.d_model, "d_model");
  check.blocks(mc.n_layers);
  const std::size_t head_size = mc.d_k ? mc.d_k : mc.d_model / std::max<std::size_t>(mc.n_heads, 1);
  // Another attention layer (a user's) may shape its projections otherwise.
  if (mc.attention == "multi_head")
    check.dimension("blocks.0.attn.w_q.weight", 1, mc.n_heads * head_size, mc.d_k ? "n_heads' x 'd_k" : "n_heads");
  if (!mc.mlp) return;
  check.has("blocks.0.mlp.fc_in.weight", "mlp");
  check.dimension("blocks.0.mlp.fc_in.weight", 1, mc.d_ff ? mc.d_ff : 4 * mc.d_model, "d_ff");
}

// Indices of `logits` from the largest down (a tie: the lower index first), the first `k` of them.
std::vector<std::size_t> largest(const std::vector<float>& logits, std::size_t k) {
  std::vector<std::size_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(
      order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
      [&](std::size_t a, std::size_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  order.resize(k);
  return order;
}

}  // namespace

std::unique_ptr<nn::AttentionModel> load_sampling_model(const std::string& run_dir) {
  const fs::path dir(run_dir), path = dir / kConfigFile;
  const nlohmann::json json = read_run_config(dir);
  const TrainConfig cfg = sampling_config(json, path);
  const std::size_t seq_len = get_setting(cfg, "seq_len").get<std::size_t>();
  const nn::ModelConfig mc =
      model_config(cfg, derived_size(json, "vocab_size", path, kByteVocabulary, "char_lm's tokens are bytes"),
                   derived_size(json, "seq_len", path, seq_len, "the run's seq_len"));
  const nn::Checkpoint checkpoint = read_run_checkpoint(dir);
  check_checkpoint_shapes(checkpoint, mc, dir);
  auto model = std::make_unique<nn::AttentionModel>(mc, cfg.seed);
  try {
    load_model_weights(checkpoint, (dir / kCheckpointFile).string(), *model);
  } catch (const nn::CheckpointError& e) {
    throw ConfigError(std::string("RUN_DIR: ") + e.what());
  }
  model->eval();
  return model;
}

void check_sample_options(const SampleOptions& options, const nn::AttentionModel& model) {
  if (options.tokens == 0 || options.tokens > kMaxSampleTokens)
    throw ConfigError("--tokens: must be in [1, " + std::to_string(kMaxSampleTokens) + "], got " +
                      std::to_string(options.tokens));
  if (!(options.temperature >= 0) || !std::isfinite(options.temperature))
    throw ConfigError("--temperature: must be finite and >= 0 (0: greedy), got " + std::to_string(options.temperature));
  const std::size_t vocab = model.config().vocab_size;
  if (options.top_k > vocab)
    throw ConfigError("--top-k: must be in [1, " + std::to_string(vocab) + "] (the vocabulary), got " +
                      std::to_string(options.top_k));
}

std::vector<float> next_logits(nn::AttentionModel& model, const std::vector<std::int64_t>& sequence,
                               nn::KvCache* cache) {
  NoGradGuard no_grad;
  const std::size_t context = model.config().max_seq_len;
  Tensor logits;  // [1, n, vocab] or [1, vocab]
  if (cache && sequence.size() <= context) {
    const std::size_t past = cache->length(), n = sequence.size() - past;
    index_array tokens = index_array::from_shape({1, n});
    std::copy(sequence.begin() + static_cast<std::ptrdiff_t>(past), sequence.end(), tokens.data());
    logits = model.forward_step(tokens, *cache);
  } else {
    if (cache) cache->clear();
    const std::size_t window = std::min(context, sequence.size());
    index_array tokens = index_array::from_shape({1, window});
    std::copy(sequence.end() - static_cast<std::ptrdiff_t>(window), sequence.end(), tokens.data());
    index_array last = index_array::from_shape({1});
    last(0) = static_cast<std::int64_t>(window - 1);
    logits = model.forward(tokens, last);  // the last block computes the last position's row only
  }
  const std::size_t vocab = model.config().vocab_size;
  const float* last = logits.value().data() + logits.value().size() - vocab;
  return std::vector<float>(last, last + vocab);
}

std::int64_t choose_token(const std::vector<float>& logits, const SampleOptions& options, Generator& gen) {
  for (const float l : logits)
    if (!std::isfinite(l))
      throw std::runtime_error("sample: the model's logits are not finite (the checkpoint of a diverged run?)");
  if (options.temperature == 0) return static_cast<std::int64_t>(largest(logits, 1).front());
  const std::vector<std::size_t> kept = largest(logits, options.top_k ? options.top_k : logits.size());
  // softmax((l - l_max) / T) over the kept logits, in double; the draw walks the cumulative sum.
  std::vector<double> weights(kept.size());
  double total = 0;
  for (std::size_t i = 0; i < kept.size(); ++i)
    total += weights[i] = std::exp((static_cast<double>(logits[kept[i]]) - logits[kept[0]]) / options.temperature);
  double u = gen.uniform01() * total;
  for (std::size_t i = 0; i < kept.size(); ++i) {
    if (u < weights[i]) return static_cast<std::int64_t>(kept[i]);
    u -= weights[i];
  }
  return static_cast<std::int64_t>(kept.back());  // u ran past the sum by rounding
}

std::vector<std::int64_t> generate(nn::AttentionModel& model, const std::vector<std::int64_t>& prompt,
                                   const SampleOptions& options, bool use_cache) {
  if (prompt.empty()) throw std::invalid_argument("generate: the prompt must hold at least one token");
  model.eval();
  Generator gen(options.seed, kSampleStream);
  nn::KvCache cache;
  std::vector<std::int64_t> sequence = prompt;
  for (std::size_t i = 0; i < options.tokens; ++i)
    sequence.push_back(choose_token(next_logits(model, sequence, use_cache ? &cache : nullptr), options, gen));
  return std::vector<std::int64_t>(sequence.begin() + static_cast<std::ptrdiff_t>(prompt.size()), sequence.end());
}

std::string sample_text(nn::AttentionModel& model, const SampleOptions& options) {
  const std::string prompt = options.prompt.empty() ? "\n" : options.prompt;
  std::vector<std::int64_t> tokens;
  for (const char ch : prompt) tokens.push_back(static_cast<unsigned char>(ch));
  std::string text = prompt;
  for (const std::int64_t token : generate(model, tokens, options)) text += static_cast<char>(token);
  return escape_invalid_utf8(text);
}

}  // namespace xgrad::train
