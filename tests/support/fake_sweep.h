// A sweep shaped like the default experiment (`xgrad experiment`: d_k 16, 64, 256, 1024; sqrt_dk and none; SGD at
// lr 0.01 and 0.03 with its momentum, AdamW at 0.001 with its betas and eps; seeds 0, 1, 2: 72 runs), written by the
// fake-run writer without training: for the tests of how the report draws such a sweep.
#pragma once

#include <cmath>
#include <cstddef>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "tests/support/fake_run.h"

namespace xgrad::testing {

/// The runs of default_experiment_like: `steps` rows each, the loss falling from ln 8 to a floor over a time that
/// grows with d_k for unscaled attention and stays for sqrt_dk (slower for SGD at its lower lr), a little different
/// per seed; W_q and W_k gradient norms falling; attention entropy and score std measured every 10 steps.
inline std::vector<FakeRun> default_experiment_runs(std::size_t steps) {
  struct Arm {
    std::string optimizer;
    double lr;
    nlohmann::json settings;
  };
  const std::vector<Arm> arms{{"sgd", 0.01, {{"momentum", 0.9}}},
                              {"sgd", 0.03, {{"momentum", 0.9}}},
                              {"adamw", 0.001, {{"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}}}};
  std::vector<FakeRun> runs;
  for (std::size_t d_k : {16, 64, 256, 1024})
    for (const std::string scale : {"sqrt_dk", "none"})
      for (const Arm& arm : arms)
        for (int seed = 0; seed < 3; ++seed) {
          FakeRun r;
          r.d_k = d_k, r.scale = scale, r.optimizer = arm.optimizer, r.lr = arm.lr, r.seed = seed;
          r.extra_config = arm.settings;
          const double slow = scale == "none" ? std::sqrt(static_cast<double>(d_k) / 16.0) : 1.0;
          const double tau = 0.15 * static_cast<double>(steps) * slow * (arm.lr == 0.01 ? 1.6 : 1.0);
          for (std::size_t i = 0; i < steps; ++i) {
            const double t = static_cast<double>(i), wiggle = 0.04 * std::sin(0.3 * t + seed);
            r.loss.push_back(0.05 + (std::log(8.0) - 0.05) * std::exp(-t / tau) * (1 + wiggle));
            r.w_q0.push_back(slow / (1 + t / tau)), r.w_k0.push_back(0.7 * slow / (1 + t / tau));
            const bool measured = i % 10 == 0 || i + 1 == steps;
            r.entropy.push_back(measured ? 2.0 / (1 + t / tau) : std::nan(""));
            r.score_std.push_back(measured ? slow * (1 + t / tau) : std::nan(""));
          }
          runs.push_back(r);
        }
  return runs;
}

/// Writes default_experiment_runs(steps) under dir/runs, one directory per run named by its settings.
inline void write_default_experiment_like(const std::filesystem::path& dir, std::size_t steps) {
  for (const FakeRun& r : default_experiment_runs(steps))
    write_run(dir / "runs" /
                  ("d_k" + std::to_string(r.d_k) + "_" + r.scale + "_" + r.optimizer + "_lr" + csv_number(r.lr) +
                   "_seed" + std::to_string(r.seed)),
              r);
}

}  // namespace xgrad::testing
