// An optimizer entry's build gets each parameter's name and role, and the settings that select parameters
// (--weight-decay-params, muP's per-parameter learning rates) work for any registered optimizer that declares them
// and are refused, naming the optimizer, for one that does not.
#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/registry.h"
#include "nn/model.h"
#include "nn/mup.h"
#include "nn/optim.h"
#include "support/model_config.h"
#include "support/temp_dir.h"
#include "support/tiny_run.h"
#include "train/config.h"
#include "train/settings.h"
#include "train/trainer.h"

using namespace xgrad;
using nn::ParameterRole;

namespace {

// Plain gradient descent that records what its build was given: p -= lr_i (g + wd_i p).
class RecordingDescent : public nn::Optimizer {
 public:
  RecordingDescent(std::vector<nn::OptimizerParameter> params, double lr, double weight_decay, bool decay_matrices_only)
      : Optimizer(std::move(params), lr, decay_matrices_only), weight_decay_(weight_decay) {}
  void step() override {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (!params_[i].has_grad()) continue;
      const auto lr = static_cast<float>(lr_of(i)), wd = static_cast<float>(weight_decay_of(i, weight_decay_));
      float* w = params_[i].mutable_value().data();
      const float* g = params_[i].grad().data();
      for (std::size_t j = 0; j < params_[i].numel(); ++j) w[j] -= lr * (g[j] + wd * w[j]);
    }
  }
  nn::OptimizerState state() const override { return {}; }
  void load_state(const nn::OptimizerState&) override {}
  std::vector<std::string> state_kinds() const override { return {}; }

 private:
  double weight_decay_;
};

// What the last build of test_descent received.
std::vector<nn::OptimizerParameter>& built_with() {
  static std::vector<nn::OptimizerParameter> params;
  return params;
}

// test_descent declares the shared weight-decay settings and muP's SGD column; test_bare declares neither.
nn::OptimizerEntry descent_entry(const std::string& name, bool declares_selection) {
  nn::OptimizerEntry e;
  e.name = name;
  e.description = "gradient descent recording its parameters (a test's own)";
  e.order = 900;
  if (declares_selection) {
    e.settings = {nn::weight_decay_setting(), nn::weight_decay_params_setting()};
    e.mup_lr = nn::MupLearningRates::sgd;
  }
  e.build = [declares_selection](std::vector<nn::OptimizerParameter> params, double lr,
                                 const SettingValues& v) -> std::unique_ptr<nn::Optimizer> {
    built_with() = params;
    if (!declares_selection) return std::make_unique<RecordingDescent>(std::move(params), lr, 0.0, false);
    return std::make_unique<RecordingDescent>(std::move(params), lr, v.get<double>("weight_decay"),
                                              nn::decays_matrices_only(v));
  };
  return e;
}

const Registration<nn::OptimizerEntry> descent_registration{descent_entry("test_descent", true)};
const Registration<nn::OptimizerEntry> bare_registration{descent_entry("test_bare", false)};

std::map<std::string, ParameterRole> roles_of(const nn::AttentionModel& model) {
  std::map<std::string, ParameterRole> out;
  for (const nn::OptimizerParameter& p : nn::optimizer_parameters(model.named_parameters())) out[p.name] = p.role;
  return out;
}

}  // namespace

TEST_CASE("parameter roles: embeddings, readout, gains (LayerNorm and a scaling's scalars), biases, hidden matrices") {
  nn::ModelConfig c = testing::model_config(11, 6, 8, 2);
  c.layer_norm = true;
  c.bias = true;
  c.scale = "learned";
  const nn::AttentionModel model(c, 1);
  const std::map<std::string, ParameterRole> roles = roles_of(model);
  const std::map<std::string, ParameterRole> expected{{"tok_emb.weight", ParameterRole::embedding},
                                                      {"pos_emb.weight", ParameterRole::embedding},
                                                      {"blocks.0.ln_1.weight", ParameterRole::gain},
                                                      {"blocks.0.ln_1.bias", ParameterRole::bias},
                                                      {"blocks.0.attn.w_q.weight", ParameterRole::hidden_matrix},
                                                      {"blocks.0.attn.w_o.weight", ParameterRole::hidden_matrix},
                                                      {"blocks.0.attn.qk_gain", ParameterRole::gain},
                                                      {"blocks.0.mlp.fc_in.weight", ParameterRole::hidden_matrix},
                                                      {"blocks.0.mlp.fc_out.bias", ParameterRole::bias},
                                                      {"ln_f.weight", ParameterRole::gain},
                                                      {"head.weight", ParameterRole::readout},
                                                      {"head.bias", ParameterRole::bias}};
  for (const auto& name_role : expected) {
    const std::string& name = name_role.first;
    CAPTURE(name);
    REQUIRE(roles.count(name) == 1);
    CHECK(roles.at(name) == name_role.second);
  }
  // The roles of weights are those of 2 or more dimensions: weight_decay_params "matrices" selects the same
  // parameters by role as it did by shape.
  for (const auto& named : model.named_parameters()) {
    CAPTURE(named.first);
    CHECK(nn::is_matrix(roles.at(named.first)) == (named.second.dim() >= 2));
  }

  // The tied table is named once, as tok_emb.weight, and keeps the embedding's role; the readout bias stays a bias.
  c.tie_word_embeddings = true;
  const std::map<std::string, ParameterRole> tied = roles_of(nn::AttentionModel(c, 1));
  CHECK(tied.at("tok_emb.weight") == ParameterRole::embedding);
  CHECK(tied.count("head.weight") == 0);
  CHECK(tied.at("head.bias") == ParameterRole::bias);
}

