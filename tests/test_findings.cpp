// What the findings of `xgrad compare` say the numbers mean, on hand-written runs shaped like the independent
// reference configuration's (kv_recall, SGD and Adam, d_k 16 to 256, three seeds): where both arms solved the task,
// at which point of a run the W_q gradients compare, learning-rate sensitivity and steps to a threshold seed by
// seed, the score gradient relative to the loss, and how many seeds diverged.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "report/markdown.h"
#include "report/runs.h"
#include "report/stats.h"
#include "report/summary.h"
#include "tests/support/compare_findings.h"
#include "tests/support/fake_run.h"
#include "tests/support/temp_dir.h"

using namespace xgrad::report;
using namespace xgrad::testing;
namespace fs = std::filesystem;

namespace {

Comparison analyse_dir(const fs::path& dir) { return analyse_dirs({dir.string()}); }

std::string name_of(const FakeRun& r) {
  return "dk" + std::to_string(r.d_k) + "-" + r.scale + "-" + r.optimizer + "-lr" + csv_number(r.lr) + "-s" +
         std::to_string(r.seed);
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
  const Verdict lr = lr_verdict(cmp, cmp.lr_groups[0], cmp.lr_groups[1]);
  CHECK(lr.outcome == Outcome::not_decided);
  CHECK(lr.why_not == "both_diverged");
  const auto v = verdict_of(cmp, "less_lr_sensitive", "sqrt_dk");
  REQUIRE(v);
  CHECK(v->outcome == Outcome::not_decided);
  CHECK(v->why_not == "both_diverged");
  // Where: lr 0.3, sqrt_dk in 1 of 3 runs, unscaled in 2 of 3.
  CHECK(numbers_in(why_not_text(*v)) == std::vector<double>{0.3, 1, 3, 2, 3});
}

namespace {

// An Adam run at d_k `d_k`: loss 2 for 10 steps, then `final_loss` with accuracy `final_accuracy` for 20 steps.
FakeRun adam_run(std::size_t d_k, const std::string& scale, int seed, double final_loss, double final_accuracy) {
  FakeRun r;
  r.d_k = d_k;
  r.scale = scale;
  r.optimizer = "adam";
  r.lr = 0.001;
  r.seed = seed;
  r.loss = constant(10, 2.0);
  r.accuracy = constant(10, 0.1);
  const auto tail = constant(20, final_loss);
  r.loss.insert(r.loss.end(), tail.begin(), tail.end());
  const auto acc = constant(20, final_accuracy);
  r.accuracy.insert(r.accuracy.end(), acc.begin(), acc.end());
  return r;
}

void write(const fs::path& root, const FakeRun& r) { write_run(root / name_of(r), r); }

}  // namespace

TEST_CASE("where both arms solved the task (accuracy and a near-zero loss in every seed) the findings say so apart") {
  // The reference runs at d_k 16: both arms at accuracy 1.000 with final loss 0.003, unscaled higher by more than 2%
  // in every seed, read as "unscaled trains worse (0.003 ± 0.001 vs 0.003 ± 0.001)".
  const TempDir root("findings_solved");
  for (int seed = 0; seed < 3; ++seed) {
    write(root, adam_run(16, "none", seed, 0.0036 + 0.001 * seed, 1.0));
    write(root, adam_run(16, "sqrt_dk", seed, 0.0030 + 0.001 * seed, 1.0));
    // At d_k 64 unscaled did not solve it: a comparison like any other.
    write(root, adam_run(64, "none", seed, 1.0, 0.5));
    write(root, adam_run(64, "sqrt_dk", seed, 0.003, 1.0));
    // At d_k 256 both reach the accuracy threshold but unscaled keeps a loss of 0.2: not solved.
    write(root, adam_run(256, "none", seed, 0.2, 0.95));
    write(root, adam_run(256, "sqrt_dk", seed, 0.003, 1.0));
  }
  const Comparison cmp = analyse_dir(root);
  REQUIRE(cmp.arms.size() == 6);
  CHECK(solved(cmp.arms[0], cmp));
  CHECK(solved(cmp.arms[1], cmp));
  CHECK_FALSE(solved(cmp.arms[2], cmp));
  CHECK(solved(cmp.arms[3], cmp));
  CHECK_FALSE(solved(cmp.arms[4], cmp));  // final loss 0.2 > kSolvedLoss
  CHECK(kSolvedLoss == doctest::Approx(0.01));

  const std::string all = findings_text(cmp);
  INFO(all);
  // Better in 2 of 3 comparisons; both solved the task in 1, counted apart.
  CHECK(numbers_in(findings_of(cmp, "tolerance loss").at(0).text) == std::vector<double>{2, 3, 1});

  const auto at16 = verdict_of(cmp, "trains_better", "sqrt_dk", 16);
  REQUIRE(at16);
  CHECK(at16->outcome == Outcome::not_decided);
  CHECK(at16->why_not == "both_solved");
  CHECK(verdict_of(cmp, "trains_better", "sqrt_dk", 64)->outcome == Outcome::better);
  const auto at256 = verdict_of(cmp, "trains_better", "sqrt_dk", 256);
  CHECK(at256->outcome == Outcome::better);
  CHECK(at256->baseline_value == doctest::Approx(0.2));
}

TEST_CASE("both arms solved: the final loss decides nothing, and the glossary gives the rule with its thresholds") {
  const TempDir root("findings_solved_md");
  for (int seed = 0; seed < 2; ++seed) {
    write(root / "solved", adam_run(16, "none", seed, 0.004, 1.0));
    write(root / "solved", adam_run(16, "sqrt_dk", seed, 0.003, 1.0));
    write(root / "not", adam_run(16, "none", seed, 1.0, 0.5));
    write(root / "not", adam_run(16, "sqrt_dk", seed, 0.003, 1.0));
  }
  CHECK(verdict_of(analyse_dir(root / "solved"), "trains_better", "sqrt_dk")->why_not == "both_solved");
  CHECK(verdict_of(analyse_dir(root / "not"), "trains_better", "sqrt_dk")->outcome == Outcome::better);
  const std::string md = report_markdown(analyse_dir(root / "solved"), ReportContext{});
  const std::size_t entry = md.find("<a id=\"" + glossary_anchor("solved") + "\"></a>");
  REQUIRE(entry != std::string::npos);
  const std::string line = md.substr(entry, md.find('\n', entry) - entry);
  CHECK(numbers_in(line) == std::vector<double>{0.9, 0.01});  // the accuracy and loss thresholds
}

namespace {

// An Adam run whose loss is 2 until `step`, then 0.5 (threshold 1): it reaches the threshold exactly there; -1: never.
FakeRun reaching_at(const std::string& scale, int seed, long step) {
  FakeRun r;
  r.d_k = 64;
  r.scale = scale;
  r.optimizer = "adam";
  r.lr = 0.001;
  r.seed = seed;
  r.loss = constant(500, 2.0);
  if (step >= 0)
    for (std::size_t i = static_cast<std::size_t>(step); i < 500; ++i) r.loss[i] = 0.5;
  return r;
}

}  // namespace

TEST_CASE("steps to a threshold: the unscaled seeds that reach it are compared with the same seed's scaled run") {
  // The reference runs at d_k 64: unscaled reaches the threshold in 2 of 3 seeds, at steps 190 and 443, sqrt_dk in
  // every seed (155, 178, 160). The mean step 316 ± 179 is within the seed sd of sqrt_dk's, so the report said "the
  // unscaled seeds that reach it are not later", though each is later than the same seed scaled.
  const TempDir root("findings_steps_by_seed");
  const std::vector<long> none{190, 443, -1}, scaled{155, 178, 160};
  for (int seed = 0; seed < 3; ++seed) {
    write(root, reaching_at("none", seed, none[static_cast<std::size_t>(seed)]));
    write(root, reaching_at("sqrt_dk", seed, scaled[static_cast<std::size_t>(seed)]));
  }
  const Comparison cmp = analyse_dir(root);
  REQUIRE(cmp.arms.size() == 2);
  // Seed by seed, never reached counting as the latest step: sqrt_dk is sooner in every seed.
  const auto v = verdict_of(cmp, "reaches_loss_sooner", "sqrt_dk");
  REQUIRE(v);
  CHECK(v->outcome == Outcome::better);
  CHECK(v->n_shared == 3);
  CHECK(v->seeds_better == 3);
  // Accuracy is never reached on either side: nothing is decided.
  CHECK(verdict_of(cmp, "reaches_accuracy_sooner", "sqrt_dk")->why_not == "never_reached");
}

TEST_CASE("LR sensitivity is decided seed by seed where the scalings share seeds, not within the largest seed sd") {
  // The reference runs at d_k 64 (SGD): unscaled failed at lr 0.3 in every seed (one diverged) and learned at 0.1;
  // sqrt_dk learned at both in every seed. The seed sd of unscaled's objective at 0.3 (1.5) exceeded the difference
  // of the sensitivities, so the report said "about the same".
  const TempDir root("findings_lr_paired");
  const std::vector<double> none_low{0.01, 0.02, 0.03}, none_high{1.0, 2.0, 0.0};
  for (int seed = 0; seed < 3; ++seed) {
    const auto s = static_cast<std::size_t>(seed);
    for (const FakeRun& r :
         {sgd_run("none", 0.1, seed, none_low[s], false), sgd_run("none", 0.3, seed, none_high[s], seed == 2),
          sgd_run("sqrt_dk", 0.1, seed, 0.02, false), sgd_run("sqrt_dk", 0.3, seed, 0.03, false)})
      write(root, r);
  }
  const Comparison cmp = analyse_dir(root);
  REQUIRE(cmp.lr_groups.size() == 2);
  const Verdict lr = lr_verdict(cmp, cmp.lr_groups[0], cmp.lr_groups[1]);
  CHECK(lr.outcome == Outcome::worse);
  CHECK(lr.paired);
  CHECK(lr.n_shared == 3);
  CHECK(lr.seeds_worse == 3);
  CHECK(lr.seeds_better == 0);
  CHECK(lr.seeds_same == 0);
  // The old rule: the difference is within the larger seed sd of the objective (2% of the mean objectives here).
  double sd = 0;
  for (const LrGroup* g : {&cmp.lr_groups[0], &cmp.lr_groups[1]})
    for (auto a : g->arms) sd = std::max(sd, cmp.arms[a].stat("lr_objective").sd);
  CHECK(std::fabs(lr.subject_value - lr.baseline_value) < sd);
  const auto v = verdict_of(cmp, "less_lr_sensitive", "sqrt_dk");
  REQUIRE(v);
  CHECK(v->outcome == Outcome::better);
  CHECK(v->paired);
  CHECK(v->seeds_better == 3);
  const std::string all = findings_text(cmp);
  INFO(all);
  CHECK(numbers_in(findings_of(cmp, "LR sensitivity").at(0).text) == std::vector<double>{1, 1});
}

TEST_CASE("LR sensitivity seed by seed: seeds that disagree decide nothing, seeds within 2% are about the same") {
  const TempDir root("findings_lr_disagree");
  for (int seed = 0; seed < 2; ++seed) {
    // Seed 0: unscaled fails at lr 0.3; seed 1: sqrt_dk does.
    write(root / "disagree", sgd_run("none", 0.1, seed, 0.02, false));
    write(root / "disagree", sgd_run("none", 0.3, seed, seed == 0 ? 2.0 : 0.02, false));
    write(root / "disagree", sgd_run("sqrt_dk", 0.1, seed, 0.02, false));
    write(root / "disagree", sgd_run("sqrt_dk", 0.3, seed, seed == 1 ? 2.0 : 0.02, false));
    write(root / "same", sgd_run("none", 0.1, seed, 0.5, false));
    write(root / "same", sgd_run("none", 0.3, seed, 0.6 + 0.5 * seed, false));
    write(root / "same", sgd_run("sqrt_dk", 0.1, seed, 0.5, false));
    write(root / "same", sgd_run("sqrt_dk", 0.3, seed, 0.61 + 0.5 * seed, false));
  }
  {
    const Comparison cmp = analyse_dir(root / "disagree");
    const Verdict lr = lr_verdict(cmp, cmp.lr_groups[0], cmp.lr_groups[1]);
    CHECK(lr.outcome == Outcome::not_decided);
    CHECK(lr.paired);
    CHECK(lr.why_not == "seeds_disagree");
    CHECK(lr.seeds_worse == 1);
    CHECK(lr.seeds_better == 1);
  }
  {
    const Comparison cmp = analyse_dir(root / "same");
    const Verdict lr = lr_verdict(cmp, cmp.lr_groups[0], cmp.lr_groups[1]);
    CHECK(lr.outcome == Outcome::same);
    CHECK(lr.seeds_same == 2);
    const auto v = verdict_of(cmp, "less_lr_sensitive", "sqrt_dk");
    REQUIRE(v);
    CHECK(v->outcome == Outcome::same);
    CHECK(v->baseline_value == doctest::Approx(0.175));
    CHECK(v->subject_value == doctest::Approx(0.18));
    const std::string all = findings_text(cmp);
    INFO(all);
    // Less sensitive in 0 of 1 comparison, about as sensitive in 1.
    CHECK(numbers_in(findings_of(cmp, "LR sensitivity").at(0).text) == std::vector<double>{0, 1, 1});
  }
}

namespace {

// d_k 256, Adam, one seed, 50 steps, loss threshold 1. Unscaled: W_q gradient 0.01 at step 0, exactly zero on steps
// 1-10 (20%), then 0.3 while the loss stays at 2 (never reaching the threshold). sqrt_dk: 0.5 until the loss
// reaches the threshold at step 10, then 0.001 on a loss near zero.
void write_long_loss_runs(const fs::path& root) {
  FakeRun none;
  none.d_k = 256;
  none.optimizer = "adam";
  none.lr = 0.001;
  none.loss = constant(50, 2.0);
  none.w_q0 = constant(50, 0.3);
  none.w_q0[0] = 0.01;
  for (std::size_t i = 1; i <= 10; ++i) none.w_q0[i] = 0.0;
  none.w_q1 = constant(50, 0.0);
  write(root, none);
  FakeRun scaled = none;
  scaled.scale = "sqrt_dk";
  scaled.loss = constant(50, 0.001);
  scaled.w_q0 = constant(50, 0.001);
  for (std::size_t i = 0; i < 10; ++i) scaled.loss[i] = 2.0;
  for (std::size_t i = 0; i <= 10; ++i) scaled.w_q0[i] = 0.5;
  write(root, scaled);
}

}  // namespace

TEST_CASE("W_q gradients compare at step 0, before the loss threshold and over all steps, with the zero shares") {
  // The reference runs at d_k 256 (Adam): the mean W_q gradient norm over all steps was 0.49 unscaled vs 0.022
  // scaled, mostly because unscaled kept a non-zero loss longer, while its gradient was exactly 0 on 19.8% of its
  // steps; "unscaled W_q gradients are not smaller but larger (9 of 9)" said nothing of when.
  const TempDir root("findings_grad_points");
  write_long_loss_runs(root);
  const Comparison cmp = analyse_dir(root);
  REQUIRE(cmp.arms.size() == 2);
  const RunStats& none = cmp.stats[cmp.arms[0].kept.at(0)];
  const RunStats& scaled = cmp.stats[cmp.arms[1].kept.at(0)];
  CHECK(none["grad_norm_step0_w_q"] == doctest::Approx(0.01));
  CHECK(scaled["grad_norm_step0_w_q"] == doctest::Approx(0.5));
  CHECK(none["grad_norm_step0_w_k"] == doctest::Approx(std::sqrt(2.0)));
  // Before the threshold: every step for unscaled (never reached), steps 0-10 for sqrt_dk (reached at step 10).
  CHECK(none["mean_grad_norm_before_loss_w_q"] == doctest::Approx((0.01 + 39 * 0.3) / 50));
  CHECK(scaled["mean_grad_norm_before_loss_w_q"] == doctest::Approx(0.5));
  CHECK(scaled["mean_grad_norm_w_q"] == doctest::Approx((11 * 0.5 + 39 * 0.001) / 50));
  CHECK(cmp.arms[0].stat("grad_norm_step0_w_q").mean == doctest::Approx(0.01));
  CHECK(cmp.arms[1].stat("mean_grad_norm_before_loss_w_q").mean == doctest::Approx(0.5));

  const std::string all = findings_text(cmp);
  INFO(all);
  // sqrt_dk gives W_q more gradient at step 0 in 1 of 1 comparison, before the loss threshold in 1, over all steps
  // in 0 (W_k: 0, 0, 0); an exactly-zero W_q gradient less often in 1, more often in 0.
  const auto gradient = findings_of(cmp, "tolerance gradient");
  REQUIRE(gradient.size() == 1);
  // Of 1 comparison, more/less at step 0 (1/0), before the threshold (1/0), over all steps (0/1: less, its gradient
  // over the steps after the threshold is the smaller), W_k none; zero gradients less often in 1, more often in 0.
  CHECK(numbers_in(gradient[0].text) == std::vector<double>{1, 0, 1, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0});

  // One seed each, no spread: decided by the means within the gradient tolerance.
  CHECK(verdict_of(cmp, "more_gradient_step0_w_q", "sqrt_dk")->outcome == Outcome::better);  // 0.5 vs 0.01
  const auto before = verdict_of(cmp, "more_gradient_before_loss_w_q", "sqrt_dk");
  CHECK(before->outcome == Outcome::better);
  CHECK(before->baseline_value == doctest::Approx((0.01 + 39 * 0.3) / 50));
  CHECK(verdict_of(cmp, "more_gradient_w_q", "sqrt_dk")->outcome == Outcome::worse);  // 0.111 vs 0.234
}

TEST_CASE("the score gradient relative to the loss before the threshold tells saturation from a solved task") {
  // The reference runs: sqrt_dk with Adam at d_k 256 solved the task, and its median per-query score gradient over
  // all steps was 1.3e-7 because its loss was near zero, as small as a saturated softmax's.
  const TempDir root("findings_score_grad");
  FakeRun none;
  none.d_k = 256;
  none.optimizer = "adam";
  none.lr = 0.001;
  none.loss = constant(40, 2.0);  // never reaches the threshold: saturated from the start
  write(root, none);
  add_score_grad(root / name_of(none), [](std::size_t) { return 1e-9; });
  FakeRun scaled = none;
  scaled.scale = "sqrt_dk";
  scaled.loss = constant(40, 1e-4);
  for (std::size_t i = 0; i < 10; ++i) scaled.loss[i] = 2.0;  // reaches the threshold at step 10
  write(root, scaled);
  std::vector<double> grad = constant(40, 1e-8);
  for (std::size_t i = 0; i < 10; ++i) grad[i] = 0.1;
  add_score_grad(root / name_of(scaled), [&](std::size_t i) { return grad.at(i); });

  const Comparison cmp = analyse_dir(root);
  REQUIRE(cmp.arms.size() == 2);
  // Over all steps both are tiny: 1e-9 vs 1e-8.
  CHECK(cmp.arms[0].stat("score_grad_median").median == doctest::Approx(1e-9));
  CHECK(cmp.arms[1].stat("score_grad_median").median == doctest::Approx(1e-8));
  // Relative to the loss, up to the threshold (steps 0-10 for sqrt_dk: 0.1 / 2 ten times, 1e-8 / 1e-4 once).
  CHECK(cmp.stats[cmp.arms[0].kept.at(0)]["score_grad_relative"] == doctest::Approx(5e-10));
  CHECK(cmp.stats[cmp.arms[1].kept.at(0)]["score_grad_relative"] == doctest::Approx(0.05));
  CHECK(cmp.arms[1].stat("score_grad_relative").median == doctest::Approx(0.05));
  CHECK(cmp.arms[1].stat("score_grad_relative").min == doctest::Approx(0.05));
  CHECK(cmp.arms[1].stat("score_grad_relative").max == doctest::Approx(0.05));

  const std::string all = findings_text(cmp);
  INFO(all);
  CHECK(numbers_in(findings_of(cmp, "score_grad_relative").at(0).text) == std::vector<double>{256, 5e-10, 0.05});
  // One d_k: no figure against d_k. The section the finding links to holds its numbers.
  ReportContext context;
  context.summary = summary_figures(cmp);
  const std::string md = report_markdown(cmp, context);
  const std::size_t at = md.find("<a id=\"" + findings_of(cmp, "score_grad_relative").at(0).anchor + "\"></a>");
  REQUIRE(at != std::string::npos);
  const std::vector<double> there = numbers_in(md.substr(at, md.find("<a id=", at + 1) - at));
  for (const double v : {5e-10, 0.05}) CHECK(std::find(there.begin(), there.end(), v) != there.end());
}

TEST_CASE("every finding of a realistic sweep is at most 40 words, its rule and details a link away") {
  // The default experiment's shape (d_k 16 to 256, unscaled and sqrt_dk, two optimizers at two learning rates, three
  // seeds, a diverged run), then seven scalings at three d_k.
  const TempDir root("findings_words");
  const std::vector<std::size_t> d_ks{16, 64, 256};
  for (std::size_t d = 0; d < d_ks.size(); ++d)
    for (const std::string scale : {"none", "sqrt_dk"})
      for (int seed = 0; seed < 3; ++seed) {
        for (const double lr : {0.01, 0.1}) {
          const bool diverged = scale == "none" && lr == 0.1 && d == 2 && seed == 0;
          FakeRun r = sgd_run(scale, lr, seed, scale == "none" ? 0.3 * static_cast<double>(d + 1) : 0.2, diverged);
          r.d_k = d_ks[d];
          write(root / "default", r);
        }
        FakeRun r = adam_run(d_ks[d], scale, seed, scale == "none" ? 1.0 : 0.003, scale == "none" ? 0.5 : 1.0);
        r.entropy = constant(r.loss.size(), scale == "none" ? 1.0 / static_cast<double>(d + 1) : 2.0);
        r.w_q0 = constant(r.loss.size(), scale == "none" ? 0.01 : 0.5);
        write(root / "default", r);
        add_score_grad(root / "default" / name_of(r), [&](std::size_t) { return scale == "none" ? 1e-9 : 1e-3; });
      }
  const std::vector<std::string> scales{"none", "sqrt_dk", "dk", "ssmax", "softcap", "sigma_reparam", "qk_layernorm"};
  for (const std::size_t d_k : d_ks)
    for (std::size_t i = 0; i < scales.size(); ++i)
      for (int seed = 0; seed < 2; ++seed) {
        FakeRun r = adam_run(d_k, scales[i], seed, 0.5 + 0.1 * static_cast<double>(i), 0.5);
        r.entropy = constant(r.loss.size(), 1.0 + 0.1 * static_cast<double>(i));
        write(root / "many", r);
      }
  for (const std::string sweep : {"default", "many"}) {
    const Comparison cmp = analyse_dir(root / sweep);
    const std::vector<FindingLine> lines = findings(cmp);
    INFO(findings_text(cmp));
    CHECK(lines.size() >= 5);
    CHECK(lines.size() <= 10);
    for (const FindingLine& l : lines) {
      CHECK(word_count(l.text) <= 40);
      CHECK_FALSE(numbers_in(l.text).empty());
      CHECK(l.glossary.rfind("g-", 0) == 0);
    }
  }
}
