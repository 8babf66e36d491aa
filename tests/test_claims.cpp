// The claims table and its verdicts: values (better / worse / same / not decided, with the numbers they rest on),
// any baseline, any axis. No test here reads a sentence.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "report/claims.h"
#include "report/compare.h"
#include "tests/support/compare_findings.h"
#include "tests/support/fake_run.h"
#include "tests/support/run_files.h"
#include "tests/support/temp_dir.h"

using namespace xgrad::report;
using namespace xgrad::testing;

namespace {

// A run ending at `final_loss` (20 steps at 2.0, then 20 at the final loss), of scale `scale` and seed `seed`.
FakeRun run_of(const std::string& scale, int seed, double final_loss) {
  FakeRun r;
  r.scale = scale;
  r.seed = seed;
  r.loss = constant(20, 2.0);
  const auto tail = constant(20, final_loss);
  r.loss.insert(r.loss.end(), tail.begin(), tail.end());
  r.accuracy = constant(40, 0.5);
  return r;
}

const Verdict& find_verdict(const std::vector<Verdict>& all, const std::string& claim, const Comparison& c,
                            const std::string& subject_scale) {
  const auto it = std::find_if(all.begin(), all.end(), [&](const Verdict& v) {
    return v.claim == claim && c.arms[v.subject].scale() == subject_scale;
  });
  REQUIRE(it != all.end());
  return *it;
}

}  // namespace

TEST_CASE("tolerances are named once, each with its reason; claims name declared statistics and tolerances") {
  for (const Tolerance& t : tolerances()) CHECK_FALSE(t.reason.empty());
  CHECK(tolerance("loss").between(1.0, 0.5) == doctest::Approx(0.02));  // 2% of the larger
  CHECK(tolerance("steps").between(3, 4) == doctest::Approx(1.0));      // at least one step
  CHECK_THROWS_AS(tolerance("los"), std::out_of_range);
  const TempDir root("claims_decl");
  write_run(root / "a", run_of("none", 0, 1.0));
  const Comparison c = analyse_dirs({root.string()});
  for (const Claim& claim : claims()) {
    CHECK_NOTHROW(tolerance(claim.tolerance));
    if (claim.statistic == "lr_sensitivity") continue;
    for (const auto& w : attention_weights()) CHECK_NOTHROW(c.arms[0].stat(statistic_name(claim.statistic, w)));
  }
}

TEST_CASE("without the baseline in the sweep, the scalings present are judged against each other, seed by seed") {
  const TempDir root("claims_no_none");
  for (int seed = 0; seed < 2; ++seed) {
    write_run(root / ("sqrt" + std::to_string(seed)), run_of("sqrt_dk", seed, 0.50));
    write_run(root / ("dk" + std::to_string(seed)), run_of("dk", seed, 0.80 + 0.01 * seed));
  }
  const Comparison c = analyse_dirs({root.string()});
  REQUIRE(c.arms.size() == 2);
  const auto pairs = arm_pairs(c, "scale", "none");
  REQUIRE(pairs.size() == 1);
  const auto all = judge(c, "scale", "none");
  // dk comes later in the registry: sqrt_dk is its baseline, and dk trains worse in both seeds.
  const Verdict& v = find_verdict(all, "trains_better", c, "dk");
  CHECK(c.arms[v.baseline].scale() == "sqrt_dk");
  CHECK(v.outcome == Outcome::worse);
  CHECK(v.paired);
  CHECK(v.n_shared == 2);
  CHECK(v.seeds_worse == 2);
  CHECK(v.subject_value == doctest::Approx(0.805));
  CHECK(v.baseline_value == doctest::Approx(0.50));
  // Named as the baseline, dk is the reference and sqrt_dk the subject, which trains better.
  const auto against_dk = judge(c, "scale", "dk");
  CHECK(find_verdict(against_dk, "trains_better", c, "sqrt_dk").outcome == Outcome::better);
}

