// Model and task options: kv_recall's `sum` encoding (key embedding + value embedding at one
// position) and attention without its output projection W_o (`attn_out_proj` false).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "autograd/ops.h"
#include "data/kv_recall.h"
#include "data/registry.h"
#include "nn/attention.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "tests/support/run_files.h"
#include "tests/support/temp_dir.h"

using namespace xgrad;
namespace fs = std::filesystem;
using namespace xgrad::testing;

namespace {

std::unique_ptr<data::Task> kv_task(std::size_t n_keys, std::size_t n_values, std::size_t n_pairs,
                                    const std::string& encoding) {
  return data::make_task(
      "kv_recall", SettingValues(nlohmann::json{
                       {"n_keys", n_keys}, {"n_values", n_values}, {"n_pairs", n_pairs}, {"kv_encoding", encoding}}));
}

// Mean loss of the last 20 of `steps` AdamW steps of a one-layer attention-only model on kv_recall.
double final_loss(const std::string& encoding, std::size_t steps) {
  const auto task = kv_task(32, 16, 8, encoding);
  nn::ModelConfig c;
  c.vocab_size = task->vocab_size();
  c.max_seq_len = task->seq_len();
  c.d_model = 32;
  c.mlp = false;
  nn::AttentionModel model(c, 0);
  nn::AdamW opt(model.parameters(), 3e-3, 0.9, 0.999, 1e-8, 0.0);
  double tail = 0;
  for (std::size_t step = 0; step < steps; ++step) {
    const data::Batch b = task->batch(0, step, 64);
    Tensor loss = nn::loss_at_targets(model, b.inputs, b.targets).loss;
    if (step + 20 >= steps) tail += loss.item();
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  return tail / 20;
}

}  // namespace

TEST_CASE("kv_recall --kv-encoding sum: each pair position holds (key token, value token), the query (key, marker)") {
  const std::size_t K = 5, V = 3, P = 4;
  const auto sum = kv_task(K, V, P, "sum"), pair = kv_task(K, V, P, "pair");
  CHECK(sum->vocab_size() == V + K + 1);
  CHECK(pair->vocab_size() == K * V + K);
  CHECK(sum->seq_len() == P + 1);
  CHECK(sum->chance_loss() == doctest::Approx(std::log(3.0)));
  const data::Batch s = sum->batch(7, 2, 16), p = pair->batch(7, 2, 16);
  REQUIRE(s.inputs.shape() == std::vector<std::size_t>{16, P + 1, 2});
  REQUIRE(p.inputs.shape() == std::vector<std::size_t>{16, P + 1});
  CHECK(s.targets == p.targets);  // the same draw: keys, values, query and answer
  for (std::size_t b = 0; b < 16; ++b) {
    std::set<std::int64_t> keys;
    for (std::size_t i = 0; i < P; ++i) {
      const std::int64_t key = s.inputs(b, i, 0), value = s.inputs(b, i, 1);
      REQUIRE(key >= static_cast<std::int64_t>(V));
      REQUIRE(key < static_cast<std::int64_t>(V + K));
      REQUIRE(value >= 0);
      REQUIRE(value < static_cast<std::int64_t>(V));
      // The pair token of the same draw is key * n_values + value.
      CHECK(p.inputs(b, i) == (key - static_cast<std::int64_t>(V)) * static_cast<std::int64_t>(V) + value);
      keys.insert(key);
      CHECK(s.targets(b, i) == -1);
    }
    CHECK(keys.size() == P);  // distinct within a sequence
    const std::int64_t query_key = s.inputs(b, P, 0);
    CHECK(s.inputs(b, P, 1) == static_cast<std::int64_t>(V + K));  // the query marker
    CHECK(p.inputs(b, P) == static_cast<std::int64_t>(K * V) + query_key - static_cast<std::int64_t>(V));
    std::int64_t answer = -1;
    for (std::size_t i = 0; i < P; ++i)
      if (s.inputs(b, i, 0) == query_key) answer = s.inputs(b, i, 1);
    CHECK(s.targets(b, P) == answer);
  }
}

TEST_CASE("AttentionModel on [B, T, 2] inputs: each position's input is the sum of its two token embeddings") {
  nn::ModelConfig c;
  c.vocab_size = 6;
  c.max_seq_len = 3;
  c.d_model = 4;
  c.mlp = false;
  c.layer_norm = false;
  nn::AttentionModel model(c, 2);
  // tokens (a, b) at each position give the same logits as a model whose one embedding row is row a + row b.
  index_array two{{{1, 4}, {0, 5}, {2, 2}}};
  nn::AttentionModel summed(c, 2);
  xt::xarray<float>& w = summed.named_parameters().front().second.mutable_value();  // tok_emb.weight
  REQUIRE(summed.named_parameters().front().first == "tok_emb.weight");
  const xt::xarray<float> original = w;
  for (std::size_t j = 0; j < 4; ++j) {
    w(1, j) = original(1, j) + original(4, j);
    w(0, j) = original(0, j) + original(5, j);
    w(2, j) = original(2, j) + original(2, j);
  }
  const xt::xarray<float> a = model.forward(two).value(), b = summed.forward(index_array{{1, 0, 2}}).value();
  REQUIRE(a.shape() == b.shape());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a.data()[i] == doctest::Approx(b.data()[i]).epsilon(1e-5));
}

