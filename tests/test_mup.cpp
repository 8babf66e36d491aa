// muP (nn/mup.h): every parameter's init, multiplier and learning-rate factors against Tensor Programs V's table
// (Table 3, in the multiplier form of its Table 8), the model and optimizer applying them, and the settings.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "nn/mup.h"
#include "nn/optim.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_run.h"
#include "train/config.h"
#include "train/settings.h"
#include "train/trainer.h"

using namespace xgrad;
namespace fs = std::filesystem;

namespace {

nn::ModelConfig model(std::size_t d_model, const std::string& parametrization = "sp", std::size_t base_width = 16) {
  nn::ModelConfig c;
  c.vocab_size = 20;
  c.max_seq_len = 9;
  c.d_model = d_model;
  c.n_heads = 2;
  c.scale = "dk";
  c.parametrization = parse_enum(nn::kParametrizationNames, parametrization);
  c.base_width = base_width;
  return c;
}

struct Row {
  nn::MupClass cls;
  double init_std, adam_lr, sgd_lr;
};

}  // namespace

TEST_CASE("muP's factors for every parameter at 4x the base width match Tensor Programs V's table") {
  // d_model 64 against base 16: m = 4; d_k 32 (base 8) and d_ff 256 (base 64) scale with it.
  const double m = 4;
  const nn::MupPlan plan = nn::mup_plan(model(64), 16);
  CHECK(plan.width_ratio == m);
  CHECK(plan.readout_multiplier == 1 / m);  // output weights: multiplier 1/fan_in
  // The table, per class: (init std factor on SP's, Adam lr factor, SGD lr factor).
  //   input weights & biases: init as SP, Adam lr 1, SGD lr fan_out (m)
  //   output weights: init var 1 instead of 1/fan_in (std x sqrt(m)), Adam lr 1, SGD lr fan_in (m)
  //   hidden weights: init as SP (1/fan_in), Adam lr 1/fan_in (1/m), SGD lr 1
  const Row vector{nn::MupClass::vector, 1, 1, m}, output{nn::MupClass::output, std::sqrt(m), 1, m},
      hidden{nn::MupClass::hidden, 1, 1 / m, 1}, finite{nn::MupClass::finite, 1, 1, 1};
  const std::map<std::string, Row> expected{
      {"tok_emb.weight", vector},
      {"pos_emb.weight", vector},
      {"blocks.0.ln_1.weight", vector},
      {"blocks.0.ln_1.bias", vector},
      {"blocks.0.attn.w_q.weight", hidden},
      {"blocks.0.attn.w_k.weight", hidden},
      {"blocks.0.attn.w_v.weight", hidden},
      {"blocks.0.attn.w_o.weight", hidden},
      {"blocks.0.ln_2.weight", vector},
      {"blocks.0.ln_2.bias", vector},
      {"blocks.0.mlp.fc_in.weight", hidden},
      {"blocks.0.mlp.fc_in.bias", vector},
      {"blocks.0.mlp.fc_out.weight", hidden},
      {"blocks.0.mlp.fc_out.bias", vector},
      {"ln_f.weight", vector},
      {"ln_f.bias", vector},
      {"head.weight", output},
      {"head.bias", finite},  // the readout bias spans the vocabulary
  };
  REQUIRE(plan.parameters.size() == expected.size());
  for (const nn::MupParameter& p : plan.parameters) {
    INFO(p.name << " (" << nn::mup_class_name(p.cls) << ")");
    REQUIRE(expected.count(p.name) == 1);
    const Row& row = expected.at(p.name);
    CHECK(p.cls == row.cls);
    CHECK(p.init_std == doctest::Approx(row.init_std));
    CHECK(p.adam_lr == doctest::Approx(row.adam_lr));
    CHECK(p.sgd_lr == doctest::Approx(row.sgd_lr));
    if (p.cls == nn::MupClass::output) {
      // Table 3 states output weights without a multiplier: init var 1/fan_in^2, Adam lr 1/fan_in, SGD lr
      // 1/fan_in (relative to base). The multiplier form trains the same function: the effective weight c·W has
      // init var c^2 · init_std^2 / fan_in, Adam lr c · adam_lr, SGD lr c^2 · sgd_lr.
      const double c = plan.readout_multiplier, fan_in = 64, base_fan_in = 16;
      CHECK(c * c * p.init_std * p.init_std / fan_in == doctest::Approx(base_fan_in / (fan_in * fan_in)));
      CHECK(c * p.adam_lr == doctest::Approx(base_fan_in / fan_in));
      CHECK(c * c * p.sgd_lr == doctest::Approx(base_fan_in / fan_in));
    }
  }
  CHECK(plan.lr_multipliers("adamw").size() == expected.size());
  CHECK_THROWS_WITH_AS(plan.lr_multipliers("lion"), doctest::Contains("defined for adamw and sgd"), Error);

  // At the base width muP is SP: every factor 1.
  const nn::MupPlan same = nn::mup_plan(model(16), 16);
  CHECK(same.readout_multiplier == 1);
  for (const nn::MupParameter& p : same.parameters) {
    INFO(p.name);
    CHECK(p.init_std == 1);
    CHECK(p.adam_lr == 1);
    CHECK(p.sgd_lr == 1);
  }
  // Narrower than the base: the factors invert (m = 1/2).
  const nn::MupPlan half = nn::mup_plan(model(8), 16);
  CHECK(half.readout_multiplier == 2);
  CHECK(half.parameters.front().sgd_lr == 0.5);
  nn::ModelConfig given_d_k = model(24);
  given_d_k.d_k = 12;  // as config.json stores it: at base width 17 it would be 8.5
  CHECK_THROWS_WITH_AS(nn::mup_plan(given_d_k, 17), doctest::Contains("must be whole"), Error);
  CHECK(nn::mup_plan(given_d_k, 16).parameters.size() == expected.size());  // 12 -> 8: as with d_k 0
}