TEST_CASE("trains_better: within the loss tolerance in every seed is the same; seeds that disagree decide nothing") {
  const TempDir root("claims_same");
  for (int seed = 0; seed < 2; ++seed) {
    write_run(root / ("n" + std::to_string(seed)), run_of("none", seed, 1.00));
    // Seed 0 within 2% (1.01), seed 1 better by 10%.
    write_run(root / ("s" + std::to_string(seed)), run_of("sqrt_dk", seed, seed == 0 ? 1.01 : 0.90));
    write_run(root / ("d" + std::to_string(seed)), run_of("dk", seed, 1.015));
  }
  const Comparison c = analyse_dirs({root.string()});
  const auto all = judge(c, "scale", "none");
  const Verdict& sqrt_dk = find_verdict(all, "trains_better", c, "sqrt_dk");
  CHECK(c.arms[sqrt_dk.baseline].scale() == "none");
  CHECK(sqrt_dk.outcome == Outcome::not_decided);
  CHECK(sqrt_dk.seeds_better == 1);
  CHECK(sqrt_dk.seeds_same == 1);
  CHECK(sqrt_dk.why_not == "seeds_disagree");
  CHECK(find_verdict(all, "trains_better", c, "dk").outcome == Outcome::same);
  // With a baseline present, only pairs against it are judged (no dk-against-sqrt_dk pair).
  CHECK(arm_pairs(c, "scale", "none").size() == 2);
}

TEST_CASE("a threshold never reached counts as the worst step; neither reaching it decides nothing") {
  const TempDir root("claims_steps");
  FakeRun fast = run_of("sqrt_dk", 0, 0.1), slow = run_of("none", 0, 1.9);
  write_run(root / "fast", fast);
  write_run(root / "slow", slow);
  const Comparison c = analyse_dirs({root.string()}, /*loss_threshold=*/1.0);
  const auto all = judge(c, "scale", "none");
  const Verdict& v = find_verdict(all, "reaches_loss_sooner", c, "sqrt_dk");
  CHECK(v.outcome == Outcome::better);  // step 20 against never
  CHECK(std::isinf(v.baseline_value));  // never reached: the worst step in the seed both have
  const Comparison none_reach = analyse_dirs({root.string()}, /*loss_threshold=*/0.01);
  const auto none_verdicts = judge(none_reach, "scale", "none");
  const Verdict& n = find_verdict(none_verdicts, "reaches_loss_sooner", none_reach, "sqrt_dk");
  CHECK(n.outcome == Outcome::not_decided);
  CHECK(n.why_not == "never_reached");
}

TEST_CASE("any axis: arms that differ only in the optimizer are judged against the named one") {
  const TempDir root("claims_axis");
  for (int seed = 0; seed < 2; ++seed) {
    FakeRun a = run_of("sqrt_dk", seed, 0.6);
    a.optimizer = "adamw";
    FakeRun s = run_of("sqrt_dk", seed, 0.9);
    s.optimizer = "sgd";
    write_run(root / ("a" + std::to_string(seed)), a);
    write_run(root / ("s" + std::to_string(seed)), s);
  }
  const Comparison c = analyse_dirs({root.string()});
  const auto all = judge(c, "optimizer", "adamw");
  const auto it = std::find_if(all.begin(), all.end(), [&](const Verdict& v) { return v.claim == "trains_better"; });
  REQUIRE(it != all.end());
  CHECK(c.arms[it->subject].optimizer() == "sgd");
  CHECK(it->outcome == Outcome::worse);
  CHECK(outcome_name(it->outcome) == "worse");
}

