// nanoGPT's model and optimizer options: the readout tied to the token embedding table (tie_word_embeddings),
// Linears and LayerNorms without biases (bias false), and weight decay on the weight matrices only
// (weight_decay_params matrices, configure_optimizers' parameter groups).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>
#include <xtensor/xview.hpp>

#include "autograd/ops.h"
#include "nn/checkpoint.h"
#include "nn/layers.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "tests/support/op_testing.h"
#include "tests/support/process.h"
#include "tests/support/run_files.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_run.h"
#include "train/config.h"
#include "train/run_checkpoint.h"
#include "train/sample.h"
#include "train/settings.h"
#include "train/trainer.h"

using namespace xgrad;
using namespace xgrad::testing;
namespace fs = std::filesystem;

namespace {

nn::ModelConfig tiny_config(bool tie, bool bias) {
  nn::ModelConfig c;
  std::tie(c.vocab_size, c.max_seq_len, c.d_model, c.n_layers) = std::tuple{7, 5, 8, 2};
  std::tie(c.tie_word_embeddings, c.bias) = std::tuple{tie, bias};
  return c;
}

std::map<std::string, Tensor> by_name(const nn::Module& m) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, p] : m.named_parameters()) out.emplace(name, p);
  return out;
}

const index_array kTokens{{1, 6, 0, 3, 3}, {2, 5, 4, 1, 0}};
const index_array kTargets{{6, 0, 3, 3, 2}, {5, 4, 1, 0, 6}};

// An untied model holding a tied model's weights: head.weight = tok_emb.weight^T, every other parameter copied.
std::unique_ptr<nn::AttentionModel> untied_copy(const nn::AttentionModel& tied) {
  nn::ModelConfig c = tied.config();
  c.tie_word_embeddings = false;
  auto untied = std::make_unique<nn::AttentionModel>(c, 99);  // another seed: every weight is overwritten
  const auto tied_params = by_name(tied);
  for (auto& [name, p] : by_name(*untied))
    p.mutable_value() = name == "head.weight"
                            ? xt::xarray<float>(xt::transpose(tied_params.at("tok_emb.weight").value()))
                            : tied_params.at(name).value();
  return untied;
}

Tensor loss_of(nn::AttentionModel& model) { return cross_entropy(model.forward(kTokens), kTargets); }

bool has_bias_parameter(const nn::Module& m) {
  for (const auto& [name, p] : m.named_parameters())
    if (name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0) return true;
  return false;
}

}  // namespace

TEST_CASE("tie_word_embeddings: one table read in and out, no head.weight; the other weights are the untied model's") {
  nn::AttentionModel tied(tiny_config(true, true), 3), untied(tiny_config(false, true), 3);
  const auto t = by_name(tied), u = by_name(untied);
  CHECK(t.count("tok_emb.weight") == 1);
  CHECK(t.count("head.weight") == 0);
  CHECK(t.count("head.bias") == 1);
  CHECK(t.size() + 1 == u.size());
  CHECK(tied.num_parameters() + 7 * 8 == untied.num_parameters());
  // Pairs, not structured bindings: doctest's assertions are lambdas, which C++17 lets no binding enter (Clang
  // refuses it).
  for (const auto& entry : t) CHECK_MESSAGE(entry.second.value() == u.at(entry.first).value(), entry.first);
  // The readout is h @ tok_emb.weight^T + head.bias: the untied model with that head gives the same logits.
  const auto copy = untied_copy(tied);
  const xt::xarray<float> a = tied.forward(kTokens).value(), b = copy->forward(kTokens).value();
  REQUIRE(a.shape() == b.shape());
  CHECK(xt::allclose(a, b, 1e-5, 1e-6));
  nn::KvCache cache;  // incremental decoding reads the same table
  const xt::xarray<float> stepped = tied.forward_step(index_array{{1, 6, 0}}, cache).value();
  CHECK(xt::allclose(stepped, xt::view(a, xt::range(0, 1), xt::range(0, 3), xt::all()), 1e-5, 1e-6));
}

