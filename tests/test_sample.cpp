// Generation from a trained model (train/sample.h, `xgrad sample`): incremental decoding with a key-value cache
// (AttentionModel::forward_step) against recomputing the whole window, before and past the context length, for every
// registered scaling and for an attention layer without a cache of its own; greedy and seeded sampling; top-k; the
// bytes shown as UTF-8 or escaped; the command on a tiny char_lm run.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/escape.h"
#include "common/registry.h"
#include "nn/attention.h"
#include "nn/model.h"
#include "nn/scaling.h"
#include "tests/support/biased_scaling.h"
#include "tests/support/model_config.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_run.h"
#include "train/sample.h"
#include "train/trainer.h"

using namespace xgrad;
using namespace xgrad::testing;
namespace fs = std::filesystem;

namespace {

// Cached and recomputed logits differ only in the order of float sums: the projections and q·k of n new rows are
// GEMMs of other shapes than those of the whole window, and each BLAS kernel blocks its sums by shape. Relative to
// the largest logit, as tests/test_readout.cpp holds rows computed at selected positions to the full forward: 1e-5
// is about 170 float32 ulps, a few hundred terms' worth of reordering through two blocks.
constexpr double kCachedRelTol = 1e-5;

// An attention layer that keeps no cache (a user's layer written before forward_step existed): forward only, so
// AttentionModel::forward_step goes through AttentionLayer's default, which recomputes the window.
class UncachedAttention : public nn::AttentionLayer {
 public:
  UncachedAttention(const nn::AttentionLayerContext& c, Generator& gen)
      : inner_(register_module("inner", std::make_shared<nn::MultiHeadAttention>(c.d_model, c.n_heads, c.scale,
                                                                                 c.causal, gen, c.max_seq_len))) {}
  Tensor forward(const Tensor& x) override { return inner_->forward(x); }
  std::size_t n_heads() const override { return inner_->n_heads(); }
  double effective_multiplier(std::size_t T) const override { return inner_->effective_multiplier(T); }

 private:
  std::shared_ptr<nn::MultiHeadAttention> inner_;
};

nn::AttentionLayerEntry uncached_entry() {
  nn::AttentionLayerEntry e;
  e.name = "test_uncached";
  e.description = "multi-head attention behind a layer that keeps no key-value cache (test)";
  e.order = 100;
  e.build = [](const nn::AttentionLayerContext& c, Generator& gen) {
    return std::make_shared<UncachedAttention>(c, gen);
  };
  return e;
}

const Registration<nn::AttentionLayerEntry> uncached_registration{uncached_entry()};

// Two blocks, two heads, d_ff 32 (2 d_model), a context of 8.
nn::ModelConfig tiny_model(const std::string& scale, const std::string& attention = "multi_head") {
  nn::ModelConfig c = model_config(/*vocab_size=*/11, /*max_seq_len=*/8, /*d_model=*/16, /*n_heads=*/2, /*n_layers=*/2);
  c.d_ff = 32;
  c.scale = scale;
  c.attention = attention;
  return c;
}

index_array row(const std::vector<std::int64_t>& tokens, std::size_t begin, std::size_t end) {
  index_array a = index_array::from_shape({1, end - begin});
  std::copy(tokens.begin() + static_cast<std::ptrdiff_t>(begin), tokens.begin() + static_cast<std::ptrdiff_t>(end),
            a.data());
  return a;
}

// Largest |a - b| over the largest |b|.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

// The last row of forward() on the last max_seq_len tokens: the whole window recomputed, every position read out.
std::vector<float> recomputed_logits(nn::AttentionModel& model, const std::vector<std::int64_t>& sequence) {
  NoGradGuard no_grad;
  const std::size_t end = sequence.size(), begin = end - std::min(end, model.config().max_seq_len);
  const Tensor logits = model.forward(row(sequence, begin, end));
  const float* last = logits.value().data() + logits.value().size() - model.config().vocab_size;
  return std::vector<float>(last, last + model.config().vocab_size);
}

// For a model of `config`: a prompt of 3 tokens run at once, then one token at a time to 3 max_seq_len, the cached
// next_logits against the recomputed window at every step.
void check_cache_equals_recompute(const nn::ModelConfig& config) {
  nn::AttentionModel model(config, /*seed=*/7);
  model.eval();
  std::vector<std::int64_t> sequence{3, 1, 4};
  nn::KvCache cache;
  for (std::size_t step = 0; sequence.size() < 3 * config.max_seq_len; ++step) {
    INFO(config.attention << " / " << config.scale << ": step " << step << ", length " << sequence.size());
    const std::vector<float> cached = train::next_logits(model, sequence, &cache);
    CHECK(relative_difference(cached, recomputed_logits(model, sequence)) <= kCachedRelTol);
    CHECK(cache.length() == (sequence.size() <= config.max_seq_len ? sequence.size() : 0));
    sequence.push_back(static_cast<std::int64_t>((step * 5 + 2) % config.vocab_size));
  }
}

}  // namespace

