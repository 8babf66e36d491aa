// Dropout in the model and in training runs (the op itself: tests/test_ops_more.cpp): nothing changes in eval mode
// or at dropout 0; while training the masks are a function of the generator the trainer sets per step, so runs are
// reproducible and resume exactly; the setting is recorded and its range enforced.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/ops.h"
#include "data/registry.h"
#include "nn/model.h"
#include "tests/support/model_config.h"
#include "tests/support/op_testing.h"
#include "tests/support/process.h"
#include "tests/support/run_files.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_run.h"
#include "train/trainer.h"

using namespace xgrad;
namespace fs = std::filesystem;
using namespace xgrad::testing;

namespace {

// Two layers of two heads on 8 tokens of a 11-token vocabulary.
nn::ModelConfig small_model(double dropout) {
  nn::ModelConfig c = model_config(11, 8, 16, 2, 2);
  c.dropout = dropout;
  return c;
}

index_array tokens() {
  index_array t = index_array::from_shape({3, 8});
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<std::int64_t>((i * 7 + 3) % 11);
  return t;
}

// Logits of forward(tokens) (positions empty) or forward(tokens, positions), and every parameter's gradient of their
// sum of squares.
std::vector<xt::xarray<float>> logits_and_gradients(nn::AttentionModel& model, const index_array* positions) {
  model.zero_grad();
  const Tensor logits = positions ? model.forward(tokens(), *positions) : model.forward(tokens());
  sum(logits * logits).backward();
  std::vector<xt::xarray<float>> out{logits.value()};
  for (const Tensor& p : model.parameters()) out.push_back(p.grad());
  return out;
}

// `config` trained into `out`.
train::RunSummary train_in(train::TrainConfig config, const fs::path& out) {
  config.out = out.string();
  return train::train(config);
}

std::string config_value(const fs::path& run, const std::string& key) {
  std::ifstream in(run / "config.json");
  return nlohmann::json::parse(in).at(key).dump();
}

}  // namespace

TEST_CASE("eval mode and dropout 0 leave the logits as they are: the same bytes with dropout 0.5 and 0") {
  nn::AttentionModel dropped(small_model(0.5), 3), plain(small_model(0.0), 3);
  const xt::xarray<float> reference = plain.forward(tokens()).value();
  dropped.eval();
  CHECK(dropped.forward(tokens()).value() == reference);  // the same weights: dropout draws nothing at init
  plain.eval();
  CHECK(plain.forward(tokens()).value() == reference);
  plain.train();
  CHECK(plain.forward(tokens()).value() == reference);
}

TEST_CASE("in train mode dropout changes the logits, reproducibly for one generator, otherwise for another") {
  nn::AttentionModel dropped(small_model(0.5), 3), plain(small_model(0.0), 3);
  const xt::xarray<float> reference = plain.forward(tokens()).value();
  auto logits_at = [&](std::uint64_t step) {
    dropped.set_dropout_generator(Generator(3, nn::AttentionModel::kDropoutStream, step));
    return xt::xarray<float>(dropped.forward(tokens()).value());
  };
  const xt::xarray<float> step_5 = logits_at(5);
  CHECK(step_5 != reference);
  CHECK(logits_at(5) == step_5);
  CHECK(logits_at(6) != step_5);
  for (std::size_t i = 0; i < step_5.size(); ++i) REQUIRE(std::isfinite(step_5.data()[i]));
  // forward_step (sampling) drops nothing, in either mode.
  nn::KvCache cache;
  const xt::xarray<float> stepped = dropped.forward_step(tokens(), cache).value();
  CHECK(relative_difference(stepped, reference) < 1e-5);
}