TEST_CASE("tie_word_embeddings: the table's gradient is the sum of its embedding and readout gradients") {
  for (const bool bias : {true, false}) {
    CAPTURE(bias);
    nn::AttentionModel tied(tiny_config(true, bias), 5);
    const auto untied = untied_copy(tied);
    loss_of(tied).backward();
    loss_of(*untied).backward();
    const auto t = by_name(tied), u = by_name(*untied);
    const xt::xarray<float> sum = u.at("tok_emb.weight").grad() + xt::transpose(u.at("head.weight").grad());
    CHECK(xt::allclose(t.at("tok_emb.weight").grad(), sum, 1e-4, 1e-6));
    // Neither use alone is the gradient.
    CHECK_FALSE(xt::allclose(t.at("tok_emb.weight").grad(), u.at("tok_emb.weight").grad(), 1e-4, 1e-6));
    for (const auto& entry : t)
      if (entry.first != "tok_emb.weight")
        CHECK_MESSAGE(xt::allclose(entry.second.grad(), u.at(entry.first).grad(), 1e-4, 1e-6), entry.first);
  }
}

TEST_CASE("tied readout: float64 gradcheck of a tiny tied model's loss w.r.t. the shared table") {
  std::mt19937 gen(11);
  const DTensor table = rand_input({7, 4}, gen), pos = rand_input({5, 4}, gen), gain = rand_input({4}, gen, 0.5, 1.5);
  const DTensor head_bias = rand_input({7}, gen);
  index_array positions = index_array::from_shape({5});
  for (std::size_t i = 0; i < 5; ++i) positions(i) = static_cast<std::int64_t>(i);
  // embedding, LayerNorm without a bias, tied readout (+ bias): what AttentionModel computes around its blocks.
  const auto loss = [&](const Inputs& in) {
    const DTensor h = layer_norm(embedding(in[0], kTokens) + embedding(in[1], positions), in[2], DTensor());
    return cross_entropy(matmul(h, transpose(in[0], 0, 1)) + in[3], kTargets);
  };
  CHECK_GRADIENT(loss, {table, pos, gain, head_bias});
}

TEST_CASE("tie_word_embeddings under parametrization mup is refused, naming both flags") {
  nn::ModelConfig c = tiny_config(true, true);
  c.parametrization = nn::Parametrization::mup;
  c.scale = "dk";
  CHECK_THROWS_WITH_AS(nn::AttentionModel(c, 0), doctest::Contains("tie_word_embeddings"), Error);
  train::TrainConfig t = tiny_run(temp_dir("tie_mup").string());
  train::set_setting(t, "scale", "dk");
  train::set_setting(t, "parametrization", "mup");
  train::set_setting(t, "tie_word_embeddings", true);
  try {
    t.validate();
    FAIL("validate accepted --tie-word-embeddings with --parametrization mup");
  } catch (const train::ConfigError& e) {
    CHECK(std::string(e.what()).find("--tie-word-embeddings") != std::string::npos);
    CHECK(std::string(e.what()).find("--parametrization mup") != std::string::npos);
  }
}