TEST_CASE("a muP model: SP's draws, the readout weight scaled by sqrt(m) and its input by 1/m; SP at base width") {
  nn::AttentionModel sp(model(64, "sp"), 3), mup(model(64, "mup"), 3);
  CHECK(mup.readout_multiplier() == 0.25);
  const auto a = sp.named_parameters(), b = mup.named_parameters();
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    if (a[i].first == "head.weight")
      CHECK(xt::allclose(b[i].second.value(), a[i].second.value() * 2.0f));
    else
      CHECK(b[i].second.value() == a[i].second.value());
  }
  index_array tokens = xt::zeros<std::int64_t>({2, 9});
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens.data()[i] = static_cast<std::int64_t>(i % 20);
  // head.bias is 0 at init: the logits are (x / 4) @ (2 W) = SP's logits / 2
  CHECK(xt::allclose(mup.forward(tokens).value(), sp.forward(tokens).value() * 0.5f, 1e-5, 1e-6));
  nn::AttentionModel sp16(model(16, "sp"), 3), mup16(model(16, "mup"), 3);
  CHECK(mup16.forward(tokens).value() == sp16.forward(tokens).value());
}

TEST_CASE("per-parameter lr factors: AdamW's first step moves each parameter lr x factor") {
  Tensor p(xt::xarray<float>{1.0f, 1.0f}, true), q(xt::xarray<float>{1.0f, 1.0f}, true);
  auto opt = nn::make_optimizer("adamw", {p, q}, 0.1, SettingValues(nlohmann::json{{"eps", 1e-12}}));
  opt->set_lr_multipliers({1.0, 0.25});
  for (Tensor* t : {&p, &q}) {
    t->node()->grad = xt::xarray<float>{0.5f, -2.0f};
    t->node()->has_grad = true;
  }
  opt->step();  // the first AdamW step is lr · sign(g) per element
  CHECK(p.value()(0) == doctest::Approx(0.9));
  CHECK(q.value()(0) == doctest::Approx(1 - 0.025));
  CHECK(q.value()(1) == doctest::Approx(1 + 0.025));
  CHECK_THROWS_WITH_AS(opt->set_lr_multipliers({1.0}), "optimizer: 1 lr multipliers for 2 parameters", Error);
  CHECK_THROWS_AS(opt->set_lr_multipliers({1.0, 0.0}), Error);
}

TEST_CASE("--parametrization mup, --base-width: the run's optimizer, config.json, resume and old runs") {
  train::TrainConfig c = xgrad::testing::tiny_run(xgrad::testing::temp_dir("mup_run").string(), 8);
  c.model.d_model = 32;
  c.model.scale = "dk";
  c.model.parametrization = nn::Parametrization::mup;
  c.model.base_width = 16;
  c.optimizer = "sgd";
  c.lr = 0.01;
  train::train(c);
  std::ifstream in(fs::path(c.out) / "config.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  CHECK(j.at("parametrization") == "mup");
  CHECK(j.at("base_width") == 16);

  // The stored config (d_k and d_ff written resolved) builds the same plan, and the run's optimizer carries it.
  const train::TrainConfig stored = train::TrainConfig::from_json(j, "config.json");
  const auto task = stored.make_task();
  nn::AttentionModel m(train::model_config(stored, *task), stored.seed);
  CHECK(m.readout_multiplier() == 0.5);
  const auto opt = train::make_run_optimizer(stored, m);
  CHECK(opt->lr_multipliers() == nn::mup_plan(m.config(), 16).lr_multipliers("sgd"));
  CHECK(opt->lr_multipliers().front() == 2);  // tok_emb under SGD: fan_out ratio

  train::TrainConfig other = stored;
  train::set_setting(other, "base_width", 32);
  CHECK_THROWS_WITH_AS(train::check_same_run(stored, other), doctest::Contains("--base-width"), train::ConfigError);
  other = stored;
  train::set_setting(other, "parametrization", "sp");
  CHECK_THROWS_WITH_AS(train::check_same_run(stored, other), doctest::Contains("--parametrization"),
                       train::ConfigError);

  // A config.json from before the settings: sp.
  nlohmann::json old = j;
  old.erase("parametrization");
  old.erase("base_width");
  CHECK(train::TrainConfig::from_json(old, "old/config.json").model.parametrization == nn::Parametrization::sp);

  // Refused: another scaling than 1/d_k, and a base width the sizes do not scale to.
  train::TrainConfig bad = c;
  bad.model.scale = "sqrt_dk";
  CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("--parametrization mup scales attention scores by 1/d_k"),
                       train::ConfigError);
  bad = c;
  bad.model.n_heads = 2;  // d_k 16 would be 7.5 at base width 15
  bad.model.base_width = 15;
  CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("--base-width"), train::ConfigError);
  fs::remove_all(c.out);
}