TEST_CASE("forward_step: prompt then one token at a time equals forward on the whole sequence, every scaling") {
  for (const std::string& scale : Registry<nn::ScalingEntry>::instance().names()) {
    check_cache_equals_recompute(tiny_model(scale));
    nn::ModelConfig options = tiny_model(scale);
    options.layer_norm = false;
    options.mlp = false;
    options.n_layers = 1;
    check_cache_equals_recompute(options);
  }
}

TEST_CASE("forward_step: a layer without a cache of its own recomputes its window and gives the same logits") {
  check_cache_equals_recompute(tiny_model("sqrt_dk", "test_uncached"));
  check_cache_equals_recompute(tiny_model("test_biased", "test_uncached"));
}

TEST_CASE("forward_step: logits of n new tokens at once; refused past max_seq_len, for a non-causal model") {
  nn::AttentionModel model(tiny_model("sqrt_dk"), /*seed=*/2);
  NoGradGuard no_grad;
  const std::vector<std::int64_t> tokens{1, 2, 3, 4, 5, 6, 7, 8};
  nn::KvCache cache;
  const Tensor first = model.forward_step(row(tokens, 0, 5), cache);
  CHECK(first.shape() == shape_t{1, 5, 11});
  const Tensor rest = model.forward_step(row(tokens, 5, 8), cache);
  CHECK(rest.shape() == shape_t{1, 3, 11});
  CHECK(cache.length() == 8);
  const xt::xarray<float> full = model.forward(row(tokens, 0, 8)).value();
  for (std::size_t t = 0; t < 8; ++t)
    for (std::size_t v = 0; v < 11; ++v) {
      const float got = t < 5 ? first.value()(0, t, v) : rest.value()(0, t - 5, v);
      CHECK(got == doctest::Approx(full(0, t, v)).epsilon(kCachedRelTol).scale(10));
    }
  CHECK_THROWS_WITH_AS(model.forward_step(row(tokens, 0, 1), cache),
                       "AttentionModel::forward_step: 8 cached and 1 new positions exceed max_seq_len 8", Error);
  nn::ModelConfig bidirectional = tiny_model("sqrt_dk");
  bidirectional.causal = false;
  nn::AttentionModel encoder(bidirectional, /*seed=*/2);
  nn::KvCache fresh;
  CHECK_THROWS_WITH_AS(encoder.forward_step(row(tokens, 0, 2), fresh), doctest::Contains("the model is not causal"),
                       Error);
}