TEST_CASE("bias false: no Linear or LayerNorm has a bias; the counts differ by exactly the biases") {
  nn::AttentionModel with(tiny_config(false, true), 1), without(tiny_config(false, false), 1);
  const auto w = by_name(with), wo = by_name(without);
  std::size_t bias_elements = 0;
  for (const auto& entry : w)
    if (!wo.count(entry.first)) {
      const std::string& name = entry.first;
      CHECK_MESSAGE(name.compare(name.size() - 5, 5, ".bias") == 0, name);
      bias_elements += entry.second.numel();
    }
  for (const char* name : {"blocks.0.ln_1.bias", "blocks.1.ln_2.bias", "blocks.0.mlp.fc_in.bias",
                           "blocks.1.mlp.fc_out.bias", "ln_f.bias", "head.bias"})
    CHECK_MESSAGE(w.count(name) == 1, name);
  CHECK_FALSE(has_bias_parameter(without));
  CHECK(wo.size() + 2 * 4 + 2 == w.size());  // per block ln_1, ln_2, fc_in, fc_out; ln_f and head
  CHECK(with.num_parameters() - without.num_parameters() == bias_elements);
  CHECK(bias_elements == 2 * (8 + 8 + 32 + 8) + 8 + 7);
  nn::AttentionModel tied(tiny_config(true, false), 1);  // tied and bias-free: no head module at all
  CHECK_FALSE(has_bias_parameter(tied));
  CHECK(by_name(tied).size() + 1 == wo.size());
}

TEST_CASE("LayerNorm(d, eps, bias false): weight only, layer_norm without the add; float64 gradcheck") {
  nn::LayerNorm ln(6, 1e-5, false);
  REQUIRE(ln.named_parameters().size() == 1);
  CHECK(ln.named_parameters().front().first == "weight");
  CHECK_FALSE(ln.bias.defined());
  std::mt19937 gen(4);
  ln.weight.mutable_value() = xt::xarray<float>(uniform({6}, gen, 0.5, 1.5));
  const Tensor x(xt::xarray<float>(uniform({3, 6}, gen)));
  const Tensor with_zero_bias = layer_norm(x, ln.weight, Tensor(xt::zeros<float>({6})), 1e-5);
  CHECK(xt::allclose(ln.forward(x).value(), with_zero_bias.value(), 1e-6, 1e-7));
  const DTensor xd = rand_input({3, 6}, gen), wd = to_double(ln.weight);
  CHECK_GRADIENT([&](const Inputs& in) { return layer_norm(in[0], in[1], DTensor(), ln.eps); }, {xd, wd});
}

TEST_CASE("tied and bias-free models train: AdamW steps lower the loss and move both uses of the table together") {
  nn::AttentionModel model(tiny_config(true, false), 2);
  nn::AdamW opt(model.parameters(), 1e-2, 0.9, 0.999, 1e-8, 0.1, true);
  const double first = loss_of(model).item();
  for (int step = 0; step < 20; ++step) {
    opt.zero_grad();
    loss_of(model).backward();
    opt.step();
  }
  const double last = loss_of(model).item();
  CHECK(std::isfinite(last));
  CHECK(last < first);
  // Still one table: the untied copy of the trained weights gives the same logits.
  CHECK(xt::allclose(model.forward(kTokens).value(), untied_copy(model)->forward(kTokens).value(), 1e-5, 1e-6));
}

namespace {

// A [2, 3] weight, a [3] bias and a [1] scale, all ones, each with a zero gradient.
std::vector<Tensor> ones_with_zero_gradients() {
  std::vector<Tensor> params{Tensor(xt::ones<float>({2, 3}), true), Tensor(xt::ones<float>({3}), true),
                             Tensor(xt::ones<float>({1}), true)};
  Tensor zero = sum(params[0]) * 0.0f;
  for (std::size_t i = 1; i < params.size(); ++i) zero = zero + sum(params[i]) * 0.0f;
  zero.backward();
  return params;
}

// Each parameter's value after one step of `optimizer` at lr 0.1 with weight_decay 0.5 and `which` parameters
// decayed, from ones with zero gradients: 0.95 where decayed, 1 where not.
std::vector<float> after_one_step(const std::string& optimizer, const std::string& which) {
  const std::vector<Tensor> params = ones_with_zero_gradients();
  auto opt = nn::make_optimizer(optimizer, params, 0.1,
                                SettingValues(nlohmann::json{{"weight_decay", 0.5}, {"weight_decay_params", which}}));
  opt->step();
  std::vector<float> out;
  for (const Tensor& p : params) {
    for (float v : p.value()) CHECK(v == p.value().data()[0]);  // every element alike
    out.push_back(p.value().data()[0]);
  }
  return out;
}

}  // namespace