TEST_CASE("kv_recall with 32 keys and 16 values: the sum encoding learns in 400 steps, the pair encoding does not") {
  const double sum = final_loss("sum", 400), pair = final_loss("pair", 400);
  INFO("final loss: sum " << sum << ", pair " << pair << " (chance ln 16 = 2.77)");
  CHECK(sum < 0.5);
  CHECK(pair > 1.5);
}

namespace {

nn::ModelConfig attention_only(bool out_proj) {
  nn::ModelConfig c;
  c.vocab_size = 5;
  c.max_seq_len = 3;
  c.d_model = 4;
  c.n_heads = 1;
  c.mlp = false;
  c.layer_norm = false;
  c.settings = SettingValues(nlohmann::json{{"attn_out_proj", out_proj}});
  return c;
}

xt::xarray<double> values_as_double(const Tensor& t) { return xt::cast<double>(t.value()); }

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("--attn-out-proj false: no W_o among the parameters; with W_o (the default) blocks.0.attn.w_o.weight") {
  auto names = [](bool out_proj) {
    std::vector<std::string> out;
    for (const auto& [name, p] : nn::AttentionModel(attention_only(out_proj), 0).named_parameters())
      out.push_back(name);
    return out;
  };
  const std::vector<std::string> without = names(false), with = names(true);
  CHECK(std::find(with.begin(), with.end(), "blocks.0.attn.w_o.weight") != with.end());
  for (const std::string& name : without) CHECK(name.find("w_o") == std::string::npos);
  CHECK(without == std::vector<std::string>{"tok_emb.weight", "pos_emb.weight", "blocks.0.attn.w_q.weight",
                                            "blocks.0.attn.w_k.weight", "blocks.0.attn.w_v.weight", "head.weight",
                                            "head.bias"});
  // n_heads * d_k must be d_model without W_o: refused before any weight is drawn, naming the three flags.
  nn::ModelConfig bad = attention_only(false);
  bad.d_k = 2;
  CHECK_THROWS_WITH_AS(nn::AttentionModel(bad, 0),
                       "--attn-out-proj false: the heads' concatenation is the attention output, so --n-heads x --d-k "
                       "must equal --d-model; got 1 x 2 = 2 and --d-model 4",
                       std::invalid_argument);
}

TEST_CASE("--attn-out-proj false: one attention-only layer is softmax(q·kᵀ/sqrt(d_k))·v + residual → readout") {
  nn::AttentionModel model(attention_only(false), 4);
  std::map<std::string, xt::xarray<double>> w;
  for (const auto& [name, p] : model.named_parameters()) w[name] = values_as_double(p);
  const index_array tokens{{3, 0, 4}, {1, 1, 2}};
  const xt::xarray<float> logits = model.forward(tokens).value();
  const std::size_t T = 3, d = 4, V = 5;
  for (std::size_t b = 0; b < 2; ++b) {
    // By hand, in double: x = token + position embedding; q, k, v = x W (weights stored [in, out]).
    double x[3][4], q[3][4], k[3][4], v[3][4];
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t j = 0; j < d; ++j) x[t][j] = w["tok_emb.weight"](tokens(b, t), j) + w["pos_emb.weight"](t, j);
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t j = 0; j < d; ++j) {
        q[t][j] = k[t][j] = v[t][j] = 0;
        for (std::size_t i = 0; i < d; ++i) {
          q[t][j] += x[t][i] * w["blocks.0.attn.w_q.weight"](i, j);
          k[t][j] += x[t][i] * w["blocks.0.attn.w_k.weight"](i, j);
          v[t][j] += x[t][i] * w["blocks.0.attn.w_v.weight"](i, j);
        }
      }
    for (std::size_t t = 0; t < T; ++t) {
      double scores[3], max_score = -1e300, total = 0;
      for (std::size_t s = 0; s <= t; ++s) {  // causal: keys 0..t
        scores[s] = 0;
        for (std::size_t j = 0; j < d; ++j) scores[s] += q[t][j] * k[s][j];
        scores[s] /= std::sqrt(static_cast<double>(d));
        max_score = std::max(max_score, scores[s]);
      }
      for (std::size_t s = 0; s <= t; ++s) total += std::exp(scores[s] - max_score);
      double h[4];
      for (std::size_t j = 0; j < d; ++j) {
        h[j] = x[t][j];  // the residual
        for (std::size_t s = 0; s <= t; ++s) h[j] += std::exp(scores[s] - max_score) / total * v[s][j];
      }
      for (std::size_t c = 0; c < V; ++c) {
        double expected = w["head.bias"](c);
        for (std::size_t j = 0; j < d; ++j) expected += h[j] * w["head.weight"](j, c);
        CHECK(logits(b, t, c) == doctest::Approx(expected).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE(
    "--kv-encoding sum with --attn-out-proj false: config.json records both; --config and --resume reproduce the run") {
  const fs::path root = temp_dir("model_options");
  const std::string flags =
      " --kv-encoding sum --attn-out-proj false --n-keys 6 --n-values 4 --n-pairs 3 --d-model 16 "
      "--mlp false --print-every 1000";
  const fs::path whole = root / "whole", again = root / "again", resumed = root / "resumed";
  REQUIRE(run_xgrad(words("train --out " + whole.string() + flags + " --steps 12")).exit_code == 0);
  const nlohmann::json config = nlohmann::json::parse(read_file(whole / "config.json"));
  CHECK(config.at("kv_encoding") == "sum");
  CHECK(config.at("attn_out_proj") == false);
  CHECK(config.at("derived").at("vocab_size") == 4 + 6 + 1);
  REQUIRE(
      run_xgrad(words("train --config " + (whole / "config.json").string() + " --out " + again.string())).exit_code ==
      0);
  CHECK(metrics_without_timing(again) == metrics_without_timing(whole));
  REQUIRE(run_xgrad(words("train --out " + resumed.string() + flags + " --steps 5 --checkpoint-every 5")).exit_code ==
          0);
  REQUIRE(run_xgrad(words("train --resume " + resumed.string() + " --steps 12")).exit_code == 0);
  CHECK(metrics_without_timing(resumed) == metrics_without_timing(whole));
  // The resumed run's weights have no W_o: the checkpoint holds exactly the model's parameters.
  const std::string header = read_file(resumed / "checkpoint.safetensors").substr(0, 4096);
  CHECK(header.find("model.blocks.0.attn.w_q.weight") != std::string::npos);
  CHECK(header.find("w_o") == std::string::npos);
  fs::remove_all(root);
}
