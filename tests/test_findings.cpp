// What the findings of `xgrad compare` say the numbers mean, on hand-written runs shaped like the independent
// reference configuration's (kv_recall, SGD and Adam, d_k 16 to 256, three seeds): where both arms solved the task,
// at which point of a run the W_q gradients compare, learning-rate sensitivity and steps to a threshold seed by
// seed, the score gradient relative to the loss, and how many seeds diverged.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "report/markdown.h"
#include "report/runs.h"
#include "report/stats.h"
#include "tests/support/fake_run.h"
#include "tests/support/temp_dir.h"

using namespace xgrad::train;
using namespace xgrad::testing;
namespace fs = std::filesystem;

namespace {

const double inf_value = std::numeric_limits<double>::infinity();

std::vector<double> constant(std::size_t n, double v) { return std::vector<double>(n, v); }

Comparison analyse_dir(const fs::path& dir, double loss_threshold = 1.0) {
  std::vector<RunRecord> runs;
  for (const auto& d : find_run_dirs({dir.string()})) runs.push_back(load_run(d));
  return analyse_runs(std::move(runs), loss_threshold, 0.9, 1);
}

std::string name_of(const FakeRun& r) {
  return "dk" + std::to_string(r.d_k) + "-" + r.scale + "-" + r.optimizer + "-lr" + csv_number(r.lr) + "-s" +
         std::to_string(r.seed);
}

// An SGD run at `lr`: loss 4 at step 0, then `final_loss` for 20 steps; diverged: inf at step 1 (planned 21 steps).
FakeRun sgd_run(const std::string& scale, double lr, int seed, double final_loss, bool diverged) {
  FakeRun r;
  r.scale = scale;
  r.optimizer = "sgd";
  r.lr = lr;
  r.seed = seed;
  r.loss = {4.0};
  if (diverged) {
    r.loss.push_back(inf_value);
    r.diverged = true;
    r.diverged_step = 1;
    r.steps = 21;
  } else {
    const auto tail = constant(20, final_loss);
    r.loss.insert(r.loss.end(), tail.begin(), tail.end());
  }
  return r;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

std::string findings_text(const Comparison& c) {
  std::string out;
  for (const auto& l : findings(c)) out += l.text + "\n";
  return out;
}

}  // namespace

TEST_CASE("LR sensitivity not decided where both diverged says in how many runs each scaling diverged") {
  // The reference runs: at lr 0.3 unscaled diverged in 2 of 3 seeds, sqrt_dk in 1 of 3; "both scalings diverged"
  // alone read as every run.
  const TempDir root("findings_diverged_counts");
  for (int seed = 0; seed < 3; ++seed) {
    for (const std::string scale : {"none", "sqrt_dk"}) {
      write_run(root / name_of(sgd_run(scale, 0.1, seed, 0.5, false)), sgd_run(scale, 0.1, seed, 0.5, false));
      const bool diverged = scale == "none" ? seed < 2 : seed == 0;
      const FakeRun high = sgd_run(scale, 0.3, seed, 0.6, diverged);
      write_run(root / name_of(high), high);
    }
  }
  const Comparison cmp = analyse_dir(root);
  REQUIRE(cmp.lr_groups.size() == 2);
  const LrComparison lr = compare_lr_sensitivity(cmp, cmp.lr_groups[0], cmp.lr_groups[1]);
  CHECK_FALSE(lr.decided);
  CHECK(lr.reason.find("both scalings diverged at lr 0.3 (unscaled in 2 of 3 runs, sqrt_dk in 1 of 3)") !=
        std::string::npos);
  const StoryChecks checks = story_checks(cmp);
  INFO(joined(checks.undecided));
  CHECK(joined(checks.undecided)
            .find("LR sensitivity not decided: both scalings diverged at lr 0.3 (unscaled in 2 "
                  "of 3 runs, sqrt_dk in 1 of 3)") != std::string::npos);
}