TEST_CASE("weight_decay_params: matrices decays 2-D weights only, all decays every parameter (AdamW and SGD)") {
  const float decayed = 1.0f - 0.1f * 0.5f;
  for (const char* optimizer : {"adamw", "sgd"}) {
    CAPTURE(optimizer);
    const std::vector<float> all = after_one_step(optimizer, "all"), matrices = after_one_step(optimizer, "matrices");
    CHECK(all == std::vector<float>{decayed, decayed, decayed});
    CHECK(matrices == std::vector<float>{decayed, 1.0f, 1.0f});
  }
  CHECK(nn::AdamW(ones_with_zero_gradients(), 0.1).decay_matrices_only() == false);  // the default: all
  CHECK_THROWS_WITH_AS(train::set_setting(*std::make_unique<train::TrainConfig>(), "weight_decay_params", "biases"),
                       doctest::Contains("--weight-decay-params"), train::ConfigError);
}

TEST_CASE("a resumed tied, bias-free run with matrix-only decay continues as the uninterrupted run") {
  train::TrainConfig c = tiny_run(temp_dir("gpt_opts_resume").string(), 20);
  c.checkpoint_every = 8;
  train::set_setting(c, "tie_word_embeddings", true);
  train::set_setting(c, "bias", false);
  train::set_setting(c, "weight_decay", 0.1);
  train::set_setting(c, "weight_decay_params", "matrices");
  train::train(c);
  const nlohmann::json recorded = nlohmann::json::parse(std::ifstream(fs::path(c.out) / "config.json"));
  CHECK(recorded.at("tie_word_embeddings") == true);
  CHECK(recorded.at("bias") == false);
  CHECK(recorded.at("weight_decay_params") == "matrices");
  const nn::Checkpoint saved = nn::load_checkpoint((fs::path(c.out) / "checkpoint.safetensors").string());
  CHECK(saved.find("model.tok_emb.weight") != nullptr);
  CHECK(saved.find("model.head.weight") == nullptr);
  train::TrainConfig longer = c;
  longer.steps = 30;
  longer.resume = true;
  train::train(longer);
  train::TrainConfig whole = longer;
  whole.resume = false;
  whole.out = temp_dir("gpt_opts_whole").string();
  train::train(whole);
  CHECK(metrics_without_timing(c.out) == metrics_without_timing(whole.out));
  for (const char* key : {"tie_word_embeddings", "bias", "weight_decay_params"}) {
    train::TrainConfig other = c;
    const nlohmann::json value = train::get_setting(c, key);
    train::set_setting(other, key, value.is_boolean() ? nlohmann::json(!value.get<bool>()) : nlohmann::json("all"));
    CHECK_THROWS_WITH_AS(train::check_same_run(c, other), doctest::Contains(train::flag_of(key).c_str()),
                         train::ConfigError);
  }
  fs::remove_all(c.out);
  fs::remove_all(whole.out);
}