TEST_CASE("every claim has a sentence for every outcome, with every field filled") {
  const TempDir root("claims_sentences");
  write_run(root / "n", run_of("none", 0, 1.0));
  write_run(root / "s", run_of("sqrt_dk", 0, 0.5));
  const Comparison c = analyse_dirs({root.string()});
  REQUIRE(c.arms.size() == 2);
  for (const Claim& claim : claims())
    for (const Outcome o : {Outcome::better, Outcome::worse, Outcome::same, Outcome::not_decided}) {
      Verdict v;
      v.w = claim.id.find("{w}") == std::string::npos ? "" : "w_q";
      v.claim = statistic_name(claim.id, v.w);
      v.subject = 1;
      v.outcome = o;
      v.why_not = o == Outcome::not_decided ? "seeds_disagree" : "";
      const std::string text = verdict_sentence(c, v);
      INFO(v.claim << " " << outcome_name(o) << ": " << text);
      CHECK(text.find('{') == std::string::npos);
      CHECK(text.find("sqrt_dk") != std::string::npos);  // the subject is named
    }
}

TEST_CASE("compare_values: the one seed-by-seed rule, on any per-seed values") {
  using Values = std::map<nlohmann::json, double>;
  const auto key = [](int seed) { return seed_key({{"seed", seed}, {"data_seed", 0}}); };
  const Tolerance& loss = tolerance("loss");
  const Values base{{key(0), 1.0}, {key(1), 1.0}, {key(2), 1.0}};
  const Verdict lower = compare_values({{key(0), 0.9}, {key(1), 0.8}, {key(2), 0.9}}, base, Better::lower, loss);
  CHECK(lower.outcome == Outcome::better);
  CHECK(lower.n_shared == 3);
  CHECK(lower.seeds_better == 3);
  CHECK(compare_values(base, {{key(0), 0.9}, {key(1), 0.8}, {key(2), 0.9}}, Better::lower, loss).outcome ==
        Outcome::worse);
  // Within 2% of the larger in every seed: the same; one seed better and one within it: not decided.
  CHECK(compare_values({{key(0), 0.99}, {key(1), 1.01}}, base, Better::lower, loss).outcome == Outcome::same);
  const Verdict mixed = compare_values({{key(0), 0.5}, {key(1), 1.0}}, base, Better::lower, loss);
  CHECK(mixed.outcome == Outcome::not_decided);
  CHECK(mixed.seeds_better == 1);
  CHECK(mixed.seeds_same == 1);
  CHECK(mixed.why_not == "seeds_disagree");
  // Higher is better for accuracies, with the absolute "probability" tolerance; no shared seed decides nothing.
  CHECK(compare_values({{key(0), 0.95}}, {{key(0), 0.9}}, Better::higher, tolerance("probability")).outcome ==
        Outcome::better);
  CHECK(compare_values({{key(0), 0.91}}, {{key(0), 0.9}}, Better::higher, tolerance("probability")).outcome ==
        Outcome::same);
  const Verdict apart = compare_values({{key(5), 0.5}}, base, Better::lower, loss);
  CHECK(apart.outcome == Outcome::not_decided);
  CHECK_FALSE(apart.paired);
}

TEST_CASE("judge_finding: a seed's runs are averaged, as judge's; against an arm or a threshold") {
  const TempDir root("claims_finding");
  // Seed 0 of sqrt_dk ran twice (1.0 and 1.2): their mean 1.1 is the baseline's, not one run's 9% off it.
  write_run(root / "s_a", run_of("sqrt_dk", 0, 1.0));
  write_run(root / "s_b", run_of("sqrt_dk", 0, 1.2));
  write_run(root / "n", run_of("none", 0, 1.1));
  const Comparison c = analyse_dirs({root.string()});
  REQUIRE(c.arms.size() == 2);
  const ArmStats& none = c.arms[0].scale() == "none" ? c.arms[0] : c.arms[1];
  const ArmStats& sqrt_dk = &none == &c.arms[0] ? c.arms[1] : c.arms[0];
  const Claim loss{"", "final_loss", Better::lower, "loss"};
  const Verdict v = judge_finding(c, loss, sqrt_dk, &none);
  CHECK(v.outcome == Outcome::same);
  CHECK(v.n_shared == 1);
  CHECK(v.subject_value == doctest::Approx(1.1));
  CHECK(v.baseline_value == doctest::Approx(1.1));
  const Verdict below = judge_finding(c, loss, sqrt_dk, nullptr, 1.5);  // each seed against 1.5: lower is better
  CHECK(below.outcome == Outcome::better);
  CHECK(below.baseline_value == 1.5);
}

