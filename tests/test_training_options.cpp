// Training options of the science presets: learning-rate schedules against their closed forms (and the lr column of
// metrics.csv showing the rate each step used), and the z-loss column and coefficient.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "autograd/ops.h"
#include "nn/lr_schedule.h"
#include "nn/model.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_run.h"
#include "train/config.h"
#include "train/metrics_log.h"
#include "train/trainer.h"

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

TEST_CASE("z_loss column: mean (log Z)^2 of step 0's readout; --z-loss adds it to the loss and keeps log Z smaller") {
  train::TrainConfig c = xgrad::testing::tiny_run(xgrad::testing::temp_dir("zloss_off").string(), 150);
  c.lr = 0.02;
  train::train(c);
  // Step 0's value, recomputed from the same initial weights and batch.
  const auto task = c.make_task();
  nn::AttentionModel model(train::model_config(c, *task), c.seed);
  const data::Batch batch = task->batch(c.data_seed, 0, c.batch_size);
  const nn::TargetLoss out = nn::loss_at_targets(model, batch.inputs, batch.targets);
  const train::MetricsTable off = train::read_metrics((fs::path(c.out) / "metrics.csv").string());
  CHECK(off.rows[0][off.column("z_loss")] == doctest::Approx(z_loss(out.logits, out.targets).item()).epsilon(1e-5));
  CHECK(off.rows[0][off.column("loss")] == doctest::Approx(out.loss.item()).epsilon(1e-5));

  train::TrainConfig with = c;
  with.out = xgrad::testing::temp_dir("zloss_on").string();
  with.z_loss = 0.1;
  train::train(with);
  const train::MetricsTable on = train::read_metrics((fs::path(with.out) / "metrics.csv").string());
  // Step 0 is before any update: the same z_loss and cross-entropy; the gradient differs, so later steps do.
  CHECK(on.rows[0][on.column("z_loss")] == off.rows[0][off.column("z_loss")]);
  CHECK(on.rows[0][on.column("loss")] == off.rows[0][off.column("loss")]);
  CHECK(on.rows[0][on.column("grad_norm")] != off.rows[0][off.column("grad_norm")]);
  INFO("final z_loss without: " << off.rows.back()[off.column("z_loss")]
                                << ", with --z-loss 0.1: " << on.rows.back()[on.column("z_loss")]);
  CHECK(on.rows.back()[on.column("z_loss")] < 0.5 * off.rows.back()[off.column("z_loss")]);
  std::ifstream in(fs::path(with.out) / "config.json");
  CHECK(nlohmann::json::parse(in).at("z_loss") == 0.1);
  fs::remove_all(c.out);
  fs::remove_all(with.out);
}
