// AdamW's beta1, beta2 and eps as settings: the update takes its closed form with them, a run records them in
// config.json and refuses to resume with others, and a config.json written without them reads as the defaults.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "nn/optim.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_run.h"
#include "train/config.h"
#include "train/metrics_log.h"
#include "train/settings.h"
#include "train/trainer.h"

using namespace xgrad;
namespace fs = std::filesystem;

TEST_CASE("AdamW with given betas and eps: three steps against the closed form in double") {
  const double lr = 0.1, b1 = 0.8, b2 = 0.95, eps = 1e-2, wd = 0.1;
  Tensor p(xt::xarray<float>{0.5f, -1.0f, 2.0f}, true);
  auto opt = nn::make_optimizer(
      "adamw", {p}, lr,
      SettingValues(nlohmann::json{{"beta1", b1}, {"beta2", b2}, {"eps", eps}, {"weight_decay", wd}}));
  const std::vector<std::vector<double>> grads{{0.3, -0.2, 1.0}, {-0.1, 0.4, 0.5}, {0.2, 0.2, -0.7}};
  std::vector<double> w{0.5, -1.0, 2.0}, m(3, 0.0), v(3, 0.0);
  for (std::size_t t = 1; t <= grads.size(); ++t) {
    p.zero_grad();
    xt::xarray<float> g = xt::zeros<float>({3});
    for (std::size_t i = 0; i < 3; ++i) g(i) = static_cast<float>(grads[t - 1][i]);
    p.node()->grad = g;
    p.node()->has_grad = true;
    opt->step();
    for (std::size_t i = 0; i < 3; ++i) {
      const double gi = grads[t - 1][i];
      m[i] = b1 * m[i] + (1 - b1) * gi;
      v[i] = b2 * v[i] + (1 - b2) * gi * gi;
      const double m_hat = m[i] / (1 - std::pow(b1, t)), v_hat = v[i] / (1 - std::pow(b2, t));
      w[i] = w[i] * (1 - lr * wd) - lr * m_hat / (std::sqrt(v_hat) + eps);
      INFO("step " << t << ", element " << i);
      CHECK(p.value()(i) == doctest::Approx(w[i]).epsilon(1e-6));
    }
  }
  CHECK_THROWS_WITH_AS(nn::make_optimizer("adamw", {p}, lr, SettingValues(nlohmann::json{{"beta2", 1.0}})),
                       doctest::Contains("AdamW: betas must be in [0, 0.99999994] (below 1 in float), got beta1 0.9"),
                       Error);
  CHECK_THROWS_WITH_AS(nn::make_optimizer("adamw", {p}, lr, SettingValues(nlohmann::json{{"eps", 0.0}})),
                       doctest::Contains("AdamW: eps must be in [1.17549435e-38, 1] (a normal float), got 0"), Error);
  // the flags refuse them first, naming the range
  CHECK(check_setting_value(*train::find_setting("beta2"), 1.0) == "must be in [0, 0.99999994], got 1.0");
  CHECK(check_setting_value(*train::find_setting("eps"), 0.0) == "must be in [1.17549435e-38, 1], got 0.0");
}