TEST_CASE("a side whose every run was cut short decides no claim") {
  const TempDir root("claims_cut_short");
  for (int seed = 0; seed < 2; ++seed) {
    FakeRun cut = run_of("none", seed, 1.5);
    cut.steps = 80;  // 40 rows of 80 planned: cut short
    cut.summary = false;
    write_run(root / ("n" + std::to_string(seed)), cut);
    FakeRun whole = run_of("sqrt_dk", seed, 0.5);
    whole.loss.insert(whole.loss.end(), 40, 0.5);  // all 80 planned rows
    whole.accuracy.insert(whole.accuracy.end(), 40, 0.5);
    whole.steps = 80;
    write_run(root / ("s" + std::to_string(seed)), whole);
  }
  const Comparison c = analyse_dirs({root.string()});
  REQUIRE(c.arms.size() == 2);
  CHECK(c.arms[0].only_incomplete());
  CHECK_FALSE(c.arms[1].only_incomplete());
  const auto all = judge(c, "scale", "none");
  REQUIRE_FALSE(all.empty());
  for (const Verdict& v : all) {
    INFO(v.claim);
    CHECK(v.outcome == Outcome::not_decided);
    CHECK(v.why_not == "cut_short");
  }
}

TEST_CASE(
    "LR sensitivity is judged between scalings without the baseline too, and compare refuses a baseline no arm "
    "holds") {
  const TempDir root("claims_lr_no_base");
  for (const double lr : {0.01, 0.1})
    for (const std::string scale : {"sqrt_dk", "dk"}) {
      FakeRun r = run_of(scale, 0, scale == "dk" && lr == 0.1 ? 1.9 : 0.5);
      r.lr = lr;
      write_run(root / (scale + std::to_string(lr)), r);
    }
  const Comparison c = analyse_dirs({root.string()});
  const auto all = judge(c, "scale", "none");
  const auto lr = std::find_if(all.begin(), all.end(), [](const Verdict& v) { return v.claim == "less_lr_sensitive"; });
  REQUIRE(lr != all.end());
  CHECK(c.arms[lr->subject].scale() == "dk");
  CHECK(lr->outcome == Outcome::worse);  // dk fails at lr 0.1, sqrt_dk does not

  CompareOptions options;
  options.inputs = {root.string()};
  options.plots = false;
  options.baseline = "nonexistent";
  std::ostringstream out;
  CHECK_THROWS_WITH_AS(run_compare(options, out), doctest::Contains("the arms hold dk, sqrt_dk"),
                       std::invalid_argument);
}

TEST_CASE("names from the runs' data cannot form links or images in report.md's verdicts, tables and headings") {
  const TempDir root("claims_markdown");
  for (const std::string from : {"[click](http://evil.example)", "<img src=x onerror=alert(1)>"})
    for (int seed = 0; seed < 2; ++seed) {
      FakeRun r = run_of("sqrt_dk", seed, from[0] == '[' ? 0.5 : 0.9);
      r.extra_config["init_from"] = from;
      write_run(root / ((from[0] == '[' ? "link-" : "img-") + std::to_string(seed)), r);
    }
  CompareOptions options;
  options.inputs = {root.string()};
  options.plots = false;
  options.axis = "init_from";
  options.baseline = "<img src=x onerror=alert(1)>";
  std::ostringstream out;
  REQUIRE_MESSAGE(run_compare(options, out) == 4, out.str());
  const std::string md = read_text(root / "report.md");
  CHECK(md.find("[click](") == std::string::npos);
  // Inert as "\<img" or "&lt;img"; a bare "<img" would be an HTML tag.
  for (auto at = md.find("<img"); at != std::string::npos; at = md.find("<img", at + 1))
    CHECK_MESSAGE(md.substr(at - 1, 1) == "\\", md.substr(md.rfind('\n', at), 200));
}