TEST_CASE("parameter roles have one name each") {
  std::vector<std::string> names;
  for (ParameterRole r : {ParameterRole::hidden_matrix, ParameterRole::embedding, ParameterRole::readout,
                          ParameterRole::gain, ParameterRole::bias})
    names.emplace_back(nn::parameter_role_name(r));
  CHECK(names == std::vector<std::string>{"hidden_matrix", "embedding", "readout", "gain", "bias"});
}

TEST_CASE("the run's optimizer is built with every parameter's name and role, in named_parameters() order") {
  train::TrainConfig c = testing::tiny_run(testing::temp_dir("roles_build").string());
  train::set_setting(c, "optimizer", "test_descent");
  const auto task = c.validate();
  const nn::AttentionModel model(train::model_config(c, *task), c.seed);
  const auto opt = train::make_run_optimizer(c, model);
  const auto named = model.named_parameters();
  REQUIRE(built_with().size() == named.size());
  REQUIRE(opt->names().size() == named.size());
  for (std::size_t i = 0; i < named.size(); ++i) {
    CAPTURE(named[i].first);
    CHECK(built_with()[i].name == named[i].first);
    CHECK(built_with()[i].tensor.node() == named[i].second.node());
    CHECK(built_with()[i].role == nn::parameter_role(named[i].first, named[i].second.shape()));
    CHECK(opt->names()[i] == named[i].first);
    CHECK(opt->roles()[i] == built_with()[i].role);
  }
}

TEST_CASE("--weight-decay-params matrices: an optimizer declaring it decays hidden matrices, embeddings, readout") {
  train::TrainConfig c = testing::tiny_run(testing::temp_dir("roles_decay").string());
  train::set_setting(c, "optimizer", "test_descent");
  train::set_setting(c, "weight_decay", 0.5);
  train::set_setting(c, "weight_decay_params", "matrices");
  const auto task = c.validate();
  nn::AttentionModel model(train::model_config(c, *task), c.seed);
  const auto opt = train::make_run_optimizer(c, model);
  CHECK(opt->decay_matrices_only());
  // Zero gradients: a step changes a parameter by its weight decay alone.
  std::vector<xt::xarray<float>> before;
  for (Tensor p : model.parameters()) {
    before.push_back(p.value());
    p.node()->grad = xt::zeros<float>(p.value().shape());
    p.node()->has_grad = true;
  }
  opt->step();
  const auto named = model.named_parameters();
  for (std::size_t i = 0; i < named.size(); ++i) {
    CAPTURE(named[i].first);
    const bool decayed = nn::is_matrix(opt->roles()[i]);
    CHECK((named[i].second.value() == before[i]) == !decayed);
  }
}

TEST_CASE("--weight-decay-params and --parametrization mup are refused naming an optimizer that declares neither") {
  train::TrainConfig c = testing::tiny_run(testing::temp_dir("roles_refused").string());
  train::set_setting(c, "optimizer", "test_bare");
  c.settings.set("weight_decay_params", "matrices");
  CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("--weight-decay-params is read only by --optimizer"),
                       train::ConfigError);
  CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("(the optimizer is test_bare)"), train::ConfigError);

  train::TrainConfig mup = testing::tiny_run(testing::temp_dir("roles_mup").string());
  train::set_setting(mup, "scale", "dk");
  train::set_setting(mup, "parametrization", "mup");
  train::set_setting(mup, "base_width", 8);
  train::set_setting(mup, "optimizer", "test_bare");
  CHECK_THROWS_WITH_AS(mup.validate(), doctest::Contains("--parametrization mup"), train::ConfigError);
  CHECK_THROWS_WITH_AS(mup.validate(), doctest::Contains("--optimizer test_bare"), train::ConfigError);
  CHECK_THROWS_WITH_AS(nn::MupPlan().lr_multipliers("test_bare"), doctest::Contains("test_bare"), Error);
}

TEST_CASE("--parametrization mup: an optimizer declaring muP's SGD column gets the SGD factors, by parameter") {
  train::TrainConfig c = testing::tiny_run(testing::temp_dir("roles_mup_sgd").string());
  train::set_setting(c, "scale", "dk");
  train::set_setting(c, "parametrization", "mup");
  train::set_setting(c, "base_width", 8);
  train::set_setting(c, "optimizer", "test_descent");
  const auto task = c.validate();
  const nn::AttentionModel model(train::model_config(c, *task), c.seed);
  const auto opt = train::make_run_optimizer(c, model);
  const nn::MupPlan plan = nn::mup_plan(model.config(), 8);
  CHECK(opt->lr_multipliers() == plan.lr_multipliers(nn::MupLearningRates::sgd));
  CHECK(opt->lr_multipliers() == plan.lr_multipliers("sgd"));
  CHECK(opt->lr_multipliers().front() == 2);  // tok_emb under SGD at twice the base width: fan_out ratio
}