TEST_CASE("AdamW and SGD: a beta or momentum below 1 in double that is 1 in float is refused; eps below FLT_MIN too") {
  Tensor p(xt::xarray<float>{0.5f, -1.0f, 2.0f}, true);
  // The update computes in float: 0.99999999 and 1 - 2^-53 round to 1.0f, which leaves the second moment at 0.
  for (const double beta : {0.99999999, 0.9999999999999999}) {
    INFO("beta " << beta);
    CHECK_THROWS_WITH_AS(nn::make_optimizer("adamw", {p}, 0.1, SettingValues(nlohmann::json{{"beta2", beta}})),
                         doctest::Contains("AdamW: betas must be in [0, 0.99999994] (below 1 in float)"), Error);
    CHECK_THROWS_WITH_AS(nn::make_optimizer("adamw", {p}, 0.1, SettingValues(nlohmann::json{{"beta1", beta}})),
                         doctest::Contains("AdamW: betas must be in [0, 0.99999994] (below 1 in float)"), Error);
    CHECK_THROWS_WITH_AS(nn::make_optimizer("sgd", {p}, 0.1, SettingValues(nlohmann::json{{"momentum", beta}})),
                         doctest::Contains("SGD: momentum must be in [0, 0.99999994] (below 1 in float)"), Error);
    CHECK(check_setting_value(*train::find_setting("beta2"), beta).rfind("must be in [0, 0.99999994], got", 0) == 0);
    CHECK(check_setting_value(*train::find_setting("beta1"), beta).rfind("must be in [0, 0.99999994], got", 0) == 0);
    CHECK(check_setting_value(*train::find_setting("momentum"), beta).rfind("must be in [0, 0.99999994], got", 0) == 0);
  }
  // eps 1e-46 is 0 in float, 1e-40 a subnormal that flush_denormals reads as 0.
  for (const double eps : {1e-320, 1e-46, 1e-40}) {
    INFO("eps " << eps);
    CHECK_THROWS_WITH_AS(nn::make_optimizer("adamw", {p}, 0.1, SettingValues(nlohmann::json{{"eps", eps}})),
                         doctest::Contains("AdamW: eps must be in [1.17549435e-38, 1] (a normal float)"), Error);
    CHECK(check_setting_value(*train::find_setting("eps"), eps).rfind("must be in [1.17549435e-38, 1], got", 0) == 0);
  }
  // The largest float below 1 is allowed, and the second moment then moves: the first steps are Adam's, not m / eps.
  auto opt = nn::make_optimizer("adamw", {p}, 0.1, SettingValues(nlohmann::json{{"beta2", 0.99999994}}));
  CHECK(check_setting_value(*train::find_setting("beta2"), 0.99999994) == "");
  p.zero_grad();
  p.node()->grad = xt::xarray<float>{1.0f, 1.0f, 1.0f};
  p.node()->has_grad = true;
  opt->step();
  CHECK(p.value()(0) == doctest::Approx(0.4).epsilon(1e-3));  // first step: lr x sign(g)
}

TEST_CASE("--beta1, --beta2, --eps: in config.json, read by the run, fixed on resume; absent keys read as defaults") {
  train::TrainConfig c = xgrad::testing::tiny_run(xgrad::testing::temp_dir("adamw_betas").string(), 6);
  c.settings.set("beta1", 0.5);
  c.settings.set("beta2", 0.9);
  c.settings.set("eps", 1e-6);
  train::train(c);
  std::ifstream in(fs::path(c.out) / "config.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  CHECK(j.at("beta1") == 0.5);
  CHECK(j.at("beta2") == 0.9);
  CHECK(j.at("eps") == 1e-6);

  // The run used them: from step 1 on (the first AdamW step is sign-like whatever the betas) its losses differ
  // from a run with the defaults.
  train::TrainConfig d = xgrad::testing::tiny_run(xgrad::testing::temp_dir("adamw_defaults").string(), 6);
  train::train(d);
  const auto with = train::read_metrics((fs::path(c.out) / "metrics.csv").string());
  const auto without = train::read_metrics((fs::path(d.out) / "metrics.csv").string());
  CHECK(with.rows[0][with.column("loss")] == without.rows[0][without.column("loss")]);
  CHECK(with.rows[3][with.column("loss")] != without.rows[3][without.column("loss")]);

  // Resuming with another value is refused, naming the flag.
  const train::TrainConfig stored = train::TrainConfig::from_json(j, "config.json");
  train::TrainConfig requested = stored;
  train::set_setting(requested, "beta2", 0.99);
  CHECK_THROWS_WITH_AS(train::check_same_run(stored, requested), doctest::Contains("--beta2"), train::ConfigError);
  CHECK_NOTHROW(train::check_same_run(stored, stored));

  // A config.json written before the keys existed (every other setting as this run's): today's defaults.
  nlohmann::json old = j;
  for (const char* key : {"beta1", "beta2", "eps"}) old.erase(key);
  const train::TrainConfig legacy = train::TrainConfig::from_json(old, "old/config.json");
  CHECK(train::get_setting(legacy, "beta1") == 0.9);
  CHECK(train::get_setting(legacy, "beta2") == 0.999);
  CHECK(train::get_setting(legacy, "eps") == 1e-8);
  const SettingValues values = train::component_values(legacy, "optimizer");
  CHECK(values.get<double>("eps") == 1e-8);
  fs::remove_all(c.out);
  fs::remove_all(d.out);
}