TEST_CASE("the unfused attention taken while dropping out its weights equals the fused attention, values and grads") {
  // p = 1e-12 drops no weight of these few hundred (the mask is a fixed function of the generator) and scales the
  // others by 1 / (1 - p), which rounds to 1 in float: the unfused path computes the fused path's function, and 1e-5
  // allows for float rounding of sums in another order (as the scalings' fused-vs-reference test does).
  const index_array positions{1, 7, 12, 23};
  for (const index_array* at : {static_cast<const index_array*>(nullptr), &positions}) {
    INFO((at ? "forward at positions" : "forward"));
    nn::AttentionModel model(small_model(0.0), 4);
    for (auto& layer : model.attention_layers()) layer->record_attention = true;
    const auto fused = logits_and_gradients(model, at);
    const xt::xarray<float> fused_probs = model.attention_layers().front()->last.probs;
    for (auto& layer : model.attention_layers()) {
      layer->attn_dropout->p = 1e-12;
      layer->attn_dropout->generator = std::make_shared<Generator>(1);
    }
    const auto unfused = logits_and_gradients(model, at);
    const nn::AttentionRecord& record = model.attention_layers().front()->last;
    CHECK(relative_difference(record.probs, fused_probs) < 1e-5);
    CHECK(record.q.shape() == record.k.shape());
    CHECK(record.scores.has_grad());
    REQUIRE(fused.size() == unfused.size());
    for (std::size_t i = 0; i < fused.size(); ++i) {
      INFO("0: logits, then the gradients in parameters() order; " << i);
      CHECK(relative_difference(unfused[i], fused[i]) < 1e-5);
    }
  }
}

TEST_CASE("a run with --dropout 0.1 is reproducible, resumes exactly, records dropout, and evaluates without it") {
  const TempDir a("dropout_a"), b("dropout_b"), plain("dropout_plain"), cut("dropout_cut"), whole("dropout_whole");
  train::TrainConfig c = tiny_run("", 40);
  c.model.dropout = 0.1;
  c.eval_every = 9;
  c.checkpoint_every = 8;
  train_in(c, a);
  train_in(c, b);
  CHECK(metrics_without_timing(a) == metrics_without_timing(b));
  CHECK(config_value(a, "dropout") == "0.1");
  train::TrainConfig without = c;
  without.model.dropout = 0;
  train_in(without, plain);
  CHECK(metrics_without_timing(a) != metrics_without_timing(plain));
  CHECK(config_value(plain, "dropout") == "0.0");
  // 30 steps, then --resume from the checkpoint to 40: the rows of the run never interrupted. Without eval_every,
  // whose evaluation on the last step would make row 29 differ.
  train::TrainConfig shorter = c;
  shorter.steps = 30;
  shorter.eval_every = 0;
  train_in(shorter, cut);
  shorter.steps = 40;
  shorter.resume = true;
  train_in(shorter, cut);
  shorter.resume = false;
  train_in(shorter, whole);
  CHECK(metrics_without_timing(cut) == metrics_without_timing(whole));
}

TEST_CASE("the held-out evaluation runs in eval mode and leaves the model training") {
  const TempDir evaluated("dropout_eval"), not_evaluated("dropout_no_eval");
  train::TrainConfig c = tiny_run("", 20);
  c.model.dropout = 0.5;
  c.eval_every = 3;
  const double loss = train_in(c, evaluated).final_loss;
  c.eval_every = 0;
  // The training steps do not notice the evaluations (had one left the model in eval mode, later steps would drop
  // nothing and their losses would differ).
  CHECK(train_in(c, not_evaluated).final_loss == loss);
}

TEST_CASE("--dropout outside [0, 1) is refused naming the flag and the range") {
  const TempDir dir("dropout_refused");
  for (const char* value : {"1", "-0.1", "1.5"}) {
    INFO("--dropout " << value);
    const ProcessResult r = run_xgrad({"train", "--out", dir.string(), "--dropout", value, "--steps", "1"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--dropout") != std::string::npos);
    CHECK(r.err.find("[0, 1)") != std::string::npos);
  }
  CHECK_THROWS_AS(nn::AttentionModel(small_model(1.0), 0), Error);
}