TEST_CASE("--init-from a checkpoint of another tie or bias setting is refused naming the setting") {
  nn::AttentionModel tied(tiny_config(true, true), 0), untied(tiny_config(false, true), 0),
      bias_free(tiny_config(false, false), 0);
  const auto checkpoint_of = [](const nn::AttentionModel& m) {
    nn::Checkpoint c;
    for (const auto& [name, p] : m.named_parameters()) c.add("model." + name, p.value());
    return c;
  };
  const auto refusal = [](const nn::Checkpoint& c, nn::AttentionModel& into) {
    try {
      train::load_model_weights(c, "w.safetensors", into);
    } catch (const nn::CheckpointError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(refusal(checkpoint_of(tied), untied).find("--tie-word-embeddings") != std::string::npos);
  CHECK(refusal(checkpoint_of(untied), tied).find("--tie-word-embeddings") != std::string::npos);
  CHECK(refusal(checkpoint_of(untied), bias_free).find("--bias false") != std::string::npos);
  CHECK(refusal(checkpoint_of(bias_free), untied).find("--bias false") != std::string::npos);
  CHECK(refusal(checkpoint_of(tied), tied) == "accepted");
}

TEST_CASE("xgrad sample rebuilds a tied, bias-free model from config.json") {
  const TempDir root("gpt_opts_sample");
  const std::string text = (root / "text.txt").string(), run = (root / "run").string();
  {
    std::ofstream f(text);
    for (int i = 0; i < 20; ++i) f << "the cat sat on the mat.\n";
  }
  train::TrainConfig c = tiny_char_lm_run(run, text, 3);
  train::set_setting(c, "tie_word_embeddings", true);
  train::set_setting(c, "bias", false);
  train::train(c);
  const auto model = train::load_sampling_model(run);
  CHECK(model->config().tie_word_embeddings);
  CHECK_FALSE(model->config().bias);
  CHECK_FALSE(has_bias_parameter(*model));
  CHECK(by_name(*model).count("head.weight") == 0);
  const ProcessResult sampled = run_xgrad({"sample", run, "--prompt", "the", "--tokens", "10", "--temperature", "0"});
  INFO("stderr: " << sampled.err);
  CHECK(sampled.exit_code == 0);
  CHECK(sampled.out.rfind("the", 0) == 0);
}

TEST_CASE("the memory estimate counts a tied vocabulary table once") {
  train::TrainConfig untied = tiny_run("unused"), tied = untied;
  tied.model.tie_word_embeddings = true;
  const double V = 1000, d = 16, per_parameter = 4.0 * 5;
  CHECK(untied.estimate_memory(1000, 32, 0, 1).bytes() - tied.estimate_memory(1000, 32, 0, 1).bytes() ==
        doctest::Approx(per_parameter * V * d));
}

TEST_CASE("layer_norm_eps reaches every LayerNorm; torch.nn.LayerNorm's 1e-5 is the default; unread without them") {
  nn::ModelConfig c = tiny_config(false, true);
  CHECK(c.layer_norm_eps == 1e-5);
  c.layer_norm_eps = 1e-3;
  c.d_k = 8;  // as AttentionModel resolves it before building its blocks
  Generator gen(0);
  const nn::TransformerBlock block(c, gen);
  REQUIRE(block.ln_1);
  REQUIRE(block.ln_2);
  CHECK(block.ln_1->eps == 1e-3);
  CHECK(block.ln_2->eps == 1e-3);
  // A whole model: 1e-5 given is the default bit for bit; an eps far above the activations' variance shrinks every
  // LayerNorm's output, so the logits of the same weights move.
  nn::AttentionModel at_default(tiny_config(false, true), 1);
  c.layer_norm_eps = 1e-5;
  nn::AttentionModel explicit_default(c, 1);
  CHECK(xt::equal(at_default.forward(kTokens).value(), explicit_default.forward(kTokens).value())());
  c.layer_norm_eps = 1.0;
  nn::AttentionModel large(c, 1);
  CHECK_FALSE(xt::allclose(at_default.forward(kTokens).value(), large.forward(kTokens).value()));

  train::TrainConfig t;
  set_setting(t, "layer_norm_eps", 1e-3);
  CHECK(t.model.layer_norm_eps == 1e-3);
  CHECK(t.to_json().at("layer_norm_eps") == 1e-3);
  CHECK(train::unread_setting_error(t, "layer_norm_eps").empty());
  t.model.layer_norm = false;
  CHECK(train::unread_setting_error(t, "layer_norm_eps").find("--layer-norm") != std::string::npos);
  CHECK_THROWS_AS(set_setting(t, "layer_norm_eps", 0.0), train::ConfigError);  // eps 0 divides by a zero variance
}