TEST_CASE("generate: cached and recomputed decoding give the same tokens, greedy and seeded, past the context") {
  nn::AttentionModel model(tiny_model("sqrt_dk"), /*seed=*/5);
  train::SampleOptions greedy;
  greedy.tokens = 30;  // the context is 8: the window slides for the last 25
  greedy.temperature = 0;
  const std::vector<std::int64_t> prompt{1, 2, 3};
  const auto cached = train::generate(model, prompt, greedy, true);
  CHECK(cached.size() == 30);
  CHECK(cached == train::generate(model, prompt, greedy, false));
  train::SampleOptions seeded;
  seeded.tokens = 30;
  seeded.seed = 11;
  const auto drawn = train::generate(model, prompt, seeded, true);
  CHECK(drawn == train::generate(model, prompt, seeded, false));
  CHECK(drawn == train::generate(model, prompt, seeded, true));  // the same seed, the same tokens
  seeded.seed = 12;
  CHECK(drawn != train::generate(model, prompt, seeded, true));
  // A prompt longer than the context is cropped to its last max_seq_len tokens, as nanoGPT's idx[:, -block_size:].
  const std::vector<std::int64_t> long_prompt{9, 9, 9, 9, 1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<std::int64_t> cropped{1, 2, 3, 4, 5, 6, 7, 8};
  greedy.tokens = 1;
  CHECK(train::generate(model, long_prompt, greedy) == train::generate(model, cropped, greedy));
}

TEST_CASE("choose_token: temperature 0 is argmax, top-k never leaves the k largest, non-finite logits throw") {
  const std::vector<float> logits{0.5f, 2.0f, -1.0f, 2.0f, 1.5f, 0.0f, 1.9f};
  train::SampleOptions options;
  Generator gen(1);
  options.temperature = 0;
  CHECK(train::choose_token(logits, options, gen) == 1);  // a tie goes to the lower index
  options.temperature = 100;                              // nearly uniform over the kept ones
  options.top_k = 3;
  std::set<std::int64_t> seen;
  for (int i = 0; i < 2000; ++i) seen.insert(train::choose_token(logits, options, gen));
  CHECK(seen == std::set<std::int64_t>{1, 3, 6});
  options.top_k = 1;
  for (int i = 0; i < 100; ++i) CHECK(train::choose_token(logits, options, gen) == 1);
  options.top_k = 0;
  seen.clear();
  for (int i = 0; i < 2000; ++i) seen.insert(train::choose_token(logits, options, gen));
  CHECK(seen.size() == logits.size());
  const std::vector<float> diverged{0.0f, NAN, 1.0f};
  CHECK_THROWS_WITH_AS(train::choose_token(diverged, options, gen), doctest::Contains("not finite"),
                       std::runtime_error);
}

TEST_CASE("escape_invalid_utf8: well-formed UTF-8 as it is, each byte of an invalid sequence as \\xNN") {
  CHECK(escape_invalid_utf8("plain text\n\ttab") == "plain text\n\ttab");
  CHECK(escape_invalid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9D\x84\x9E") ==
        "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9D\x84\x9E");
  CHECK(escape_invalid_utf8("\xFF") == "\\xFF");
  CHECK(escape_invalid_utf8("a\xE2\x82") == "a\\xE2\\x82");  // cut short at the end
  CHECK(escape_invalid_utf8("a\xE2\x82"
                            "b") == "a\\xE2\\x82b");                         // broken by an ASCII byte
  CHECK(escape_invalid_utf8("\xC0\xAF") == "\\xC0\\xAF");                    // overlong '/'
  CHECK(escape_invalid_utf8("\xED\xA0\x80") == "\\xED\\xA0\\x80");           // a surrogate
  CHECK(escape_invalid_utf8("\xF4\x90\x80\x80") == "\\xF4\\x90\\x80\\x80");  // above U+10FFFF
  CHECK(escape_invalid_utf8("\x80\xC3\xA9") == "\\x80\xC3\xA9");             // a lone continuation byte, then 'é'
  CHECK(escape_invalid_utf8(std::string("\0x", 2)) == std::string("\0x", 2));
}

TEST_CASE("xgrad sample: a trained char_lm run continues its prompt, the same seed the same text") {
  const TempDir root("sample_run");
  const std::string text = (root / "text.txt").string(), run = (root / "run").string();
  {
    std::ofstream f(text);
    for (int i = 0; i < 40; ++i) f << "the cat sat on the mat. caf\xC3\xA9 na\xC3\xAFve.\n";
  }
  train::train(tiny_char_lm_run(run, text, 30));
  const ProcessResult greedy = run_xgrad({"sample", run, "--prompt", "the c", "--tokens", "40", "--temperature", "0"});
  INFO("stderr: " << greedy.err);
  REQUIRE(greedy.exit_code == 0);
  CHECK(greedy.out.rfind("the c", 0) == 0);
  CHECK(run_xgrad({"sample", run, "--prompt", "the c", "--tokens", "40", "--temperature", "0"}).out == greedy.out);
  // At a high temperature the bytes are nearly uniform: most of 0x80..0xFF start no well-formed sequence.
  const std::vector<std::string> hot{"sample", run, "--tokens", "300", "--temperature", "5", "--seed", "3"};
  const ProcessResult drawn = run_xgrad(hot);
  REQUIRE(drawn.exit_code == 0);
  CHECK(drawn.out.rfind("\n", 0) == 0);  // an empty prompt starts from "\n", as nanoGPT
  CHECK(drawn.out.find("\\x") != std::string::npos);
  CHECK(escape_invalid_utf8(drawn.out) == drawn.out);  // what is written is well-formed UTF-8
  CHECK(run_xgrad(hot).out == drawn.out);
  const auto model = train::load_sampling_model(run);
  train::SampleOptions options;
  options.tokens = 300;
  options.temperature = 5;
  options.seed = 3;
  CHECK(train::sample_text(*model, options) == drawn.out);
  options.top_k = 1;
  options.prompt = "the c";
  options.tokens = 40;
  CHECK(train::sample_text(*model, options) == greedy.out);  // top-k 1 is greedy
}

TEST_CASE("xgrad sample: a config.json whose sizes disagree with the checkpoint is refused before the model is built") {
  const TempDir root("sample_sizes");
  const std::string text = (root / "text.txt").string(), run = (root / "run").string();
  {
    std::ofstream f(text);
    for (int i = 0; i < 20; ++i) f << "the cat sat on the mat.\n";
  }
  train::train(tiny_char_lm_run(run, text, 5));
  const nlohmann::json original = nlohmann::json::parse(std::ifstream(fs::path(run) / "config.json"));
  // Each within its allowed range, together a model of gigabytes for a checkpoint of kilobytes. Under a memory
  // limit below that, a model built before the check fails as out of memory instead of naming the file and key.
  const std::vector<std::pair<nlohmann::json, std::string>> edits = {
      {{{"d_model", 16384}, {"n_layers", 64}, {"d_ff", 65536}}, "d_model"},
      {{{"d_model", 16384}}, "d_model"},
      {{{"n_layers", 64}}, "n_layers"},
      {{{"d_ff", 65536}}, "d_ff"},
      {{{"d_k", 4096}}, "d_k"},
  };
  ProcessOptions limited;
  limited.address_space_kib = address_space_limit(4000000);
  for (const auto& entry : edits) {
    // Named, not a structured binding: doctest's assertions are lambdas, which C++17 lets no binding enter.
    const nlohmann::json& edit = entry.first;
    const std::string& key = entry.second;
    CAPTURE(edit.dump());
    const fs::path edited = root / "edited";
    fs::remove_all(edited);
    fs::copy(run, edited, fs::copy_options::recursive);
    nlohmann::json config = original;
    config.update(edit);
    std::ofstream(edited / "config.json", std::ios::trunc) << config.dump(2);
    const ProcessResult r = run_xgrad({"sample", edited.string(), "--tokens", "5"}, limited);
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find((edited / "config.json").string()) != std::string::npos);
    CHECK(r.err.find("checkpoint.safetensors") != std::string::npos);
    CHECK(r.err.find("'" + key) != std::string::npos);
  }
}
