// Learning-rate schedules: the registered schedules against their closed forms, and the lr column of metrics.csv
// showing the rate each step used.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "nn/lr_schedule.h"
#include "train/metrics_log.h"
#include "train/trainer.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_run.h"

using namespace xgrad;
namespace fs = std::filesystem;

namespace {
double at(const std::string& name, double lr, std::size_t step, std::size_t steps, const nlohmann::json& settings) {
  const auto& entry = nn::LRScheduleRegistry::instance().at(name);
  return entry.lr_at(lr, step, steps, resolve_settings(entry.settings, settings));
}
}  // namespace

TEST_CASE("schedules: constant, linear warmup and cosine decay take their closed forms") {
  // constant: --lr at every step; with warmup, lr (s + 1) / W for s < W
  CHECK(at("constant", 0.5, 0, 100, {}) == 0.5);
  CHECK(at("constant", 0.5, 99, 100, {}) == 0.5);
  CHECK(at("constant", 0.5, 0, 100, {{"warmup_steps", 10}}) == doctest::Approx(0.05));
  CHECK(at("constant", 0.5, 4, 100, {{"warmup_steps", 10}}) == doctest::Approx(0.25));
  CHECK(at("constant", 0.5, 9, 100, {{"warmup_steps", 10}}) == 0.5);
  CHECK(at("constant", 0.5, 10, 100, {{"warmup_steps", 10}}) == 0.5);
  // cosine from lr = 1 to min_lr = 0.1 over steps [10, 110): min + (lr - min) (1 + cos(pi t / 100)) / 2
  const nlohmann::json cos{{"warmup_steps", 10}, {"min_lr", 0.1}};
  CHECK(at("cosine", 1.0, 0, 110, cos) == doctest::Approx(0.1));  // warmup: 1 * 1/10
  CHECK(at("cosine", 1.0, 10, 110, cos) == doctest::Approx(1.0));
  CHECK(at("cosine", 1.0, 60, 110, cos) == doctest::Approx(0.55));  // halfway: cos(pi/2) = 0
  CHECK(at("cosine", 1.0, 35, 110, cos) == doctest::Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.25))));
  CHECK(at("cosine", 1.0, 109, 110, cos) == doctest::Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.99))));
  // every rate of a run is positive and, after warmup, never rises
  double previous = 2;
  for (std::size_t s = 10; s < 110; ++s) {
    const double lr = at("cosine", 1.0, s, 110, cos);
    CHECK(lr > 0.1);
    CHECK(lr <= previous);
    previous = lr;
  }
  CHECK(at("cosine", 1.0, 50, 100, {}) == doctest::Approx(0.5));  // min_lr defaults to 0, no warmup
}

TEST_CASE("metrics.csv's lr column holds the scheduled rate each step used, recorded in config.json") {
  train::TrainConfig c = xgrad::testing::tiny_run(xgrad::testing::temp_dir("cosine").string(), 24);
  c.lr = 0.01;
  c.lr_schedule = "cosine";
  c.settings.set("warmup_steps", 4);
  c.settings.set("min_lr", 0.001);
  train::train(c);
  const train::MetricsTable t = train::read_metrics((fs::path(c.out) / "metrics.csv").string());
  REQUIRE(t.rows.size() == 24);
  for (std::size_t s = 0; s < 24; ++s) {
    INFO("step " << s);
    CHECK(t.rows[s][t.column("lr")] == doctest::Approx(nn::cosine_lr(0.01, 0.001, s, 4, 24)).epsilon(1e-6));
  }
  std::ifstream in(fs::path(c.out) / "config.json");
  const auto j = nlohmann::json::parse(in);
  CHECK(j.at("lr_schedule") == "cosine");
  CHECK(j.at("warmup_steps") == 4);
  CHECK(j.at("min_lr") == 0.001);
  fs::remove_all(c.out);
}
