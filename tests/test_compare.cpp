// `xgrad compare` on hand-written run directories with known numbers: arm grouping, mean ± sd over seeds,
// steps to threshold, mean loss (AUC), zero-gradient fractions, LR sensitivity, divergence, cut-short runs, NaN
// columns, report.md sentences and findings, summary figures against d_k and lr, and plots with and without gnuplot.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "common/escape.h"
#include "common/registry.h"
#include "nn/scaling.h"
#include "report/claims.h"
#include "report/compare.h"
#include "report/explain_measure.h"
#include "report/markdown.h"
#include "report/plots.h"
#include "report/runs.h"
#include "report/stats.h"
#include "report/summary.h"
#include "report/tables.h"
#include "tests/support/compare_findings.h"
#include "tests/support/compare_quietly.h"
#include "tests/support/fake_run.h"
#include "tests/support/fault_hooks.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "tests/support/run_files.h"
#include "tests/support/shown_text.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_run.h"
#include "train/run_files.h"
#include "train/trainer.h"

using namespace xgrad::train;
using namespace xgrad::report;
namespace fs = std::filesystem;
using namespace xgrad::testing;

namespace {

const double inf_value = std::numeric_limits<double>::infinity();

std::string fmt_name(std::size_t d_k, const std::string& scale, int seed) {
  return "dk" + std::to_string(d_k) + "-" + scale + "-s" + std::to_string(seed);
}

// Sets PATH for the lifetime of the guard (to hide gnuplot).
struct PathGuard {
  std::string saved;
  explicit PathGuard(const std::string& path) : saved(std::getenv("PATH") ? std::getenv("PATH") : "") {
    ::setenv("PATH", path.c_str(), 1);
  }
  ~PathGuard() { ::setenv("PATH", saved.c_str(), 1); }
};

}  // namespace

TEST_CASE("runs differing only in seed, data_seed, out and environment form one arm; arms sort by d_k, scale, lr") {
  const TempDir root("compare_arms");
  FakeRun a;
  a.loss = constant(5, 2.0);
  write_run(root / "runs" / "none-s0", a);
  a.seed = 1;
  a.environment = "machine-b";
  write_run(root / "runs" / "none-s1", a);
  FakeRun b = a;
  b.scale = "sqrt_dk";
  write_run(root / "runs" / "sqrt-s1", b);
  FakeRun c = a;
  c.lr = 0.001;
  write_run(root / "runs" / "deeper" / "none-lr-s1", c);  // found at any depth
  FakeRun d = a;
  d.d_k = 4;
  write_run(root / "runs" / "dk4", d);

  const Comparison cmp = analyse_dirs({root.string()});
  REQUIRE(cmp.runs.size() == 5);
  REQUIRE(cmp.arms.size() == 4);
  CHECK(cmp.arms[0].d_k() == 4);
  CHECK(cmp.arms[1].scale() == "none");
  CHECK(cmp.arms[1].lr() == doctest::Approx(0.001));
  CHECK(cmp.arms[2].scale() == "none");
  CHECK(cmp.arms[2].lr() == doctest::Approx(0.01));
  CHECK(cmp.arms[2].runs.size() == 2);
  CHECK(cmp.arms[3].scale() == "sqrt_dk");
  CHECK(cmp.arms[3].runs.size() == 1);
  CHECK(format_seeds(cmp.arms[2]) == "2");
  // d_k, scale, optimizer and lr already tell these arms apart.
  CHECK(distinguishing_keys(cmp.arms).empty());

  // The same run given twice (directly and through its sweep) is read once.
  CHECK(find_run_dirs({root.string(), (root / "runs" / "dk4").string()}).dirs.size() == 5);
}

TEST_CASE("an input that is not a directory or holds no run throws std::invalid_argument naming it") {
  const TempDir root("compare_empty");
  fs::create_directories(root / "nothing_here");
  std::ofstream(root / "nothing_here" / "config.json") << "{}";  // no metrics.csv: not a run
  try {
    find_run_dirs({root.string()});
    FAIL("expected std::invalid_argument");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find(root.string()) != std::string::npos);
  }
  CHECK_THROWS_AS(find_run_dirs({(root / "missing").string()}), std::invalid_argument);
  CompareOptions options;
  options.inputs = {root.string()};
  options.plots = false;
  std::ostringstream out;
  CHECK_THROWS_AS(run_compare(options, out), std::invalid_argument);
}

namespace {

// A sweep.json listing runs/<name> for each of `names`, as `xgrad sweep` writes its points.
void write_manifest(const fs::path& sweep, const std::vector<std::string>& names) {
  nlohmann::json runs = nlohmann::json::array();
  for (std::size_t i = 0; i < names.size(); ++i)
    runs.push_back({{"index", i}, {"name", names[i]}, {"dir", "runs/" + names[i]}});
  std::ofstream(sweep / "sweep.json") << nlohmann::json{{"runs", runs}}.dump(2);
}

}  // namespace

TEST_CASE("compare of a sweep reads the runs its sweep.json lists; runs copied in are left out unless asked for") {
  const TempDir root("compare_unlisted");
  std::vector<std::string> names;
  for (const std::string scale : {"none", "sqrt_dk"})
    for (int seed = 0; seed < 2; ++seed) {
      FakeRun r;
      r.scale = scale;
      r.seed = seed;
      r.loss = constant(5, scale == "none" ? 2.0 : 1.0);
      names.push_back(scale + "-s" + std::to_string(seed));
      write_run(root / "runs" / names.back(), r);
    }
  write_manifest(root, names);
  // Seeds of another experiment copied in, whose loss would turn sqrt_dk's verdict: beside the sweep's runs and deeper.
  FakeRun copied;
  copied.scale = "sqrt_dk";
  copied.seed = 7;
  copied.loss = constant(5, 9.0);
  const fs::path beside = root / "runs" / "copied", deeper = root / "old" / "more" / "copied";
  write_run(beside, copied);
  copied.seed = 8;
  write_run(deeper, copied);

  const FoundRuns found = find_run_dirs({root.string()});
  CHECK(found.dirs.size() == 4);
  CHECK(found.unlisted == std::vector<std::string>{deeper.string(), beside.string()});
  const Comparison c = analyse_dirs({root.string()});
  REQUIRE(c.arms.size() == 2);
  CHECK(c.arms[1].runs.size() == 2);
  // A run directory given directly is read as before.
  CHECK(find_run_dirs({beside.string()}).dirs == std::vector<std::string>{beside.string()});

  CompareOptions options;
  options.inputs = {root.string()};
  options.plots = false;
  std::ostringstream out;
  CHECK(run_compare(options, out) == 4);
  CHECK(find_run_dirs({root.string()}).unlisted.size() == 2);  // named in one note, on the terminal too
  CHECK(out.str().find(deeper.string()) != std::string::npos);
  const std::string report = read_text(root / "report.md");
  CHECK(report.find("<details><summary>list (2)</summary>") != std::string::npos);
  CHECK(report.find("- " + markdown_text(deeper.string()) + "\n") != std::string::npos);
  options.include_unlisted = true;
  CHECK(run_compare(options, out) == 6);
  RunSearch search;
  search.include_unlisted = true;
  CHECK(find_run_dirs({root.string()}, search).dirs.size() == 6);

  // A whole sweep copied inside this one lists runs of its own: they are not this sweep's either.
  write_run(root / "nested" / "runs" / "n0", copied);
  write_manifest(root / "nested", {"n0"});
  const FoundRuns with_nested = find_run_dirs({root.string()});
  CHECK(with_nested.dirs.size() == 4);
  CHECK(with_nested.unlisted.size() == 3);
}

TEST_CASE("a sweep.json with an entry that does not read: its other entries are the sweep's, the entry is named") {
  // A user expects the sweep's runs read, as sweep status reads the sweep: one damaged entry (hand-edited) must not
  // make the runs copied in count as seeds, nor hide the report.
  const TempDir root("compare_refused_entry");
  const std::vector<std::string> names{"none-s0", "none-s1", "none-s2"};
  for (std::size_t i = 0; i < names.size(); ++i) {
    FakeRun r;
    r.seed = static_cast<int>(i);
    r.loss = constant(5, 2.0);
    write_run(root / "runs" / names[i], r);
  }
  write_manifest(root, names);
  nlohmann::json manifest = nlohmann::json::parse(read_text(root / "sweep.json"));
  manifest["runs"][1]["dir"] = "../elsewhere";  // refused: a point trains only under runs/
  std::ofstream(root / "sweep.json") << manifest.dump(2);
  FakeRun copied;
  copied.seed = 7;
  copied.loss = constant(5, 9.0);
  write_run(root / "runs" / "copied", copied);

  const FoundRuns found = find_run_dirs({root.string()});
  CHECK(found.dirs ==
        std::vector<std::string>{(root / "runs" / "none-s0").string(), (root / "runs" / "none-s2").string()});
  CHECK(found.unlisted ==
        std::vector<std::string>{(root / "runs" / "copied").string(), (root / "runs" / "none-s1").string()});
  REQUIRE(found.refused.size() == 1);
  CHECK(found.refused[0].find("point 1") != std::string::npos);
  CompareOptions options;
  options.inputs = {root.string()};
  options.plots = false;
  std::ostringstream out;
  CHECK(run_compare(options, out) == 2);
  const std::string report = read_text(root / "report.md");
  CHECK(report.find("- " + markdown_text(found.refused[0]) + "\n") != std::string::npos);  // listed in its note
  CHECK(report.find("DIR: ") == std::string::npos);
}

TEST_CASE("below a directory that is no run and no sweep, runs are looked for within a bounded depth and count") {
  const TempDir root("compare_bounds");
  FakeRun r;
  r.loss = constant(5, 2.0);
  write_run(root / "a" / "b" / "c" / "d" / "e" / "run", r);  // 6 levels down
  RunSearch search;
  CHECK_THROWS_WITH_AS(find_run_dirs({root.string()}, search), doctest::Contains("within 4 levels"),
                       std::invalid_argument);
  search.max_depth = 6;
  CHECK(find_run_dirs({root.string()}, search).dirs.size() == 1);
  for (int i = 0; i < 30; ++i) fs::create_directories(root / ("empty" + std::to_string(i)));
  search.max_entries = 20;
  CHECK_THROWS_WITH_AS(find_run_dirs({root.string()}, search), doctest::Contains("more than 20 files and directories"),
                       std::invalid_argument);
  // A sweep's own points are not counted against the bound.
  std::vector<std::string> names;
  for (int i = 0; i < 30; ++i) {
    names.push_back("p" + std::to_string(i));
    write_run(root / "sweep" / "runs" / names.back(), r);
  }
  write_manifest(root / "sweep", names);
  CHECK(find_run_dirs({(root / "sweep").string()}, search).dirs.size() == 30);
  // Past the bound below a sweep given, only the search for runs it does not list stops.
  for (int i = 0; i < 30; ++i) fs::create_directories(root / "sweep" / "plots" / std::to_string(i) / "x");
  const FoundRuns found = find_run_dirs({(root / "sweep").string()}, search);
  CHECK(found.dirs.size() == 30);
  CHECK(found.search_cut);
}

TEST_CASE("final loss and accuracy: mean over the last 20 steps, then mean ± sample sd over seeds") {
  const TempDir root("compare_meansd");
  for (int seed = 0; seed < 3; ++seed) {
    FakeRun r;
    r.seed = seed;
    // 25 steps: 5 at loss 9 (outside the last-20 window), then 20 at 1, 2, 3 for seeds 0, 1, 2.
    r.loss = constant(5, 9.0);
    const auto tail = constant(20, 1.0 + seed);
    r.loss.insert(r.loss.end(), tail.begin(), tail.end());
    r.accuracy = constant(25, 0.1 * (seed + 1));
    write_run(root / ("s" + std::to_string(seed)), r);
  }
  const Comparison cmp = analyse_dirs({root.string()});
  REQUIRE(cmp.arms.size() == 1);
  const ArmStats& arm = cmp.arms[0];
  CHECK(arm.stat("final_loss").n == 3);
  CHECK(arm.stat("final_loss").mean == doctest::Approx(2.0));
  CHECK(arm.stat("final_loss").sd == doctest::Approx(1.0));  // sqrt(((1-2)^2 + 0 + (3-2)^2) / (3 - 1))
  CHECK(arm.stat("final_accuracy").mean == doctest::Approx(0.2));
  CHECK(arm.stat("initial_loss").mean == doctest::Approx(9.0));
  CHECK(format_mean_sd(arm.stat("final_loss")) == "2.000 ± 1.000");

  const MeanSd one = mean_sd({nan_value, 4.0, inf_value});
  CHECK(one.n == 1);
  CHECK(one.mean == doctest::Approx(4.0));
  CHECK(one.sd == 0.0);
  CHECK(format_mean_sd(one) == "4.000");
  CHECK(mean_sd({}).n == 0);
  CHECK(std::isnan(mean_sd({nan_value}).mean));
}

TEST_CASE("steps to threshold: first step whose trailing mean reaches it; never; k of n seeds") {
  const TempDir root("compare_threshold");
  FakeRun fast;
  fast.loss = {3.0, 2.0, 1.5, 0.9, 0.8, 0.7, 1.2, 0.6};
  fast.accuracy = {0.1, 0.5, 0.95, 0.5, 0.92, 0.91, 0.95, 0.99};
  write_run(root / "fast", fast);
  FakeRun slow = fast;
  slow.seed = 1;
  slow.loss = constant(8, 2.0);
  slow.accuracy = constant(8, 0.5);
  write_run(root / "slow", slow);

  {
    const Comparison cmp = analyse_dirs({root.string()}, 1.0, 0.9, 1);
    REQUIRE(cmp.runs.size() == 2);
    const RunStats& f = cmp.stats[0]["step_to_loss"] >= 0 ? cmp.stats[0] : cmp.stats[1];
    const RunStats& s = cmp.stats[0]["step_to_loss"] >= 0 ? cmp.stats[1] : cmp.stats[0];
    CHECK(f["step_to_loss"] == 3);         // 0.9 <= 1.0
    CHECK(f["step_to_accuracy"] == 2);     // 0.95 >= 0.9
    CHECK(std::isnan(s["step_to_loss"]));  // never reached
    CHECK(std::isnan(s["step_to_accuracy"]));
    const ArmStats& arm = cmp.arms[0];
    CHECK(arm.stat("step_to_loss").n == 1);
    CHECK(arm.stat("step_to_loss").mean == doctest::Approx(3.0));
    CHECK(format_steps(arm.stat("step_to_loss").n, arm.used.size(), arm.stat("step_to_loss").mean) == "3 (1/2)");
    CHECK(format_steps(0, 2, nan_value) == "never");
    CHECK(format_steps(2, 2, 4.0) == "4");
  }
  {
    // Window 2: loss means 2.5, 1.75, 1.2, 0.85 → step 4; accuracy means .., 0.725, 0.71, 0.915 → step 5.
    const Comparison cmp = analyse_dirs({(root / "fast").string()}, 1.0, 0.9, 2);
    CHECK(cmp.stats[0]["step_to_loss"] == 4);
    CHECK(cmp.stats[0]["step_to_accuracy"] == 5);
  }
  {
    // Default loss threshold (< 0): half the chance loss ln(8) = 1.0397; only 0.9 and below reach it.
    const Comparison cmp = analyse_dirs({(root / "fast").string()}, -1, 0.9, 1);
    CHECK(cmp.arms[0].loss_threshold == doctest::Approx(0.5 * std::log(8.0)));
    CHECK(cmp.stats[0]["step_to_loss"] == 3);
  }
}

TEST_CASE("statistics by name: a {w} declaration is one statistic per attention weight, every run and arm has each") {
  const TempDir root("compare_named");
  FakeRun r;
  r.loss = constant(4, 1.0);
  r.accuracy = constant(4, 0.5);
  write_run(root / "r", r);
  const Comparison cmp = analyse_dirs({root.string()});
  std::size_t expected = 0;
  for (const Statistic& s : statistics())
    expected += s.name.find("{w}") == std::string::npos ? 1 : attention_weights().size();
  CHECK(cmp.stats.at(0).values.size() == expected);
  CHECK(cmp.arms.at(0).stats.size() == expected);
  CHECK(cmp.stats[0].values.count("mean_grad_norm_w_q") == 1);
  CHECK(cmp.stats[0].values.count("mean_grad_norm_w_k") == 1);
  CHECK(statistic_name("frac_zero_grad_{w}", "w_k") == "frac_zero_grad_w_k");
  // A name no statistic declares is a programming error the caller hears of, not a silent NaN.
  CHECK_THROWS_AS(cmp.stats[0]["final_los"], std::out_of_range);
  CHECK_THROWS_AS(cmp.arms[0].stat("final_los"), std::out_of_range);
}

TEST_CASE("mean loss (AUC), zero-gradient fractions and NaN attention columns") {
  const TempDir root("compare_auc");
  FakeRun r;
  r.loss = {4.0, 3.0, 2.0, 1.0};
  // Step 1: every W_q norm zero; step 2: one layer's W_q zero but not the other; step 3: W_q and W_k zero.
  r.w_q0 = {1.0, 0.0, 0.0, 0.0};
  r.w_q1 = {1.0, 0.0, 0.5, 0.0};
  r.w_k0 = {1.0, 1.0, 0.0, 0.0};
  r.w_k1 = {1.0, 1.0, 0.0, 0.0};
  // Attention measured on steps 1 and 3 only (nan elsewhere, as with log_every = 2).
  r.entropy = {nan_value, 2.0, nan_value, 0.5};
  r.score_std = {nan_value, 1.0, nan_value, 8.0};
  write_run(root / "r", r);
  const Comparison cmp = analyse_dirs({root.string()});
  const RunStats& s = cmp.stats[0];
  CHECK(s["auc_loss"] == doctest::Approx(2.5));
  CHECK(s["frac_zero_grad_w_q"] == doctest::Approx(0.5));  // steps 1 and 3
  CHECK(s["frac_zero_grad_w_k"] == doctest::Approx(0.5));  // steps 2 and 3
  CHECK(s["mean_grad_norm_w_q"] == doctest::Approx((std::sqrt(2.0) + 0 + 0.5 + 0) / 4));
  CHECK(s["entropy_first"] == doctest::Approx(2.0));  // layer 0 only (layer 1 holds 99)
  CHECK(s["entropy_last"] == doctest::Approx(0.5));
  CHECK(s["first_measured_step"] == doctest::Approx(1.0));
  CHECK(s["score_std_first"] == doctest::Approx(1.0));
  CHECK(s["score_std_last"] == doctest::Approx(8.0));
  CHECK_FALSE(cmp.arms[0].measured_from_step_0);
  CHECK(format_percent(cmp.arms[0].stat("frac_zero_grad_w_q").mean) == "50.0%");
  CHECK(format_percent(0.0) == "0%");
}

TEST_CASE("zero-gradient fractions: summary.json and compare give the same number for an --on-nan skip run") {
  // Unscaled attention with 100x the projection init: scores so large that the softmax is exactly one-hot in
  // float on many steps, which passes back an exactly-zero gradient to W_q and W_k. Four steps get a NaN gradient
  // and are skipped: they have no gradient, and neither statistic may count them.
  const TempDir root("compare_zero_grad_skip");
  TrainConfig c = xgrad::testing::tiny_run((root / "run").string(), 24);
  c.model.scale = "none";
  c.model.proj_init_gain = 100;
  c.on_nan = xgrad::train::OnNan::skip;
  const RunSummary trained = xgrad::train::train(c, xgrad::testing::nan_gradient_at({2, 5, 6, 11}));
  REQUIRE(trained.skipped_steps == 4);
  std::ifstream in(root / "run" / "summary.json");
  const RunSummary summary = RunSummary::from_json(nlohmann::json::parse(in));
  // Some but not all finite steps had a zero gradient, so counting the skipped rows would change the fraction.
  REQUIRE(summary.frac_zero_grad_w_q > 0);
  REQUIRE(summary.frac_zero_grad_w_q < 1);

  const Comparison cmp = analyse_dirs({(root / "run").string()});
  REQUIRE(cmp.stats.size() == 1);
  CHECK(cmp.stats[0]["frac_zero_grad_w_q"] == summary.frac_zero_grad_w_q);
  CHECK(cmp.stats[0]["frac_zero_grad_w_k"] == summary.frac_zero_grad_w_k);
  // The near-zero share is defined once too (GradientStats): summary.json and compare agree on it.
  REQUIRE(std::isfinite(summary.frac_near_zero_grad_w_q));
  CHECK(summary.frac_near_zero_grad_w_q >= summary.frac_zero_grad_w_q);
  CHECK(cmp.stats[0]["frac_near_zero_grad_w_q"] == summary.frac_near_zero_grad_w_q);
  CHECK(cmp.stats[0]["frac_near_zero_grad_w_k"] == summary.frac_near_zero_grad_w_k);
  // metrics.csv holds the norms to 9 significant digits.
  CHECK(cmp.stats[0]["mean_grad_norm_w_q"] == doctest::Approx(summary.mean_grad_norm_w_q).epsilon(1e-7).scale(0));
  CHECK(cmp.stats[0]["mean_grad_norm_w_k"] == doctest::Approx(summary.mean_grad_norm_w_k).epsilon(1e-7).scale(0));
  const std::string table = arm_table(cmp).text();
  INFO(table);
  CHECK(table.find(format_percent(summary.frac_zero_grad_w_q)) != std::string::npos);
}

namespace {

// A real run of `tiny_run` (kv_recall, d_model 16) with `task` and `scale`, `steps` steps, written to `dir`.
TrainConfig short_run(const fs::path& dir, const std::string& task, const std::string& scale, std::size_t steps = 6) {
  TrainConfig c = xgrad::testing::tiny_run(dir.string(), steps);
  c.task = task;
  c.model.scale = scale;
  return c;
}

// report.md of `xgrad compare INPUTS --out OUT_DIR --plots false`.
std::string report_md(const std::vector<std::string>& inputs, const fs::path& out_dir) {
  compare_quietly(inputs, out_dir);
  return read_text(out_dir / "report.md");
}

// The console output of `xgrad compare INPUT --plots false`; its report.md in *report if given.
std::string compare_text(const fs::path& input, std::string* report = nullptr) {
  CompareOptions options;
  options.inputs = {input.string()};
  options.plots = false;
  std::ostringstream out;
  run_compare(options, out);
  if (report) *report = read_text(input / "report.md");
  return out.str();
}

}  // namespace

TEST_CASE("compare shows the task of arms that differ in it, and states no scaling comparison across tasks") {
  // The issue's reproduction: copy unscaled and kv_recall scaled read as "64 none 2.080" and "64 sqrt_dk 0.003".
  const TempDir root("compare_task_scale");
  xgrad::train::train(short_run(root / "sweep" / "copy-none", "copy", "none"));
  xgrad::train::train(short_run(root / "sweep" / "kv-sqrt", "kv_recall", "sqrt_dk"));
  std::string md;
  const std::string console = compare_text(root / "sweep", &md);
  INFO(console);
  INFO(md);
  const Comparison cmp = analyse_dirs({(root / "sweep").string()});
  REQUIRE(cmp.arms.size() == 2);
  CHECK(distinguishing_keys(cmp.arms) == std::vector<std::string>{"task"});
  CHECK(console.find("task") != std::string::npos);
  CHECK(console.find("copy") != std::string::npos);
  CHECK(console.find("kv_recall") != std::string::npos);
  // Said, on the console and in report.md, instead of a comparison.
  const auto unpaired = unpaired_arms(cmp, "scale");
  REQUIRE(unpaired.size() == 2);
  CHECK(unpaired[0].differs_in == std::vector<std::string>{"task"});
  const auto notes = no_comparison_notes(cmp);
  REQUIRE(notes.size() == 1);  // one note for all: no arm has a counterpart
  CHECK(console.find(notes[0]) != std::string::npos);
  CHECK(md.find(notes[0]) != std::string::npos);
  CHECK(arm_pairs(cmp, "scale", "none").empty());
  CHECK(judge(cmp, "scale", "none").empty());

  // With copy scaled as well, copy is compared within copy only, and the kv_recall arm is named as having no
  // counterpart.
  xgrad::train::train(short_run(root / "sweep" / "copy-sqrt", "copy", "sqrt_dk"));
  const Comparison three = analyse_dirs({(root / "sweep").string()});
  REQUIRE(three.arms.size() == 3);
  const auto pairs = arm_pairs(three, "scale", "none");
  REQUIRE(pairs.size() == 1);
  CHECK(setting_text(three.arms[pairs[0].subject].settings, "task") == "copy");
  CHECK(setting_text(three.arms[pairs[0].baseline].settings, "task") == "copy");
  const std::string console3 = compare_text(root / "sweep", &md);
  INFO(console3);
  const auto unpaired3 = unpaired_arms(three, "scale");
  REQUIRE(unpaired3.size() == 1);
  CHECK(setting_text(three.arms[unpaired3[0].arm].settings, "task") == "kv_recall");
  CHECK(unpaired3[0].differs_in == std::vector<std::string>{"task"});
  const auto notes3 = no_comparison_notes(three);
  REQUIRE(notes3.size() == 1);
  CHECK(console3.find(notes3[0]) != std::string::npos);
  CHECK(md.find(markdown_text(notes3[0])) != std::string::npos);  // as text: it names settings

  // A setting only the softcap scaling has (its cap) belongs to the scaling: real runs of softcap and unscaled are
  // compared, and the softcap arm is named with its cap.
  xgrad::train::train(short_run(root / "capped" / "none", "kv_recall", "none"));
  xgrad::train::train(short_run(root / "capped" / "softcap", "kv_recall", "softcap"));
  const std::string capped = compare_text(root / "capped");
  INFO(capped);
  CHECK(capped.find("no scaling comparison") == std::string::npos);
  const Comparison capped_cmp = analyse_dirs({(root / "capped").string()});
  const auto capped_pairs = arm_pairs(capped_cmp, "scale", "none");
  REQUIRE(capped_pairs.size() == 1);
  CHECK(arm_name(capped_cmp, capped_cmp.arms[capped_pairs[0].subject]) == "softcap (softcap_cap=50)");
}

TEST_CASE("the largest logit per arm: at step 0, over training, and the first step past kLargeLogit") {
  const TempDir root("compare_max_logit");
  FakeRun r;
  r.loss = constant(4, 1.0);
  write_run(root / "run", r);
  // Two heads of two layers; the run's largest logit is the largest over all of them: 3, 60, 150 (step 2), 120.
  const fs::path csv = root / "run" / "metrics.csv";
  std::istringstream in(read_text(csv));
  const std::vector<std::vector<double>> heads{{3, 60, 150, 120}, {1, 2, 3, 4}, {-2, 5, 9, 7}, {0, 1, 2, 3}};
  std::string out, line;
  for (int row = -1; std::getline(in, line); ++row) {
    out += line;
    for (std::size_t h = 0; h < heads.size(); ++h)
      out += row < 0 ? fmt::format(",attn/l{}h{}/score_max_abs", h / 2, h % 2) : fmt::format(",{:g}", heads[h][row]);
    out += "\n";
  }
  std::ofstream(csv) << out;
  const Comparison cmp = analyse_dirs({root.string()});
  REQUIRE(cmp.runs.size() == 1);
  CHECK(cmp.stats[0]["max_logit_first"] == doctest::Approx(3));
  CHECK(cmp.stats[0]["max_logit_max"] == doctest::Approx(150));
  CHECK(cmp.stats[0]["step_max_logit_large"] == doctest::Approx(2));  // 150 > 100 at the third row, step 2
  const Table t = arm_table(cmp);
  const auto column = [&](const std::string& term) {
    for (std::size_t i = 0; i < t.header_links.size(); ++i)
      if (t.header_links[i] == glossary_anchor(term)) return t.rows[0][i];
    return std::string("no column");
  };
  CHECK(column("max_logit_first") == "3.000");
  CHECK(column("max_logit_max") == "150.000");
  CHECK(numbers_in(column("step_max_logit_large")).front() == doctest::Approx(2));
}

TEST_CASE("an arm without a counterpart along --compare is named for any compared setting, not only the scale") {
  const TempDir root("compare_unpaired_axis");
  FakeRun r;
  r.loss = constant(30, 1.0);
  r.optimizer = "adamw";
  write_run(root / "adamw-kv", r);  // FakeRun's task: kv_recall
  r.optimizer = "sgd";
  r.extra_config = {{"task", "copy"}};
  write_run(root / "sgd-copy", r);
  Comparison c = analyse_dirs({root.string()});
  c.axis = "optimizer";
  REQUIRE(c.arms.size() == 2);
  CHECK(arm_pairs(c, "optimizer", "").empty());
  const auto unpaired = unpaired_arms(c, "optimizer");
  REQUIRE(unpaired.size() == 2);
  for (const UnpairedArm& u : unpaired) CHECK(u.differs_in == std::vector<std::string>{"task"});
  CHECK(no_comparison_notes(c).size() == 1);  // one line: no arm has a counterpart
  // Along the scale (both unscaled) nothing is compared and nothing is missing.
  CHECK(unpaired_arms(c, "scale").empty());
}

TEST_CASE("a scaling's own settings do not split arms for the scaling comparison, and still label the arms") {
  const TempDir root("compare_own_settings");
  auto run = [&](const fs::path& dir, const std::string& scale, const nlohmann::json& extra, double loss) {
    FakeRun r;
    r.scale = scale;
    r.loss = constant(30, loss);
    r.extra_config = extra;
    write_run(dir, r);
  };
  // `--scale softcap,sqrt_dk` with --softcap-cap 30: one comparison, softcap labelled with its cap.
  run(root / "softcap" / "sqrt", "sqrt_dk", nlohmann::json::object(), 0.5);
  run(root / "softcap" / "cap30", "softcap", {{"softcap_cap", 30.0}}, 0.4);
  std::string md;
  const std::string console = compare_text(root / "softcap", &md);
  INFO(console);
  CHECK(console.find("no scaling comparison") == std::string::npos);
  const Comparison softcap = analyse_dirs({(root / "softcap").string()});
  REQUIRE(softcap.arms.size() == 2);
  const auto pairs = arm_pairs(softcap, "scale", "none");
  REQUIRE(pairs.size() == 1);
  std::set<std::string> names{arm_name(softcap, softcap.arms[pairs[0].subject]),
                              arm_name(softcap, softcap.arms[pairs[0].baseline])};
  CHECK(names == std::set<std::string>{"sqrt_dk", "softcap (softcap_cap=30)"});  // sqrt_dk has no cap to show

  // Two caps are two arms, each compared with sqrt_dk and named by its cap.
  run(root / "softcap" / "cap50", "softcap", {{"softcap_cap", 50.0}}, 0.45);
  const Comparison caps = analyse_dirs({(root / "softcap").string()});
  REQUIRE(caps.arms.size() == 3);
  // Without an unscaled arm, every two of the three are compared.
  const auto three_pairs = arm_pairs(caps, "scale", "none");
  REQUIRE(three_pairs.size() == 3);
  std::set<std::string> named;
  for (const ArmPair& p : three_pairs)
    for (auto a : {p.subject, p.baseline}) named.insert(arm_name(caps, caps.arms[a]));
  CHECK(named == std::set<std::string>{"sqrt_dk", "softcap (softcap_cap=30)", "softcap (softcap_cap=50)"});
  CHECK(compare_text(root / "softcap").find("no scaling comparison") == std::string::npos);

  // README's dk_power, read by a build that does not register it: the setting no declaration knows belongs to the
  // scaling this build does not know.
  run(root / "dk_power" / "sqrt", "sqrt_dk", nlohmann::json::object(), 0.5);
  run(root / "dk_power" / "p075", "dk_power", {{"dk_power_exponent", 0.75}}, 0.4);
  const Comparison power = analyse_dirs({(root / "dk_power").string()});
  REQUIRE(power.arms.size() == 2);
  const auto power_pairs = arm_pairs(power, "scale", "none");
  REQUIRE(power_pairs.size() == 1);
  CHECK(arm_name(power, power.arms[power_pairs[0].subject]) == "dk_power (dk_power_exponent=0.75)");

  // Arms that also differ in a setting of the model are not compared, and the note names that setting only.
  run(root / "wider" / "sqrt", "sqrt_dk", nlohmann::json::object(), 0.5);
  run(root / "wider" / "cap30", "softcap", {{"softcap_cap", 30.0}, {"d_model", 32}}, 0.4);
  const std::string wider = compare_text(root / "wider");
  INFO(wider);
  const Comparison wider_cmp = analyse_dirs({(root / "wider").string()});
  for (const UnpairedArm& u : unpaired_arms(wider_cmp, "scale"))
    CHECK(u.differs_in == std::vector<std::string>{"d_model"});
  REQUIRE(no_comparison_notes(wider_cmp).size() == 1);
  CHECK(wider.find(no_comparison_notes(wider_cmp)[0]) != std::string::npos);
}

TEST_CASE("runs on other contents of one input file are other arms, labelled by file and hash, never compared") {
  // Two char_lm runs of one path, the file replaced between them, one unscaled and one scaled: without the recorded
  // hashes they read as "unscaled trains worse (2.3 vs 0.03)".
  const TempDir root("compare_inputs");
  auto run_on = [&](const std::string& name, const std::string& scale, double loss, const std::string& hash) {
    FakeRun r;
    r.scale = scale;
    r.loss = constant(30, loss);
    r.extra_config["inputs"] = {{{"setting", "text"}, {"path", "/data/text.txt"}, {"size", 3000}, {"xxh3", hash}}};
    write_run(root / "sweep" / name, r);
  };
  run_on("none", "none", 2.3, "0123456789abcdef");
  run_on("sqrt", "sqrt_dk", 0.03, "fedcba9876543210");
  std::string md;
  const std::string console = compare_text(root / "sweep", &md);
  INFO(console);
  const Comparison cmp = analyse_dirs({(root / "sweep").string()});
  REQUIRE(cmp.arms.size() == 2);
  CHECK(distinguishing_keys(cmp.arms) == std::vector<std::string>{"inputs"});
  CHECK(console.find("text.txt 01234567") != std::string::npos);
  CHECK(console.find("text.txt fedcba98") != std::string::npos);
  CHECK(arm_pairs(cmp, "scale", "none").empty());
  CHECK(judge(cmp, "scale", "none").empty());
  REQUIRE(unpaired_arms(cmp, "scale").size() == 2);
  CHECK(unpaired_arms(cmp, "scale")[0].differs_in == std::vector<std::string>{"inputs"});

  // The same bytes: one comparison, and no inputs column.
  run_on("sqrt", "sqrt_dk", 0.03, "0123456789abcdef");
  const Comparison same = analyse_dirs({(root / "sweep").string()});
  CHECK(distinguishing_keys(same.arms).empty());
  CHECK(arm_pairs(same, "scale", "none").size() == 1);
}

TEST_CASE("arms of d_model 64 and 128 are labelled by d_model, not by the d_ff that follows from it") {
  const TempDir root("compare_d_model");
  for (const std::size_t d_model : {64, 128}) {
    TrainConfig c = short_run(root / "sweep" / ("d" + std::to_string(d_model)), "kv_recall", "sqrt_dk", 2);
    c.model.d_model = d_model;
    c.model.d_k = 16;  // one head size: the arms differ in d_model (and the d_ff following it) only
    xgrad::train::train(c);
  }
  std::string md;
  const std::string console = compare_text(root / "sweep", &md);
  INFO(console);
  INFO(md);
  const Comparison cmp = analyse_dirs({(root / "sweep").string()});
  REQUIRE(cmp.arms.size() == 2);
  CHECK(distinguishing_keys(cmp.arms) == std::vector<std::string>{"d_model"});
  CHECK(arm_label(cmp.arms[0], distinguishing_keys(cmp.arms)) == "d_k=16 sqrt_dk adamw lr=0.003 d_model=64");
  CHECK(console.find("d_model") != std::string::npos);
  CHECK(console.find("d_ff") == std::string::npos);
  CHECK(md.find(markdown_text("d_ff")) == std::string::npos);
  CHECK(md.find(markdown_text("d_model=128")) != std::string::npos);

  // A d_ff that was set (not 4 * d_model) is a setting of its own, shown when it differs.
  TrainConfig c = short_run(root / "sweep" / "d64-ff100", "kv_recall", "sqrt_dk", 2);
  c.model.d_model = 64;
  c.model.d_k = 16;
  c.model.d_ff = 100;
  xgrad::train::train(c);
  const Comparison with_ff = analyse_dirs({(root / "sweep").string()});
  REQUIRE(with_ff.arms.size() == 3);
  CHECK(distinguishing_keys(with_ff.arms) == std::vector<std::string>{"d_model", "d_ff"});
}

// A fake SGD run in dir/<scale>-lr<lr>: loss 4 at step 0, then `final_loss` for 20 steps, or inf at step 1
// (diverged, planned like the others: 21 steps).
void write_sgd_run(const fs::path& dir, double lr, double final_loss, bool diverged, const std::string& scale) {
  write_run(dir / (scale + "-lr" + csv_number(lr)), sgd_run(scale, lr, 0, final_loss, diverged));
}

// Fake SGD runs of one arm at four learning rates unscaled (lr 1 diverged, lr 0.001 ends above its initial loss)
// and at two scaled by sqrt_dk, analysed.
Comparison lr_sweep(const TempDir& root) {
  write_sgd_run(root, 0.01, 1.0, false, "none");
  write_sgd_run(root, 0.1, 0.5, false, "none");
  write_sgd_run(root, 1.0, 0.0, true, "none");
  write_sgd_run(root, 0.001, 5.0, false, "none");  // ends above its initial loss: counts as 4.0
  write_sgd_run(root, 0.01, 0.5, false, "sqrt_dk");
  write_sgd_run(root, 0.1, 0.5, false, "sqrt_dk");
  return analyse_dirs({root.string()});
}

TEST_CASE("LR sensitivity (Wortsman et al. 2023): mean over lr of min(final, initial) minus the best") {
  // Hand example: objectives 1.0, 0.5 and 4.0 (a diverged run counts as its initial loss 4.0):
  // mean 5.5 / 3 = 1.8333, best 0.5, sensitivity 1.3333.
  CHECK(lr_sensitivity({1.0, 0.5, 4.0}) == doctest::Approx(5.5 / 3 - 0.5));
  CHECK(lr_sensitivity({1.0, nan_value, 1.0}) == doctest::Approx(0.0));
  CHECK(std::isnan(lr_sensitivity({1.0})));

  const TempDir root("compare_lr");
  const Comparison cmp = lr_sweep(root);
  REQUIRE(cmp.lr_groups.size() == 2);
  const LrGroup& none = cmp.lr_groups[0];
  REQUIRE(none.arms.size() == 4);
  CHECK(cmp.arms[none.arms[0]].lr() == doctest::Approx(0.001));  // by increasing lr
  CHECK(cmp.arms[none.arms[0]].stat("lr_objective").mean == doctest::Approx(4.0));
  CHECK(cmp.arms[none.arms[3]].stat("lr_objective").mean == doctest::Approx(4.0));
  CHECK(none.sensitivity == doctest::Approx((4.0 + 1.0 + 0.5 + 4.0) / 4 - 0.5));
  CHECK(cmp.arms[none.best_arm].lr() == doctest::Approx(0.1));
  const LrGroup& scaled = cmp.lr_groups[1];
  CHECK(scaled.sensitivity == doctest::Approx(0.0));

  const Table t = lr_table(cmp);
  REQUIRE(t.rows.size() == 2);
  CHECK(t.rows[0].back() == "1.875");
  INFO(t.rows[0][3]);
  // Per lr its objective; at lr 1, 4 (the initial loss) with 1 of 1 runs diverged.
  CHECK(numbers_in(t.rows[0][3]) == std::vector<double>{0.001, 4, 0.01, 1, 0.1, 0.5, 1, 4, 1, 1});
}

TEST_CASE("LR sensitivity: two scalings are compared over the learning rates both were run at") {
  const TempDir root("compare_lr_shared");
  const Comparison cmp = lr_sweep(root);
  REQUIRE(cmp.lr_groups.size() == 2);
  const LrGroup &none = cmp.lr_groups[0], &scaled = cmp.lr_groups[1];
  // The two scalings are compared over the learning rates both were run at (0.01 and 0.1): none's 1.875 is over
  // four learning rates, sqrt_dk's 0 over two, and a sensitivity over more learning rates is not comparable.
  const Verdict shared = lr_verdict(cmp, none, scaled);
  CHECK(shared.outcome != Outcome::not_decided);
  CHECK(shared.subject_value == doctest::Approx((1.0 + 0.5) / 2 - 0.5));  // over lr 0.01 and 0.1 only
  CHECK(shared.baseline_value == doctest::Approx(0.0));
  const auto v = verdict_of(cmp, "less_lr_sensitive", "sqrt_dk");
  REQUIRE(v);
  CHECK(v->outcome == Outcome::better);
  CHECK(v->baseline_value == doctest::Approx(0.25));
  CHECK(v->subject_value == doctest::Approx(0.0));
}

TEST_CASE("LR sensitivity: final loss against lr as a summary figure, one line per scaling") {
  const TempDir root("compare_lr_figure");
  const Comparison cmp = lr_sweep(root);
  // The same lrs as a summary figure: final loss against lr, one line per scaling; lr 1 diverged, so no point.
  const std::vector<SummaryFigure> figures = summary_figures(cmp);
  REQUIRE(figures.size() == 1);  // one d_k: no figure against d_k
  const SummaryFigure& by_lr = figures[0];
  CHECK(by_lr.name == "final_loss_vs_lr");
  REQUIRE(by_lr.lines.size() == 2);
  REQUIRE(by_lr.lines[0].points.size() == 4);
  CHECK(by_lr.lines[0].scale == "none");
  CHECK(by_lr.lines[0].points[1].x == doctest::Approx(0.01));
  CHECK(by_lr.lines[0].points[1].y == doctest::Approx(1.0));
  CHECK(std::isnan(by_lr.lines[0].points[3].y));
  CHECK(by_lr.lines[0].points[3].n_diverged == 1);
}

TEST_CASE("LR sensitivity is not decided where both scalings diverged at one learning rate or neither learned") {
  const TempDir root("compare_lr_undecided");
  const auto run = write_sgd_run;
  for (const std::string scale : {"none", "sqrt_dk"}) {
    // Both diverge at lr 1: there both objectives are the initial loss, whatever the scaling.
    run(root / "diverged", 0.01, scale == "none" ? 1.0 : 0.5, false, scale);
    run(root / "diverged", 0.1, 0.5, false, scale);
    run(root / "diverged", 1.0, 0.0, true, scale);
    // Neither learns: the final loss stays at the initial loss at every lr.
    run(root / "flat", 0.01, 4.0, false, scale);
    run(root / "flat", 0.1, 4.0, false, scale);
  }
  {
    const Comparison cmp = analyse_dirs({(root / "diverged").string()});
    REQUIRE(cmp.lr_groups.size() == 2);
    const Verdict lr = lr_verdict(cmp, cmp.lr_groups[0], cmp.lr_groups[1]);
    CHECK(lr.outcome == Outcome::not_decided);
    CHECK(lr.why_not == "both_diverged");
    REQUIRE(lr.why_items.size() == 1);  // the numbers of lr 1, where both diverged; the sentence only when rendered
    CHECK(std::get<double>(lr.why_items[0].at("lr").value) == 1.0);
    CHECK(std::get<long long>(lr.why_items[0].at("subject_n").value) == 1);
    CHECK(std::get<long long>(lr.why_items[0].at("baseline_of").value) == 1);
    CHECK(lr.why_fields.count("lrs") == 0);
    CHECK(numbers_in(why_not_text(lr)) == std::vector<double>{1, 1, 1, 1, 1});
    const auto v = verdict_of(cmp, "less_lr_sensitive", "sqrt_dk");
    REQUIRE(v);
    CHECK(v->outcome == Outcome::not_decided);
    CHECK(v->why_not == "both_diverged");
  }
  {
    const Comparison cmp = analyse_dirs({(root / "flat").string()});
    REQUIRE(cmp.lr_groups.size() == 2);
    const Verdict lr = lr_verdict(cmp, cmp.lr_groups[0], cmp.lr_groups[1]);
    CHECK(lr.outcome == Outcome::not_decided);
    CHECK(lr.why_not == "neither_learned_lr");
    CHECK(verdict_of(cmp, "less_lr_sensitive", "sqrt_dk")->outcome == Outcome::not_decided);
    CHECK(findings(cmp).size() <= 10);
  }
}

TEST_CASE("LR sensitivity of a group whose every run diverged: no value, not 0, and not decided") {
  const TempDir root("compare_lr_all_diverged");
  for (const double lr : {0.1, 1.0}) {
    write_sgd_run(root, lr, 0.0, true, "none");  // each objective the initial loss 4: a spread of 0
    write_sgd_run(root, lr, lr == 0.1 ? 0.5 : 1.0, false, "sqrt_dk");
  }
  const Comparison cmp = analyse_dirs({root.string()});
  REQUIRE(cmp.lr_groups.size() == 2);
  CHECK(std::isnan(cmp.lr_groups[0].sensitivity));
  CHECK(cmp.lr_groups[1].sensitivity == doctest::Approx(0.25));
  const Table t = lr_table(cmp);
  REQUIRE(t.rows.size() == 2);
  CHECK(numbers_in(t.rows[0].back()).empty());                 // no sensitivity
  CHECK(numbers_in(t.rows[0][t.rows[0].size() - 2]).empty());  // and no best lr
  const auto v = verdict_of(cmp, "less_lr_sensitive", "sqrt_dk");
  REQUIRE(v);
  CHECK(v->outcome == Outcome::not_decided);
  CHECK(std::isnan(v->baseline_value));
}

// Two seeds of an unscaled and a sqrt_dk arm at d_k 64; the unscaled seed 1 diverged at step 16 with a W_q
// gradient norm of 5.83 and a score std of 1e29.
void write_one_diverged_seed(const fs::path& root) {
  for (int seed = 0; seed < 2; ++seed) {
    FakeRun none;
    none.d_k = 64;
    none.seed = seed;
    none.loss = constant(30, 1.5);
    none.w_q0 = constant(30, 0.31);
    none.w_q1 = constant(30, 0.0);
    none.w_k0 = constant(30, 0.2);
    none.w_k1 = constant(30, 0.0);
    none.entropy = constant(30, 0.3);
    none.score_std = constant(30, 8.0);
    if (seed == 1) {
      none.loss.resize(17);
      none.loss[16] = nan_value;
      none.w_q0 = constant(17, 5.83);
      none.w_k0 = constant(17, 5.0);
      none.score_std = constant(17, 8.0);
      none.score_std[15] = none.score_std[16] = 1e29;
      none.entropy = constant(17, 0.0);
      none.diverged = true;
      none.diverged_step = 16;
      none.steps = 30;
    }
    write_run(root / ("none-s" + std::to_string(seed)), none);
    FakeRun scaled;
    scaled.d_k = 64;
    scaled.seed = seed;
    scaled.scale = "sqrt_dk";
    scaled.loss = constant(30, 0.5);
    scaled.w_q0 = constant(30, 0.47);
    scaled.w_q1 = constant(30, 0.0);
    scaled.w_k0 = constant(30, 0.4);
    scaled.w_k1 = constant(30, 0.0);
    scaled.entropy = constant(30, 2.0);
    scaled.score_std = constant(30, 1.0);
    write_run(root / ("sqrt-s" + std::to_string(seed)), scaled);
  }
}

TEST_CASE("a diverged run is left out of every statistic of its arm, and counted") {
  // The issue's report: one unscaled run that diverged at step 16 (W_q gradient norm 5.83, score std 1e+29) turned
  // the comparison into "unscaled W_q gradients are not smaller but larger (2.15 vs 0.472)"; without it, 0.31.
  const TempDir root("compare_diverged_aggregates");
  write_one_diverged_seed(root);
  const Comparison cmp = analyse_dirs({root.string()});
  REQUIRE(cmp.arms.size() == 2);
  const ArmStats& none = cmp.arms[0];
  REQUIRE(none.scale() == "none");
  CHECK(none.diverged_steps == std::vector<long>{16});
  CHECK(none.kept.size() == 1);
  CHECK(none.stat("mean_grad_norm_w_q").n == 1);
  CHECK(none.stat("mean_grad_norm_w_q").mean == doctest::Approx(0.31));
  CHECK(none.stat("mean_grad_norm_w_k").mean == doctest::Approx(0.2));
  CHECK(none.stat("frac_zero_grad_w_q").n == 1);
  CHECK(none.stat("score_std_last").mean == doctest::Approx(8.0));
  CHECK(none.stat("entropy_first").mean == doctest::Approx(0.3));
  CHECK(none.stat("final_loss").n == 1);
}

TEST_CASE("a diverged run is left out of the story checks and the sentences of its arm, and counted there") {
  const TempDir root("compare_diverged_story");
  write_one_diverged_seed(root);
  const Comparison cmp = analyse_dirs({root.string()});
  // The diverged seed's gradient (5.83) is in no number: the unscaled mean is its other seed's 0.31.
  const auto v = verdict_of(cmp, "more_gradient_w_q", "sqrt_dk");
  REQUIRE(v);
  CHECK(v->outcome == Outcome::better);
  CHECK(v->baseline_value == doctest::Approx(0.31));
  CHECK(v->subject_value == doctest::Approx(0.47));
  CHECK(verdict_of(cmp, "diverges_less", "sqrt_dk")->outcome == Outcome::better);  // 0 of 2 against 1 of 2
  const ArmStats& none = cmp.arms[v->baseline];
  CHECK(none.n_seeds == 2);
  CHECK(none.diverged_steps.size() == 1);
  CHECK(none.stat("score_std_first").mean == doctest::Approx(8.0));  // the diverged seed's 1e29 left out
}

TEST_CASE("the plots draw a diverged run but leave it out of its arm's mean line, and say so") {
  const TempDir root("compare_diverged_plots");
  write_one_diverged_seed(root);
  // The plots draw the diverged run (thin, with its cross) but leave it out of the arm's mean line, and say so.
  PathGuard no_gnuplot("/nonexistent-xgrad-test");  // the data files and scripts are written either way
  CompareOptions options;
  options.inputs = {root.string()};
  options.out = (root / "report").string();
  std::ostringstream out;
  run_compare(options, out);
  const fs::path plots = root / "report" / "plots";
  std::ifstream mean_w_q(plots / "data" / "arm0_w_q.dat");
  std::string header, step, value;
  std::getline(mean_w_q, header);
  mean_w_q >> step >> value;
  REQUIRE(step == "0");
  CHECK(std::stod(value) == doctest::Approx(0.31));
  CHECK(read_text(plots / "loss.gp").find("title 'none (2 runs, 1 diverged: not in the mean)'") != std::string::npos);
  CHECK(read_text(plots / "score_std.gp").find("none (2 runs, 1 diverged: not in the mean)") != std::string::npos);
}

TEST_CASE("near-zero gradient column: steps below 1e-6 of the step-0 norm, beside the exactly-zero count") {
  // The issue's run: a W_q gradient norm below 1e-12 on most steps, exactly zero on none, showed "0%".
  GradientStats g;
  g.add(2.0, 1.0, 0.5, 0.5);        // step 0: the reference norms
  g.add(2.0, 1.0, 1e-13, 0.5);      // below 1e-6 x 0.5
  g.add(2.0, 1.0, 4e-7, 0.0);       // below 5e-7; W_k exactly zero
  g.add(2.0, 1.0, 6e-7, 1e-3);      // above 5e-7
  g.add(nan_value, 1.0, 0.0, 0.0);  // not a finite step: not counted
  CHECK(g.finite_steps == 4);
  CHECK(g.frac_zero_grad_w_q() == doctest::Approx(0.0));
  CHECK(g.frac_near_zero_grad_w_q() == doctest::Approx(0.5));
  CHECK(g.frac_zero_grad_w_k() == doctest::Approx(0.25));
  CHECK(g.frac_near_zero_grad_w_k() == doctest::Approx(0.25));  // exactly zero is near zero too
  CHECK(std::isnan(GradientStats().frac_near_zero_grad_w_q()));

  const TempDir root("compare_near_zero");
  FakeRun r;
  r.loss = constant(10, 2.0);
  r.w_q0 = constant(10, 1e-13);
  r.w_q0[0] = 0.8;
  r.w_q1 = constant(10, 0.0);
  r.w_q1[0] = 0.6;  // step 0: norm 1
  write_run(root / "run", r);
  const Comparison cmp = analyse_dirs({root.string()});
  CHECK(cmp.stats[0]["frac_zero_grad_w_q"] == doctest::Approx(0.0));
  CHECK(cmp.stats[0]["frac_near_zero_grad_w_q"] == doctest::Approx(0.9));
  CHECK(cmp.arms[0].stat("frac_near_zero_grad_w_q").mean == doctest::Approx(0.9));
  const Table t = arm_table(cmp);
  INFO(t.text());
  REQUIRE(t.rows.size() == 1);
  const auto column = [&](const std::string& name) {
    const auto it = std::find(t.header.begin(), t.header.end(), name);
    REQUIRE(it != t.header.end());
    return t.rows[0][static_cast<std::size_t>(it - t.header.begin())];
  };
  CHECK(column("W_q grad =0") == "0%");
  const auto near_zero = std::find_if(t.header.begin(), t.header.end(),
                                      [](const std::string& h) { return h.find("<1e-06") != std::string::npos; });
  REQUIRE(near_zero != t.header.end());
  CHECK(column(*near_zero) == "90.0%");
  std::string md;
  compare_text(root, &md);
  // The column's header links to its statistic's entry in the glossary, which defines it.
  const std::string entry = "<a id=\"" + glossary_anchor("frac_near_zero_grad_{w}") + "\"></a>";
  CHECK(md.find("[" + markdown_escape(markdown_text(*near_zero, true)) + "](#" +
                glossary_anchor("frac_near_zero_grad_{w}") + ")") != std::string::npos);
  REQUIRE(md.find(entry) != std::string::npos);
  CHECK(md.find("1e-6", md.find(entry)) < md.find('\n', md.find(entry)));
}

TEST_CASE("diverged runs: counted per arm with their step, left out of final loss, never poison means") {
  const TempDir root("compare_diverged");
  FakeRun ok;
  ok.loss = constant(10, 1.0);
  write_run(root / "ok", ok);
  FakeRun bad = ok;
  bad.seed = 1;
  bad.loss = {1.0, 2.0, nan_value};
  bad.diverged = true;
  bad.diverged_step = 2;
  bad.steps = 10;
  write_run(root / "bad", bad);
  // No summary.json: divergence is read from the metrics (a non-finite loss), and the run is incomplete.
  FakeRun crashed = ok;
  crashed.seed = 2;
  crashed.loss = {1.0, inf_value};
  crashed.summary = false;
  crashed.steps = 10;
  write_run(root / "crashed", crashed);

  // Under --on-nan skip a non-finite step is skipped and the run goes on: not a divergence, and its nan row is
  // left out of the means.
  FakeRun skipping = ok;
  skipping.on_nan = "skip";
  skipping.loss = {1.0, nan_value, 0.5};
  skipping.summary = false;
  write_run(root / "skipping" / "run", skipping);
  const Comparison skip_cmp = analyse_dirs({(root / "skipping").string()});
  CHECK_FALSE(skip_cmp.runs[0].diverged);
  CHECK(skip_cmp.stats[0]["final_loss"] == doctest::Approx(0.75));
  CHECK(skip_cmp.stats[0]["auc_loss"] == doctest::Approx(0.75));
  fs::remove_all(root / "skipping");

  const Comparison cmp = analyse_dirs({root.string()});
  REQUIRE(cmp.arms.size() == 1);
  const ArmStats& arm = cmp.arms[0];
  CHECK(arm.runs.size() == 3);
  CHECK(arm.used.size() == 2);  // the incomplete run is left out of the numbers
  CHECK(arm.n_incomplete == 1);
  CHECK(arm.diverged_steps == std::vector<long>{2});
  CHECK(format_diverged(arm) == "1/2 (step 2)");
  CHECK(arm.stat("final_loss").n == 1);
  CHECK(arm.stat("final_loss").mean == doctest::Approx(1.0));
  CHECK(arm.stat("auc_loss").mean == doctest::Approx(1.0));
  CHECK(format_seeds(arm) == "2 (+1 incomplete)");
  for (const auto& run : cmp.runs)
    if (run.dir.find("crashed") != std::string::npos) {
      CHECK(run.diverged);
      CHECK(run.diverged_step == 1);
      CHECK(run.incomplete);
    }
}

TEST_CASE("a length evaluation no trainer writes makes summary.json unreadable, naming the value") {
  const TempDir root("compare_length_eval");
  const nlohmann::json good{{"setting", "n_pairs"}, {"value", 16},          {"seq_len", 17},      {"loss", 0.5},
                            {"accuracy", 0.9},      {"max_prob_mean", 0.6}, {"entropy_mean", 1.2}};
  // key -> a value out of its range: accuracy outside [0, 1], a negative loss. "" keeps the evaluation
  // intact, and a null loss is the NaN to_json writes for a value not measured: both read.
  const std::vector<std::pair<std::string, nlohmann::json>> damaged{
      {"accuracy", 1e308}, {"accuracy", -3}, {"loss", -1}, {"", nullptr}, {"loss", nullptr}};
  for (std::size_t i = 0; i < damaged.size(); ++i) {
    const std::string& key = damaged[i].first;
    FakeRun r;
    r.loss = {3.0, 2.0, 1.0};
    const fs::path dir = root / std::to_string(i);
    write_run(dir, r);
    nlohmann::json summary = fake_run_detail::summary(r), bad = good;
    bad["value"] = 32;  // another evaluation: one of the same value is refused (test below)
    if (!key.empty()) bad[key] = damaged[i].second;
    summary["length_eval"] = {good, bad};
    std::ofstream(dir / kSummaryFile) << summary.dump();
    const RunRecord run = load_run(dir.string());
    const bool reads = key.empty() || damaged[i].second.is_null();
    INFO(key << " " << damaged[i].second.dump() << ": " << run.incomplete_reason);
    CHECK(run.has_summary == reads);
    CHECK(run.incomplete == !reads);
    if (reads) continue;
    CHECK(run.incomplete_reason.find("summary.json") != std::string::npos);
    CHECK(run.incomplete_reason.find(key + " is " + damaged[i].second.dump()) != std::string::npos);
  }
}

TEST_CASE("two length evaluations of one setting and value make summary.json unreadable, naming them") {
  const TempDir root("compare_length_eval_twice");
  const nlohmann::json e{{"setting", "n_pairs"}, {"value", 16},          {"seq_len", 17},      {"loss", 0.5},
                         {"accuracy", 0.9},      {"max_prob_mean", 0.6}, {"entropy_mean", 1.2}};
  FakeRun r;
  r.loss = {3.0, 2.0, 1.0};
  write_run(root, r);
  nlohmann::json summary = fake_run_detail::summary(r), other = e;
  other["accuracy"] = 0.1;  // which of the two a reader would take is not for it to guess
  summary["length_eval"] = {e, other};
  std::ofstream(root / kSummaryFile) << summary.dump();
  const RunRecord run = load_run(root.string());
  INFO(run.incomplete_reason);
  CHECK(run.incomplete);
  CHECK_FALSE(run.has_summary);
  CHECK(run.incomplete_reason.find("n_pairs 16") != std::string::npos);
}

TEST_CASE("a summary.json value of the wrong type or missing is named with its file and key, and not read") {
  const TempDir root("compare_summary_types");
  const nlohmann::json eval{{"setting", "n_pairs"}, {"value", 16},          {"seq_len", 17},      {"loss", "low"},
                            {"accuracy", 0.9},      {"max_prob_mean", 0.6}, {"entropy_mean", 1.2}};
  // key -> its value (discarded: the key is left out); "loss" is the length evaluation's.
  const std::vector<std::pair<std::string, nlohmann::json>> damaged{{"final_loss", "abc"},
                                                                    {"steps_done", -3.5},
                                                                    {"steps_done", nlohmann::json::value_t::discarded},
                                                                    {"diverged", "no"},
                                                                    {"diverged_step", 2.5},
                                                                    {"skipped_steps", nlohmann::json::array()},
                                                                    {"length_eval", 5},
                                                                    {"loss", nlohmann::json::array({eval})}};
  for (std::size_t i = 0; i < damaged.size(); ++i) {
    const std::string& key = damaged[i].first;
    const nlohmann::json& value = damaged[i].second;
    FakeRun r;
    r.loss = {3.0, 2.0, 1.0};
    const fs::path dir = root / std::to_string(i);
    write_run(dir, r);
    nlohmann::json summary = fake_run_detail::summary(r);
    if (value.is_discarded())
      summary.erase(key);
    else
      summary[key == "loss" ? "length_eval" : key] = value;
    std::ofstream(dir / kSummaryFile) << summary.dump();
    const RunRecord run = load_run(dir.string());
    INFO(key << ": " << run.incomplete_reason);
    CHECK_FALSE(run.has_summary);
    CHECK(run.incomplete_reason.find((dir / kSummaryFile).string() + ": ") != std::string::npos);
    CHECK(run.incomplete_reason.find(key) != std::string::npos);
  }
}

TEST_CASE("a summary.json or config.json over kMaxRunJsonBytes is refused before parsing, naming its size") {
  const TempDir root("compare_huge_run_json");
  FakeRun r;
  r.loss = {3.0, 2.0, 1.0};
  write_run(root, r);
  // Valid JSON (trailing white space) one byte over the bound: parsed, it would read.
  const auto pad = [](const fs::path& file) {
    std::string text = read_text(file);
    text.append(kMaxRunJsonBytes + 1 - text.size(), ' ');
    std::ofstream(file) << text;
    return std::to_string(text.size()) + " bytes";
  };
  const std::string size = pad(root / kSummaryFile);
  const RunRecord run = load_run(root.string());
  INFO(run.incomplete_reason);
  CHECK_FALSE(run.has_summary);
  CHECK(run.incomplete_reason.find((root / kSummaryFile).string() + ": " + size) != std::string::npos);
  pad(root / kConfigFile);
  const std::string named = (root / kConfigFile).string() + ": " + size;
  CHECK_THROWS_WITH_AS(load_run(root.string()), doctest::Contains(named.c_str()), std::exception);
}

TEST_CASE("a run cut short (no summary.json, truncated last line) is incomplete but still read") {
  const TempDir root("compare_cut");
  FakeRun r;
  r.loss = {3.0, 2.0, 1.0};
  r.steps = 100;
  r.summary = false;
  r.tail = "3,0.5,0.1";  // a row cut mid-line by a crash
  write_run(root / "cut", r);
  const Comparison cmp = analyse_dirs({root.string()});
  REQUIRE(cmp.runs.size() == 1);
  const RunRecord& run = cmp.runs[0];
  CHECK(run.incomplete);
  CHECK(run.series.size() == 3);
  CHECK(run.incomplete_reason.find("no summary.json") != std::string::npos);
  CHECK(run.incomplete_reason.find("cut short") != std::string::npos);
  CHECK(run.steps_planned == 100);
  CHECK_FALSE(run.diverged);
  // The arm has no complete run, so its numbers come from the incomplete one.
  CHECK(cmp.arms[0].only_incomplete());
  CHECK(cmp.arms[0].used.size() == 1);
  CHECK(cmp.arms[0].stat("auc_loss").mean == doctest::Approx(2.0));
  CHECK(format_seeds(cmp.arms[0]) == "1 (incomplete)");

  // A full last row without its newline was also cut (its last cell may be short): dropped.
  FakeRun r2 = r;
  r2.tail = "3,0.5,0.1,0.01,1,0.5,1,1,1,1,nan,nan,nan,nan,99,nan,1";
  write_run(root / "cut2", r2);
  CHECK(load_run((root / "cut2").string()).series.size() == 3);
}

TEST_CASE("report.md: tables, generated sentences per d_k, and where the usual story does not hold") {
  const TempDir root("compare_report");
  for (int seed = 0; seed < 2; ++seed) {
    FakeRun none;
    none.d_k = 256;
    none.seed = seed;
    none.loss = constant(30, 2.0);
    none.accuracy = constant(30, 0.2);
    none.entropy = constant(30, 0.3);
    none.score_std = constant(30, 16.0);
    none.w_q0 = constant(30, 2.0);  // larger than the scaled run's: against the usual story
    write_run(root / "runs" / ("none-s" + std::to_string(seed)), none);
    FakeRun scaled = none;
    scaled.scale = "sqrt_dk";
    scaled.loss = constant(30, 0.5);
    scaled.accuracy = constant(30, 0.5);
    for (std::size_t i = 20; i < 30; ++i) scaled.accuracy[i] = 0.95;
    scaled.entropy = constant(30, 2.4);
    scaled.score_std = constant(30, 1.0);
    scaled.w_q0 = constant(30, 0.1);
    write_run(root / "runs" / ("sqrt-s" + std::to_string(seed)), scaled);
  }
  const fs::path out_dir = root / "report";
  CompareOptions options;
  options.inputs = {root.string()};
  options.out = out_dir.string();
  options.plots = false;
  options.threshold_window = 1;
  std::ostringstream out;
  CHECK(run_compare(options, out) == 4);
  INFO(out.str());
  CHECK(out.str().find("step acc≥0.9") != std::string::npos);
  REQUIRE(fs::exists(out_dir / "report.md"));
  CHECK_FALSE(fs::exists(out_dir / "plots"));
  const std::string md = read_text(out_dir / "report.md");
  INFO(md);
  const Comparison cmp = analyse_dirs({root.string()}, -1, 0.9, 1);
  // Each claim's verdict, with the numbers it rests on, and its sentence in report.md.
  const struct {
    const char* claim;
    Outcome outcome;
    double subject, baseline;  // NaN: never reached
  } expected[] = {{"starts_less_saturated", Outcome::better, 2.4, 0.3},
                  {"reaches_accuracy_sooner", Outcome::better, 20, nan_value},
                  {"more_gradient_w_q", Outcome::worse, nan_value, nan_value},
                  {"trains_better", Outcome::better, 0.5, 2}};
  for (const auto& e : expected) {
    const auto v = verdict_of(cmp, e.claim, "sqrt_dk");
    REQUIRE(v);
    INFO(e.claim);
    CHECK(v->outcome == e.outcome);
    if (std::isfinite(e.subject)) CHECK(v->subject_value == doctest::Approx(e.subject));
    if (std::isfinite(e.baseline)) CHECK(v->baseline_value == doctest::Approx(e.baseline));
    CHECK(md.find(markdown_text(verdict_sentence(cmp, *v))) != std::string::npos);
  }
  CHECK(verdict_of(cmp, "trains_better", "sqrt_dk")->n_shared == 2);
  CHECK(md.find("## Claims against " + baseline_of(cmp)) != std::string::npos);
  const Table arms = arm_table(cmp);
  REQUIRE(arms.rows.size() == 2);
  CHECK(arms.rows[0][4] == "2");              // seeds
  CHECK(arms.rows[0][5] == "2.000 ± 0.000");  // final loss
  CHECK(md.find(arms.rows[0][5]) != std::string::npos);
  CHECK(md.find("## Glossary") != std::string::npos);
  CHECK(md.find("## Runs read") != std::string::npos);
  CHECK(md.find("runs/none-s0") != std::string::npos);
  CHECK(md.find("--plots false") != std::string::npos);  // why there are no plots
}

TEST_CASE("plots: without gnuplot on PATH compare still works and says so; with gnuplot PNG and SVG are made") {
  const TempDir root("compare_plots");
  for (const std::string scale : {"none", "sqrt_dk"})
    for (int seed = 0; seed < 2; ++seed) {
      FakeRun r;
      r.scale = scale;
      r.seed = seed;
      for (int i = 0; i < 40; ++i) {
        r.loss.push_back(3.0 * std::exp(-0.05 * i * (scale == "none" ? 1 : 2)) + 0.1 * seed);
        r.entropy.push_back(i % 5 == 0 ? (scale == "none" ? 0.3 : 2.0) : nan_value);
        r.score_std.push_back(i % 5 == 0 ? 1.0 + i : nan_value);
      }
      r.w_q0 = constant(40, 0.0);  // exactly zero: nothing to draw on a log axis, must not break gnuplot
      r.w_q1 = constant(40, 0.0);
      write_run(root / (scale + std::to_string(seed)), r);
    }
  const bool have_gnuplot = gnuplot_available();
  {
    PathGuard no_gnuplot("/nonexistent-xgrad-test");
    CHECK_FALSE(gnuplot_available());
    CompareOptions options;
    options.inputs = {root.string()};
    options.out = (root / "without").string();
    options.plots = false;
    std::ostringstream out;
    CHECK(run_compare(options, out) == 4);
    CHECK_FALSE(fs::exists(root / "without" / "plots"));
    options.plots = true;
    options.out = (root / "missing").string();
    CHECK(run_compare(options, out) == 4);
    CHECK(out.str().find("gnuplot not found") != std::string::npos);
    CHECK(fs::exists(root / "missing" / "plots" / "loss.gp"));  // the scripts are still written
    CHECK(read_text(root / "missing" / "report.md").find("gnuplot not found") != std::string::npos);
  }
  if (!have_gnuplot) {
    MESSAGE("gnuplot not installed: PNG/SVG check skipped");
    return;
  }
  CompareOptions options;
  options.inputs = {root.string()};
  options.out = (root / "with").string();
  std::ostringstream out;
  CHECK(run_compare(options, out) == 4);
  INFO(out.str());
  for (const auto& fig : plot_figures()) {
    for (const std::string ext : {".png", ".svg"}) {
      const fs::path p = root / "with" / "plots" / (fig.name + ext);
      INFO(p.string());
      REQUIRE(fs::exists(p));
      CHECK(fs::file_size(p) > 1000);
    }
    std::ifstream png(root / "with" / "plots" / (fig.name + ".png"), std::ios::binary);
    char magic[4] = {};
    png.read(magic, 4);
    CHECK(std::string(magic + 1, 3) == "PNG");
  }
  const std::string md = read_text(root / "with" / "report.md");
  CHECK(md.find("![loss](plots/loss.png)") != std::string::npos);
}

TEST_CASE("seeds: an arm counts distinct (seed, data_seed) pairs; runs sharing one are kept and named in a warning") {
  const TempDir root("compare_duplicate_seeds");
  FakeRun r;
  r.loss = constant(5, 2.0);
  write_run(root / "runs" / "s0", r);
  write_run(root / "copy" / "s0", r);  // the same seed again: a copied or re-run directory
  r.seed = 1;
  write_run(root / "runs" / "s1", r);
  FakeRun other = r;  // another arm: seed 0 with two data streams is two replicates, not a duplicate
  other.d_k = 64;
  other.seed = 0;
  write_run(root / "runs" / "dk64-d0", other);
  other.data_seed = 5;
  write_run(root / "runs" / "dk64-d5", other);

  const Comparison cmp = analyse_dirs({root.string()});
  REQUIRE(cmp.arms.size() == 2);
  const ArmStats& arm = cmp.arms[0];
  CHECK(arm.used.size() == 3);
  CHECK(arm.n_seeds == 2);
  REQUIRE(arm.duplicate_seeds.size() == 1);
  CHECK(arm.duplicate_seeds[0].size() == 2);
  CHECK(format_seeds(arm) == "2 (3 runs)");
  CHECK(cmp.arms[1].n_seeds == 2);
  CHECK(cmp.arms[1].duplicate_seeds.empty());
  CHECK(format_seeds(cmp.arms[1]) == "2");

  const auto warnings = duplicate_seed_warnings(cmp);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find((root / "copy" / "s0").string()) != std::string::npos);
  CHECK(warnings[0].find((root / "runs" / "s0").string()) != std::string::npos);

  CompareOptions options;
  options.inputs = {root.string()};
  options.out = (root / "report").string();
  options.plots = false;
  std::ostringstream out;
  CHECK(run_compare(options, out) == 5);
  CHECK(out.str().find(warnings[0]) != std::string::npos);
  const std::string md = read_text(root / "report" / "report.md");
  INFO(md);
  CHECK(md.find("**Duplicate seeds.**") != std::string::npos);
  CHECK(md.find("../copy/s0") != std::string::npos);                     // relative to the report
  CHECK(md.find("| " + format_seeds(arm) + " |") != std::string::npos);  // the seeds column
  CHECK(md.find("<a id=\"" + glossary_anchor("seed") + "\"></a>") != std::string::npos);
}

TEST_CASE("steps to a threshold, seed by seed: never reached is the latest step; near ties are the same") {
  CHECK(tolerance("steps").between(360, 354) == doctest::Approx(36));  // 10% of the later step
  CHECK(tolerance("steps").between(5, 4) == doctest::Approx(1));       // at least one step

  const TempDir root("compare_story_steps");
  // Loss 2 until the given step, then 0.5 (threshold 1): the run reaches the threshold exactly there; -1: never.
  auto write = [&](std::size_t d_k, const std::string& scale, int seed, long step) {
    FakeRun r;
    r.d_k = d_k;
    r.scale = scale;
    r.seed = seed;
    r.loss = constant(400, 2.0);
    if (step >= 0)
      for (std::size_t i = static_cast<std::size_t>(step); i < 400; ++i) r.loss[i] = 0.5;
    write_run(root / fmt_name(d_k, scale, seed), r);
  };
  const std::vector<long> near_none{358, 360, 362}, near_scaled{352, 354, 356};  // 360 vs 354: a near tie
  const std::vector<long> few_none{382, -1, -1}, few_scaled{383, 383, 383};      // 1/3 seeds, at an earlier step
  const std::vector<long> late_none{300, 310, 290}, late_scaled{100, 110, 90};   // later by far more than 10%
  for (int seed = 0; seed < 3; ++seed) {
    write(16, "none", seed, near_none[seed]);
    write(16, "sqrt_dk", seed, near_scaled[seed]);
    write(64, "none", seed, few_none[seed]);
    write(64, "sqrt_dk", seed, few_scaled[seed]);
    write(256, "none", seed, late_none[seed]);
    write(256, "sqrt_dk", seed, late_scaled[seed]);
  }
  const Comparison cmp = analyse_dirs({root.string()}, 1.0);
  REQUIRE(cmp.arms.size() == 6);
  // Near tie: within 10% of the later step in every seed.
  CHECK(verdict_of(cmp, "reaches_loss_sooner", "sqrt_dk", 16)->outcome == Outcome::same);
  // Unscaled reaches it in 1 of 3 seeds, at the step sqrt_dk does: sooner in two seeds, a tie in one, so not
  // decided (the sentence gives the counts).
  const auto few = verdict_of(cmp, "reaches_loss_sooner", "sqrt_dk", 64);
  CHECK(few->outcome == Outcome::not_decided);
  CHECK(few->seeds_better == 2);
  CHECK(few->seeds_same == 1);
  // Clearly sooner in every seed.
  const auto late = verdict_of(cmp, "reaches_loss_sooner", "sqrt_dk", 256);
  CHECK(late->outcome == Outcome::better);
  CHECK(late->baseline_value == doctest::Approx(300));
  CHECK(late->subject_value == doctest::Approx(100));
}

TEST_CASE("plots: W_k in a lighter shade than W_q; titles give the smoothing window of sparse series honestly") {
  const TempDir root("compare_plot_titles");
  for (const std::string scale : {"none", "sqrt_dk"}) {
    FakeRun r;
    r.scale = scale;
    for (int i = 0; i < 300; ++i) {
      r.loss.push_back(3.0 * std::exp(-0.01 * i));
      const bool measured = i % 10 == 0 || i == 299;  // --log-every 10
      r.entropy.push_back(measured ? 1.0 : nan_value);
      r.score_std.push_back(measured ? 2.0 : nan_value);
    }
    write_run(root / scale, r);
  }
  PathGuard no_gnuplot("/nonexistent-xgrad-test");  // the scripts are written either way
  CompareOptions options;
  options.inputs = {root.string()};
  options.out = (root / "report").string();
  std::ostringstream out;
  CHECK(run_compare(options, out) == 2);
  const fs::path plots = root / "report" / "plots";
  const std::string grad = read_text(plots / "grad_norm.gp");
  INFO(grad);
  // Unscaled rose CC6677: W_q in it, W_k dashed in the colour halfway to white.
  CHECK(grad.find("dt 1 lc rgb '#CC6677' title 'none (1 run): W_q'") != std::string::npos);
  CHECK(grad.find("dt (16,10) lc rgb '#E6B3BB' title 'none (1 run): W_k'") != std::string::npos);
  // 300 rows: a window of +-2 steps, i.e. 5 steps; attention measured every 10 steps is not smoothed by it.
  CHECK(read_text(plots / "loss.gp").find("means smoothed over 5 steps") != std::string::npos);
  const std::string entropy = read_text(plots / "entropy.gp"), score_std = read_text(plots / "score_std.gp");
  CHECK(entropy.find("means not smoothed (measured every 10 steps)") != std::string::npos);
  CHECK(entropy.find("smoothed over 5 steps") == std::string::npos);
  CHECK(score_std.find("means not smoothed (measured every 10 steps)") != std::string::npos);
}

TEST_CASE("a scaling another build registered is warned about once, however many arms and figures draw it") {
  // Runs of a build with its own scaling (and that scaling's own setting), at two d_k: curves and summary figures.
  const TempDir root("compare_unknown_once");
  for (const std::string scale : {"none", "my_scale"})
    for (const std::size_t d_k : {16, 64}) {
      FakeRun r;
      r.scale = scale;
      r.d_k = d_k;
      for (int i = 0; i < 30; ++i) r.loss.push_back(3.0 * std::exp(-0.01 * i));
      r.score_std = constant(30, 1.0);
      r.entropy = constant(30, 1.0);
      if (scale == "my_scale") r.extra_config = {{"my_scale_power", 0.5}};
      write_run(root / fmt_name(d_k, scale, 0), r);
    }
  PathGuard no_gnuplot("/nonexistent-xgrad-test");
  CompareOptions options;
  options.inputs = {root.string()};
  options.out = (root / "report").string();
  std::ostringstream out;
  run_compare(options, out);
  INFO(out.str());
  const std::string warning = "scaling 'my_scale' is not registered in this build";
  std::size_t count = 0;
  for (auto at = out.str().find(warning); at != std::string::npos; at = out.str().find(warning, at + 1)) ++count;
  CHECK(count == 1);
}

TEST_CASE(
    "plots: colour and dash style come from the scaling registry; a name it lacks gets a palette colour and a "
    "warning") {
  const TempDir root("compare_plot_styles");
  for (const std::string scale : {"none", "ssmax", "from_another_build"}) {
    FakeRun r;
    r.scale = scale;
    for (int i = 0; i < 30; ++i) r.loss.push_back(3.0 * std::exp(-0.01 * i));
    write_run(root / scale, r);
  }
  PathGuard no_gnuplot("/nonexistent-xgrad-test");
  CompareOptions options;
  options.inputs = {root.string()};
  options.out = (root / "report").string();
  std::ostringstream out;
  run_compare(options, out);
  const std::string loss = read_text(root / "report" / "plots" / "loss.gp");
  INFO(loss);
  CHECK(loss.find("dt (16,6,2,6) lc rgb '#AA4499' title 'ssmax (1 run)'") != std::string::npos);  // its entry: dash-dot
  CHECK(loss.find("lc rgb '#424242'") == std::string::npos);  // never the grey of an unknown name
  INFO(out.str());
  CHECK(out.str().find("warning: plots: scaling 'from_another_build' is not registered in this build; drawn in #") !=
        std::string::npos);
  // Report order: the unscaled reference first, registered scalings next, unknown names last.
  const Comparison cmp = analyse_dirs({root.string()});
  REQUIRE(cmp.arms.size() == 3);
  CHECK(cmp.arms[0].scale() == "none");
  CHECK(cmp.arms[1].scale() == "ssmax");
  CHECK(cmp.arms[2].scale() == "from_another_build");
}

TEST_CASE("huge numbers print in scientific notation (%.4g from 1e6 up), not as hundreds of digits") {
  CHECK(format_number(1e300) == "1e+300");
  CHECK(format_number(-1e300) == "-1e+300");
  CHECK(format_number(147711528666703025143808.0, 4) == "1.477e+23");
  CHECK(format_number(1e6) == "1e+06");
  CHECK(format_number(999999.5, 1) == "999999.5");  // below 1e6: fixed decimals as before
  CHECK(format_number(2.0794415) == "2.079");
  CHECK(format_mean_sd(MeanSd{3e20, 1e19, 2}) == "3e+20 ± 1e+19");

  const TempDir root("compare_huge");
  FakeRun r;
  r.loss = constant(25, 1e300);
  write_run(root / "run", r);
  CompareOptions options;
  options.inputs = {root.string()};
  options.plots = false;
  std::ostringstream out;
  run_compare(options, out);
  const std::string console = out.str(), report = read_text(root / "report.md");
  INFO(console);
  CHECK(console.find("1e+300") != std::string::npos);
  auto longest_digit_run = [](const std::string& s) {
    std::size_t longest = 0, current = 0;
    for (char ch : s) {
      current = std::isdigit(static_cast<unsigned char>(ch)) ? current + 1 : 0;
      longest = std::max(longest, current);
    }
    return longest;
  };
  CHECK(longest_digit_run(console) < 20);
  CHECK(longest_digit_run(report) < 20);
}

namespace {

// Two seeds each of unscaled and sqrt_dk at d_k 16, 64 and 256: unscaled as good at 16 and worse above, with a
// larger W_q gradient at every d_k, lower entropy and a per-query score gradient that shrinks with d_k.
void write_dk_sweep(const fs::path& root) {
  const std::vector<std::size_t> d_ks{16, 64, 256};
  for (std::size_t d = 0; d < d_ks.size(); ++d)
    for (int seed = 0; seed < 2; ++seed)
      for (const std::string scale : {"none", "sqrt_dk"}) {
        const bool unscaled = scale == "none";
        FakeRun r;
        r.d_k = d_ks[d];
        r.seed = seed;
        r.scale = scale;
        r.loss = constant(30, unscaled ? 0.5 + 0.5 * static_cast<double>(d) + 0.1 * seed : 0.5 + 0.1 * seed);
        r.w_q0 = constant(30, unscaled ? 2.0 : 0.5);
        r.entropy = constant(30, unscaled ? 1.0 / (1.0 + static_cast<double>(d)) : 2.0);
        r.score_std = constant(30, unscaled ? std::sqrt(static_cast<double>(d_ks[d])) : 1.0);
        write_run(root / fmt_name(d_ks[d], scale, seed), r);
        // The median per-query score gradient: its own column (FakeRun writes none), appended to metrics.csv.
        const double grad = unscaled ? std::pow(10.0, -3.0 - 4.0 * static_cast<double>(d)) * (1 + seed) : 1e-3;
        add_score_grad(root / fmt_name(d_ks[d], scale, seed), [grad](std::size_t) { return grad; });
      }
}

}  // namespace

TEST_CASE("report.md opens with at most ten findings counted from the numbers, each linking to its details") {
  const TempDir root("compare_findings");
  write_dk_sweep(root / "runs");
  const Comparison cmp = analyse_dirs({(root / "runs").string()});
  REQUIRE(cmp.arms.size() == 6);
  const std::vector<FindingLine> lines = findings(cmp);
  REQUIRE(!lines.empty());
  CHECK(lines.size() <= 10);
  std::string all;
  for (const auto& l : lines) all += l.text + "\n";
  INFO(all);
  for (const auto& l : lines) CHECK(word_count(l.text) <= 40);
  // Better in 2 of 3 comparisons, as well in 1, as judge() has it.
  const auto trains = outcome_counts(cmp, "trains_better", "sqrt_dk");
  CHECK(trains == std::vector<double>{2, 0, 1, 0, 3});
  CHECK(lines[0].glossary == glossary_anchor("tolerance loss"));
  CHECK(numbers_in(lines[0].text) == std::vector<double>{2, 3, 1});
  // Of the 3 comparisons, per gradient claim (step 0, before the loss threshold, over all steps; W_q then W_k) those
  // where sqrt_dk gives more and less gradient: "Of 3 comparisons ..., at step 0 in 0/3, ...".
  std::vector<double> gradient{3, 0};
  for (const std::string w : {"w_q", "w_k"})
    for (const std::string claim : {"more_gradient_step0_", "more_gradient_before_loss_", "more_gradient_"}) {
      gradient.push_back(outcome_counts(cmp, claim + w, "sqrt_dk")[0]);
      gradient.push_back(outcome_counts(cmp, claim + w, "sqrt_dk")[1]);
    }
  CHECK(outcome_counts(cmp, "more_gradient_step0_w_q", "sqrt_dk")[1] == 3);  // unscaled's is larger in every one
  CHECK(lines[1].glossary == glossary_anchor("tolerance gradient"));
  CHECK(numbers_in(lines[1].text) == gradient);
  // d_k, then the step-0 entropy per scaling and d_k.
  const auto entropy = findings_of(cmp, "entropy_first");
  REQUIRE(entropy.size() == 1);
  const auto e = numbers_in(entropy[0].text);
  CHECK(std::vector<double>(e.begin(), e.begin() + 10) == std::vector<double>{0, 16, 64, 256, 1, 0.5, 0.33, 2, 2, 2});
  // One arm per scaling and d_k: the median over its two seeds of the score gradient (1 and 2 × 10^-3, 10^-7,
  // 10^-11) over the loss (0.5 + 0.5 d + 0.1 seed) before the loss threshold 1, no range.
  const auto score = findings_of(cmp, "score_grad_relative");
  REQUIRE(score.size() == 1);
  CHECK(numbers_in(score[0].text) ==
        std::vector<double>{16, 64, 256, 0.0027, 1.4e-07, 9.6e-12, 0.0018, 0.0018, 0.0018});
  CHECK(numbers_in(findings_of(cmp, "diverged run").at(0).text) == std::vector<double>{12});  // none of N

  const std::string md = report_md({(root / "runs").string()}, root / "report");
  INFO(md);
  const auto findings_at = md.find("## Findings");
  REQUIRE(findings_at != std::string::npos);
  CHECK(findings_at < md.find("(#glossary)"));
  CHECK(md.find("(#glossary)") < md.find("## Results"));
  CHECK(md.find("- " + markdown_text(lines[0].text) + " ([rule](#" + lines[0].glossary + "), [details](#story))") !=
        std::string::npos);
  // Every link within report.md has its anchor: the findings' details and rules, the glossary, the arm table's
  // column headers.
  std::size_t links = 0;
  for (auto at = md.find("](#"); at != std::string::npos; at = md.find("](#", at + 1), ++links) {
    const std::string target = md.substr(at + 3, md.find(')', at) - at - 3);
    INFO(target);
    CHECK(md.find("<a id=\"" + target + "\"></a>") != std::string::npos);
  }
  CHECK(links > 2 * lines.size());
  // Each column header of the arm table links to its glossary entry.
  const std::size_t table = md.find("\n|", md.find("## Results by arm"));
  const std::string header = md.substr(table + 1, md.find('\n', table + 1) - table - 1);
  const std::size_t columns = static_cast<std::size_t>(std::count(header.begin(), header.end(), '|')) - 1;
  std::size_t linked = 0;
  for (auto at = header.find("](#g-"); at != std::string::npos; at = header.find("](#g-", at + 1)) ++linked;
  CHECK(columns == arm_table(cmp).header.size());
  CHECK(linked == columns);
  // The per-arm sentences stay, below.
  const std::size_t details_at = md.find(markdown_text("d_k=64 adamw lr=0.01, unscaled vs sqrt_dk"));
  CHECK(details_at != std::string::npos);
  CHECK(details_at > findings_at);
}

TEST_CASE("summary figures: final loss, step-0 attention and per-query score gradient against d_k") {
  const TempDir root("compare_summary");
  write_dk_sweep(root / "runs");
  const Comparison cmp = analyse_dirs({(root / "runs").string()});
  const std::vector<SummaryFigure> figures = summary_figures(cmp);
  std::vector<std::string> names;
  for (const auto& f : figures) names.push_back(f.name);
  CHECK(names == std::vector<std::string>{"final_loss_vs_d_k", "entropy_step0_vs_d_k", "score_std_step0_vs_d_k",
                                          "score_grad_vs_d_k"});
  const SummaryFigure& loss = figures[0];
  REQUIRE(loss.lines.size() == 2);
  CHECK(loss.lines[0].scale == "none");
  REQUIRE(loss.lines[0].points.size() == 3);
  CHECK(loss.lines[0].points[2].x == 256);
  CHECK(loss.lines[0].points[2].y == doctest::Approx(1.55));  // mean of 1.5 and 1.6
  CHECK(loss.lines[0].points[2].hi - loss.lines[0].points[2].y == doctest::Approx(std::sqrt(0.005)));  // sd
  CHECK(loss.lines[0].points[2].n == 2);
  const SummaryFigure& std0 = figures[2];
  CHECK(std0.lines[0].points[1].y == doctest::Approx(8.0));  // sqrt(64), as written
  const SummaryFigure& grad = figures[3];
  CHECK(grad.log_y);
  CHECK(grad.lines[0].points[1].y == doctest::Approx(1.5e-7));  // median over the seeds' 1e-7 and 2e-7
  CHECK(grad.lines[0].points[1].lo == doctest::Approx(1e-7));
  CHECK(grad.lines[0].points[1].hi == doctest::Approx(2e-7));
}

TEST_CASE("arms without a theory point are named in one note with the reason, not one note per arm and d_k") {
  // Scalings of another build: probe() cannot build them, at any d_k.
  const TempDir root("compare_no_theory_once");
  for (const std::string scale : {"my_scale", "their_scale"})
    for (const std::size_t d_k : {16, 64}) {
      FakeRun r;
      r.scale = scale;
      r.d_k = d_k;
      r.loss = constant(30, 1.0);
      r.score_std = constant(30, 1.0);
      r.entropy = constant(30, 1.0);
      write_run(root / fmt_name(d_k, scale, 0), r);
    }
  const Comparison cmp = analyse_dirs({root.string()});
  const std::vector<SummaryFigure> figures = summary_figures(cmp);
  const auto std0 = std::find_if(figures.begin(), figures.end(),
                                 [](const SummaryFigure& f) { return f.name == "score_std_step0_vs_d_k"; });
  REQUIRE(std0 != figures.end());
  std::vector<std::string> theory_notes;
  for (const auto& n : std0->notes)
    if (n.find("theory point") != std::string::npos) theory_notes.push_back(n);
  INFO(fmt::format("{}", fmt::join(std0->notes, "\n")));
  REQUIRE(theory_notes.size() == 1);
  for (const std::string scale : {"my_scale", "their_scale"}) {
    CHECK(theory_notes[0].find(scale) != std::string::npos);
    for (const SummaryLine& l : std0->lines) CHECK_FALSE((l.theory && l.scale == scale));
  }
  CHECK(theory_notes[0].find("is not a registered scale") != std::string::npos);  // why
}

TEST_CASE("summary figures of real runs: the step-0 theory line, PNG and SVG beside the other plots, in report.md") {
  const TempDir root("compare_summary_real");
  for (const std::size_t d_k : {4, 16})
    for (const std::string scale : {"none", "sqrt_dk"}) {
      TrainConfig c = short_run(root / "sweep" / (scale + std::to_string(d_k)), "kv_recall", scale, 2);
      c.model.d_k = d_k;
      xgrad::train::train(c);
    }
  const Comparison cmp = analyse_dirs({(root / "sweep").string()});
  const std::vector<SummaryFigure> figures = summary_figures(cmp);
  const auto std0 = std::find_if(figures.begin(), figures.end(),
                                 [](const SummaryFigure& f) { return f.name == "score_std_step0_vs_d_k"; });
  REQUIRE(std0 != figures.end());
  INFO(std0->notes.size());
  // Per scaling a measured line and its theory line, the theory from probe() on the same configuration.
  REQUIRE(std0->lines.size() == 4);
  CHECK_FALSE(std0->lines[0].theory);
  CHECK(std0->lines[1].theory);
  REQUIRE(std0->lines[1].points.size() == 2);
  TrainConfig config = TrainConfig::from_json(cmp.runs[0].config, "test");
  const auto probed = probe(config, {16}, {"none"});
  CHECK(std0->lines[1].points[1].y == doctest::Approx(probed[0].theory_std));
  CHECK(std0->lines[0].points[1].y > 0);

  CompareOptions options;
  options.inputs = {(root / "sweep").string()};
  options.out = (root / "report").string();
  std::ostringstream out;
  run_compare(options, out);
  for (const auto& f : figures) CHECK(fs::exists(root / "report" / "plots" / (f.name + ".gp")));
  const std::string md = read_text(root / "report" / "report.md");
  INFO(md);
  CHECK(md.find("## Summary figures") < md.find("## Plots"));
  CHECK(md.find("line \\ d_k") != std::string::npos);  // the points tabulated per d_k (4 and 16)
  if (!gnuplot_available()) {
    MESSAGE("gnuplot not installed: PNG/SVG check skipped");
    return;
  }
  for (const auto& f : figures)
    for (const std::string ext : {".png", ".svg"}) {
      const fs::path p = root / "report" / "plots" / (f.name + ext);
      INFO(p.string());
      CHECK(fs::exists(p));
    }
  CHECK(md.find("![" + figures.front().title + "](plots/" + figures.front().name + ".png)") != std::string::npos);
}

TEST_CASE("findings say why a comparison is not decided, and that one scale mode has no comparison") {
  const TempDir root("compare_findings_undecided");
  // Unscaled under --on-nan skip with no finite loss at the end (every step skipped): not a divergence, and no
  // final loss to compare.
  FakeRun none;
  none.on_nan = "skip";
  none.loss = constant(25, nan_value);
  none.loss[0] = 4.0;
  write_run(root / "both" / "none", none);
  FakeRun scaled;
  scaled.scale = "sqrt_dk";
  scaled.on_nan = "skip";  // as the unscaled run: the arms differ only in scale
  scaled.loss = constant(25, 1.0);
  write_run(root / "both" / "sqrt", scaled);
  const Comparison cmp = analyse_dirs({(root / "both").string()});
  const std::string all = findings_text(cmp);
  INFO(all);
  CHECK(verdict_of(cmp, "trains_better", "sqrt_dk")->why_not == "no_final_loss");
  CHECK(numbers_in(findings_of(cmp, "tolerance loss").at(0).text) == std::vector<double>{0, 1, 1});
  CHECK(numbers_in(findings_of(cmp, "diverged run").at(0).text) == std::vector<double>{2});  // none of N

  write_run(root / "one" / "sqrt", scaled);
  const std::vector<FindingLine> one = findings(analyse_dirs({(root / "one").string()}));
  REQUIRE_FALSE(one.empty());
  CHECK(one[0].text.find(" sqrt_dk: ") != std::string::npos);
  CHECK(one[0].anchor == "story");  // the claims section, which says no claim is judged
}

TEST_CASE("a run whose loss blew up without becoming NaN (SGD at lr 1: 1e14) is diverged, left out, and counted") {
  // The reviewer's sweep: sgd at lr=1 drives the loss of both scalings to ~1e14 in 60 steps with every value
  // finite; such runs counted as complete and decided "unscaled trains as well (2.317e+14 vs 2.057e+14)".
  const TempDir root("compare_blew_up");
  for (const std::string scale : {"none", "sqrt_dk"})
    for (const double lr : {0.1, 1.0}) {
      TrainConfig c = short_run(root / "sweep" / (scale + "-lr" + csv_number(lr)), "kv_recall", scale, 60);
      c.model.d_k = 4;
      c.optimizer = "sgd";
      c.lr = lr;
      xgrad::train::train(c);
    }
  const Comparison cmp = analyse_dirs({(root / "sweep").string()});
  REQUIRE(cmp.arms.size() == 4);
  for (const ArmStats& arm : cmp.arms) {
    INFO(arm.settings.dump());
    if (arm.lr() == 1.0) {
      CHECK(arm.diverged_steps.size() == 1);
      CHECK(arm.stat("final_loss").n == 0);
      CHECK(arm.kept.empty());
    } else {
      CHECK(arm.diverged_steps.empty());
      CHECK(arm.stat("final_loss").n == 1);
    }
  }
  for (const RunRecord& run : cmp.runs)
    if (run.config.at("lr").get<double>() == 1.0) {
      CHECK(run.diverged);
      CHECK(run.diverged_step > 0);
      CHECK(loss_blew_up(run.series.loss.front(), run.series.loss.back()));
    }
  const StoryChecks checks = story_checks(cmp);
  for (const auto& line : checks.holds) {
    INFO(line);
    CHECK(line.find("e+1") == std::string::npos);
  }
  CHECK(numbers_in(findings_of(cmp, "diverged run").at(0).text) == std::vector<double>{2, 4});
  // The LR figure draws no blown-up point: its y axis is not stretched to 1e14.
  for (const SummaryFigure& f : summary_figures(cmp))
    for (const SummaryLine& line : f.lines)
      for (const SummaryPoint& p : line.points) {
        INFO(f.name);
        CHECK(!(p.y > 100));
      }
  std::string md;
  compare_text(root / "sweep", &md);
  CHECK(md.find(fmt::format(" {:g} times", kDivergedLossFactor)) != std::string::npos);  // the glossary's rule
}

TEST_CASE("LR sensitivity: differences within the seed spread are about the same; no run below chance learned") {
  // The reviewer's case: "unscaled is more sensitive in 1 of 1" from 0.582 vs 0.579 with a seed sd of 0.06-0.13,
  // while no run came below the chance loss ln(8) = 2.08 (final 2.95-4.1 from 4.6).
  const TempDir root("compare_lr_tolerance");
  auto run = [&](const fs::path& dir, const std::string& scale, double lr, int seed, double final_loss) {
    FakeRun r = sgd_run(scale, lr, seed, final_loss, false);
    r.loss.front() = 4.6;
    write_run(dir / (scale + "-lr" + csv_number(lr) + "-s" + std::to_string(seed)), r);
  };
  // Objectives: none 3.9 at 0.01 and (2.95 + 3.15) / 2 = 3.05 at 0.1 -> 0.425; sqrt_dk 4.0 and 3.15 -> 0.425 + 0.0025.
  for (const auto& [scale, a, b, c, d] : std::vector<std::tuple<std::string, double, double, double, double>>{
           {"none", 3.8, 4.0, 2.95, 3.15}, {"sqrt_dk", 3.9, 4.1, 3.05, 3.255}}) {
    run(root / "nolearn", scale, 0.01, 0, a);
    run(root / "nolearn", scale, 0.01, 1, b);
    run(root / "nolearn", scale, 0.1, 0, c);
    run(root / "nolearn", scale, 0.1, 1, d);
    // The same shape below chance: every run learned, the sensitivities differ by less than the seed sd.
    run(root / "learned", scale, 0.01, 0, a - 2.5);
    run(root / "learned", scale, 0.01, 1, b - 2.5);
    run(root / "learned", scale, 0.1, 0, c - 2.5);
    run(root / "learned", scale, 0.1, 1, d - 2.5);
  }
  {
    const Comparison cmp = analyse_dirs({(root / "nolearn").string()});
    REQUIRE(cmp.lr_groups.size() == 2);
    for (const ArmStats& arm : cmp.arms) CHECK_FALSE(arm.learned());
    const Verdict lr = lr_verdict(cmp, cmp.lr_groups[0], cmp.lr_groups[1]);
    CHECK(lr.outcome == Outcome::not_decided);
    CHECK(lr.why_not == "neither_learned_lr");
    // Less sensitive in 0 of 1 comparison, not decided in 1.
    CHECK(numbers_in(findings_of(cmp, "LR sensitivity").at(0).text) == std::vector<double>{0, 1, 1});
  }
  {
    const Comparison cmp = analyse_dirs({(root / "learned").string()});
    REQUIRE(cmp.lr_groups.size() == 2);
    for (const ArmStats& arm : cmp.arms) CHECK(arm.learned());
    const Verdict lr = lr_verdict(cmp, cmp.lr_groups[0], cmp.lr_groups[1]);
    CHECK(lr.outcome == Outcome::same);
    CHECK(lr.tolerance >= 0.14);  // the larger seed sd of the objective (0.1414 at both lrs)
    CHECK(verdict_of(cmp, "less_lr_sensitive", "sqrt_dk")->outcome == Outcome::same);
    // Less sensitive in 0 of 1 comparison, about as sensitive in 1.
    CHECK(numbers_in(findings_of(cmp, "LR sensitivity").at(0).text) == std::vector<double>{0, 1, 1});
  }
}

TEST_CASE("findings never pool arms of different tasks or settings into one number: a line per setting group") {
  // The reviewer's case: copy and kv_recall runs compared together gave "attention entropy unscaled 1.60 / 1.21",
  // the mean of the two tasks' lines, a number that appears nowhere below.
  const TempDir root("compare_findings_groups");
  for (const std::string task : {"copy", "kv_recall"})
    for (const std::size_t d_k : {4, 8})
      for (const std::string scale : {"none", "sqrt_dk"}) {
        TrainConfig c = short_run(root / "sweep" / (task + scale + std::to_string(d_k)), task, scale, 4);
        c.model.d_k = d_k;
        xgrad::train::train(c);
      }
  const Comparison cmp = analyse_dirs({(root / "sweep").string()});
  std::size_t saturation = 0, gradient = 0;
  const std::string all = findings_text(cmp);
  INFO(all);
  for (const auto& l : findings(cmp)) {
    CHECK(word_count(l.text) <= 40);
    const bool sat = l.glossary == glossary_anchor("entropy_first");
    const bool grad = l.glossary == glossary_anchor("score_grad_relative");
    if (!sat && !grad) continue;
    saturation += sat;
    gradient += grad;
    CHECK((l.text.find("task=copy") != std::string::npos) != (l.text.find("task=kv_recall") != std::string::npos));
  }
  CHECK(saturation == 2);
  CHECK(gradient == 2);
}

namespace {
// The '|' of a markdown table line that are cell separators (not escaped as "\|").
std::size_t unescaped_pipes(const std::string& line) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < line.size(); ++i) n += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
  return n;
}
}  // namespace

TEST_CASE("report.md escapes run names and setting values: '|' and newlines keep tables whole, '<' is not HTML") {
  const TempDir root("compare_md_escape");
  const std::string evil = "a|b\nc<img src=x onerror=alert(1)>";
  for (const std::string scale : {"none", "sqrt_dk"}) {
    FakeRun r;
    r.scale = scale;
    r.loss = constant(25, 1.0);
    // A recorded input file whose name holds the same characters and a newline: its name is part of the arm.
    r.extra_config["inputs"] =
        nlohmann::json::array({{{"path", "/data/in|put\n<b>x.txt"}, {"xxh3", "0123456789abcdef"}}});
    write_run(root / "sweep" / (scale + evil), r);
  }
  std::string md;
  compare_text(root / "sweep", &md);
  INFO(md);
  CHECK(md.find("<img") == std::string::npos);
  CHECK(md.find("<b>") == std::string::npos);
  // The name as text: its newline shown as \n (the backslash escaped for markdown), '|' and '<' escaped.
  CHECK(md.find("a\\|b\\\\nc&lt;img src=x onerror=alert(1)\\>") != std::string::npos);
  // Every table keeps its header's number of cells on every line.
  std::istringstream lines(md);
  std::size_t header_pipes = 0, table_lines = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '|') {
      header_pipes = 0;
      continue;
    }
    ++table_lines;
    if (header_pipes == 0) header_pipes = unescaped_pipes(line);
    INFO(line);
    CHECK(unescaped_pipes(line) == header_pipes);
  }
  CHECK(table_lines > 4);
}

TEST_CASE("a comparison where both sides diverged says so, not that one side did") {
  const TempDir root("compare_both_diverged");
  for (const std::string scale : {"none", "sqrt_dk"}) {
    FakeRun r;
    r.scale = scale;
    r.loss = {4.0, inf_value};
    r.diverged = true;
    r.diverged_step = 1;
    r.steps = 21;
    write_run(root / scale, r);
  }
  const Comparison cmp = analyse_dirs({root.string()});
  const auto v = verdict_of(cmp, "trains_better", "sqrt_dk");
  REQUIRE(v);
  CHECK(v->outcome == Outcome::not_decided);
  CHECK(v->why_not == "all_diverged");
  CHECK(cmp.arms[v->subject].kept.empty());  // both sides: no arm is named as the one that diverged
  CHECK(cmp.arms[v->baseline].kept.empty());
  CHECK(verdict_of(cmp, "diverges_less", "sqrt_dk")->outcome == Outcome::same);
}

namespace {

// Two seeds per scaling, final losses given (20 rows at that value after a first row of 4.6; chance ln 8 = 2.08).
void write_final_losses(const fs::path& dir, const std::string& scale, const std::vector<double>& final_per_seed,
                        double lr = 0.01) {
  for (std::size_t seed = 0; seed < final_per_seed.size(); ++seed) {
    FakeRun r;
    r.scale = scale;
    r.lr = lr;
    r.seed = static_cast<int>(seed);
    r.loss = {4.6};
    const auto tail = constant(20, final_per_seed[seed]);
    r.loss.insert(r.loss.end(), tail.begin(), tail.end());
    write_run(dir / (scale + "-lr" + csv_number(lr) + "-s" + std::to_string(seed)), r);
  }
}

}  // namespace

TEST_CASE(
    "final loss verdicts pair seeds: worse in every seed is worse whatever the sd; disagreeing seeds decide "
    "nothing") {
  const TempDir root("compare_paired_seeds");
  // The breaker's length --quick numbers: unscaled worse in both seeds (2.79 vs 0.005, 0.063 vs 0.024), but the
  // means 1.426 ± 1.928 vs 0.015 ± 0.013 are within the unscaled sd.
  write_final_losses(root / "worse", "none", {2.79, 0.063});
  write_final_losses(root / "worse", "sqrt_dk", {0.005, 0.024});
  // Seeds that disagree: unscaled lower in seed 0, higher in seed 1.
  write_final_losses(root / "disagree", "none", {0.5, 1.5});
  write_final_losses(root / "disagree", "sqrt_dk", {1.0, 0.4});
  {
    const Comparison cmp = analyse_dirs({(root / "worse").string()});
    REQUIRE(cmp.arms.size() == 2);
    const auto v = verdict_of(cmp, "trains_better", "sqrt_dk");
    CHECK(v->outcome == Outcome::better);
    CHECK(v->seeds_better == 2);
    CHECK(v->baseline_value == doctest::Approx(1.4265));
    const std::string all = findings_text(cmp);
    INFO(all);
    CHECK(numbers_in(findings_of(cmp, "tolerance loss").at(0).text) == std::vector<double>{1, 1});
  }
  {
    const Comparison cmp = analyse_dirs({(root / "disagree").string()});
    const auto v = verdict_of(cmp, "trains_better", "sqrt_dk");
    CHECK(v->outcome == Outcome::not_decided);
    CHECK(v->why_not == "seeds_disagree");
    CHECK(v->seeds_better == 1);
    CHECK(v->seeds_worse == 1);
    const std::string all = findings_text(cmp);
    INFO(all);
    CHECK(numbers_in(findings_of(cmp, "tolerance loss").at(0).text) == std::vector<double>{0, 1, 1});
  }
  // The report says which rule it used.
  const std::string md = report_md({(root / "worse").string()}, root / "report");
  CHECK(md.find("seed by seed") != std::string::npos);
}

TEST_CASE("comparisons where neither arm learned (final loss at chance) decide nothing: dk --quick") {
  const TempDir root("compare_at_chance");
  // The breaker's dk --quick numbers around chance ln 8 = 2.079: unscaled 2.130 / 2.138, sqrt_dk 2.110 / 2.020.
  write_final_losses(root, "none", {2.130, 2.138});
  write_final_losses(root, "sqrt_dk", {2.110, 2.020});
  const Comparison cmp = analyse_dirs({root.string()});
  for (const ArmStats& arm : cmp.arms) CHECK_FALSE(arm.learned());
  const auto v = verdict_of(cmp, "trains_better", "sqrt_dk");
  CHECK(v->outcome == Outcome::not_decided);
  CHECK(v->why_not == "neither_learned");
  const std::string all = findings_text(cmp);
  INFO(all);
  CHECK(numbers_in(findings_of(cmp, "tolerance loss").at(0).text) == std::vector<double>{0, 1, 1});
}

TEST_CASE("LR sensitivity: a scaling that never learned at any lr gives no verdict, however flat its curve") {
  // The breaker's lr --quick case: unscaled ends just below chance (2.05-2.07 against ln 8 = 2.079, within 2%) at
  // every lr, so its objective is flat and it read as "not more sensitive" than sqrt_dk, which learned.
  const TempDir root("compare_lr_never_learned");
  for (const double lr : {0.01, 0.1, 1.0}) {
    write_final_losses(root, "none", {2.06 + 0.005 * std::log10(lr), 2.065 + 0.005 * std::log10(lr)}, lr);
    const double sqrt_dk = lr == 0.01 ? 0.5 : lr == 0.1 ? 1.0 : 2.0;
    write_final_losses(root, "sqrt_dk", {sqrt_dk, sqrt_dk + 0.05}, lr);
  }
  const Comparison cmp = analyse_dirs({root.string()});
  REQUIRE(cmp.lr_groups.size() == 2);
  const Verdict lr = lr_verdict(cmp, cmp.lr_groups[0], cmp.lr_groups[1]);
  CHECK(lr.outcome == Outcome::not_decided);
  CHECK(lr.why_not == "never_learned");
  CHECK(why_not_text(lr).rfind("unscaled", 0) == 0);
  const auto v = verdict_of(cmp, "less_lr_sensitive", "sqrt_dk");
  CHECK(v->outcome == Outcome::not_decided);
  CHECK(v->why_not == "never_learned");
}

TEST_CASE("a verdict decided in the seeds both arms have quotes those seeds' values, not means over others") {
  const TempDir root("compare_paired_values");
  write_final_losses(root, "sqrt_dk", {0.5, 1.9, 1.9});  // seeds 0, 1, 2
  write_final_losses(root, "none", {1.0});               // seed 0 only
  const Comparison cmp = analyse_dirs({root.string()});
  const auto v = verdict_of(cmp, "trains_better", "sqrt_dk");
  REQUIRE(v);
  CHECK(v->outcome == Outcome::better);
  CHECK(v->n_shared == 1);
  CHECK(v->subject_value == doctest::Approx(0.5));  // seed 0's, not the mean 1.43 over three seeds
  CHECK(v->baseline_value == doctest::Approx(1.0));
}

TEST_CASE("another axis: arms are named by setting and value, and a numeric --baseline matches as a number") {
  const TempDir root("compare_lr_axis");
  write_final_losses(root, "none", {1.0, 1.1}, 0.01);
  write_final_losses(root, "none", {0.5, 0.6}, 0.003);
  Comparison c = analyse_dirs({root.string()});
  c.axis = "lr";
  REQUIRE(c.arms.size() == 2);
  CHECK(arm_name(c, c.arms[0]) == "lr=0.003");
  for (const std::string baseline : {"0.0100", "1e-2"}) {
    CompareOptions options;
    options.inputs = {root.string()};
    options.plots = false;
    options.axis = "lr";
    options.baseline = baseline;
    std::ostringstream out;
    CHECK_NOTHROW(run_compare(options, out));
    CHECK(read_text(root / "report.md").find("## Claims against lr=0.01") != std::string::npos);
  }
}

TEST_CASE("arms that differ only in the derived chance_loss (a hand-edited config.json) name it, not nothing") {
  const TempDir root("compare_chance_only");
  FakeRun r;
  r.loss = constant(30, 1.0);
  r.extra_config = {{"chance_loss", 2.0}};  // FakeRun writes the old form; read as derived.chance_loss
  write_run(root / "none", r);
  r.scale = "sqrt_dk";
  r.extra_config = nlohmann::json::object();  // ln 8, FakeRun's
  write_run(root / "sqrt", r);
  const Comparison c = analyse_dirs({root.string()});
  const auto unpaired = unpaired_arms(c, "scale");
  REQUIRE(unpaired.size() == 2);
  CHECK(unpaired[0].differs_in == std::vector<std::string>{"chance_loss"});
  REQUIRE(no_comparison_notes(c).size() == 1);
  CHECK(no_comparison_notes(c)[0].find("chance_loss") != std::string::npos);
  CHECK(counted(1, "run") == "1 run");
  CHECK(counted(2, "run") == "2 runs");
}

TEST_CASE("findings name every compared scaling, or say which were left out and where they are") {
  const TempDir root("compare_findings_every_scaling");
  const std::vector<std::string> scales{"none",    "sqrt_dk",       "dk",           "ssmax",
                                        "softcap", "sigma_reparam", "qk_layernorm", "learned"};
  for (std::size_t i = 0; i < scales.size(); ++i)
    write_final_losses(root, scales[i], {0.5 + 0.1 * static_cast<double>(i), 0.55 + 0.1 * static_cast<double>(i)});
  const Comparison cmp = analyse_dirs({root.string()});
  REQUIRE(cmp.arms.size() == scales.size());
  const std::vector<FindingLine> lines = findings(cmp);
  CHECK(lines.size() <= 10);
  const std::string all = findings_text(cmp);
  INFO(all);
  for (std::size_t i = 1; i < scales.size(); ++i) {
    bool own_line = false, named_as_left_out = false;
    for (const auto& l : lines) {
      CHECK(word_count(l.text) <= 40);
      own_line = own_line || (l.glossary == glossary_anchor("tolerance loss") && l.text.rfind(scales[i] + " ", 0) == 0);
      named_as_left_out = named_as_left_out || (l.text.find("left out") != std::string::npos &&
                                                l.text.find(" " + scales[i]) != std::string::npos);
    }
    CHECK_MESSAGE((own_line || named_as_left_out), scales[i]);
  }
  CHECK(numbers_in(findings_of(cmp, "diverged run").at(0).text) == std::vector<double>{16});  // none of N
}

TEST_CASE("findings kept to ten: the left-out line counts every saturation line left out and links to them") {
  // Five setting groups (n_values) of eight scalings: seven final-loss lines, a saturation line per group and the
  // runs line are thirteen. Groups past the third give way first; no line speaks of groups whose lines are all out.
  const TempDir root("compare_findings_groups");
  const std::vector<std::string> scales{"none",    "sqrt_dk",       "dk",           "ssmax",
                                        "softcap", "sigma_reparam", "qk_layernorm", "learned"};
  for (int n_values = 4; n_values <= 8; ++n_values)
    for (std::size_t i = 0; i < scales.size(); ++i) {
      FakeRun r;
      r.scale = scales[i];
      r.loss = {4.6, 1.0 + 0.1 * static_cast<double>(i)};
      r.entropy = {2.0, 1.0};
      r.extra_config = {{"n_values", n_values}};
      write_run(root / (scales[i] + "-nv" + std::to_string(n_values)), r);
    }
  const Comparison cmp = analyse_dirs({root.string()});
  const std::vector<FindingLine> lines = findings(cmp);
  INFO(findings_text(cmp));
  CHECK(lines.size() == 10);
  const std::size_t shown = findings_of(cmp, "entropy_first").size();
  CHECK(shown < 5);
  // A left-out line per section the lines left out link to: the gradient counts' (story), the saturation lines'.
  std::vector<FindingLine> left_out;
  for (const FindingLine& l : lines)
    if (l.glossary == glossary_anchor("arm") && l.anchor != "story") left_out.push_back(l);
  REQUIRE(left_out.size() == 1);
  CHECK(left_out[0].anchor != "summary-figures");  // one d_k: no figure against d_k; the arm table has the numbers
  CHECK(numbers_in(left_out[0].text).at(0) == 5 - shown);  // one line per group: each one left out is counted
  CHECK(findings_of(cmp, "setting").empty());
  CHECK(findings_of(cmp, "tolerance loss").size() == 7);  // the final-loss counts give way last
}

TEST_CASE("plots: the registered scalings differ in colour (a colour-blind-safe scheme), dash and point type") {
  // Paul Tol's "muted" scheme (designed to stay apart under colour blindness; https://personal.sron.nl/~pault/),
  // and for a tenth built-in the blue of his "high-contrast" scheme.
  const std::set<std::string> muted{"#CC6677", "#332288", "#DDCC77", "#117733", "#88CCEE",
                                    "#882255", "#44AA99", "#999933", "#AA4499", "#004488"};
  const auto entries = xgrad::Registry<xgrad::nn::ScalingEntry>::instance().entries();
  REQUIRE(entries.size() >= 8);
  std::set<std::string> colours, dashes;
  SummaryFigure curve;
  curve.name = "styles_vs_lr";
  curve.x_label = "lr";
  curve.y_label = "loss";
  curve.log_x = true;
  for (const xgrad::nn::ScalingEntry* e : entries) {
    INFO(e->name);
    CHECK(muted.count(e->colour) == 1);
    colours.insert(e->colour);
    dashes.insert(e->dash);
    SummaryLine line;
    line.label = e->name;
    line.scale = e->name;
    line.points = {{0.01, 1.0, 0.9, 1.1, 2, 0}, {0.1, 2.0, 1.9, 2.1, 2, 0}};
    curve.lines.push_back(line);
  }
  // Ten colours for the built-in scalings; eight dash styles (and point types, one per dash), so past eight
  // entries a dash repeats and the colour tells them apart.
  const std::size_t n_dashes = std::min(entries.size(), xgrad::nn::scaling_dash_styles().size());
  CHECK(colours.size() == entries.size());
  CHECK(dashes.size() == n_dashes);
  SummaryFigure steps = curve;  // per-step curves: lines without points
  steps.name = "styles_vs_step";
  steps.tabulate = false;
  const TempDir root("compare_scaling_styles");
  PathGuard no_gnuplot("/nonexistent-xgrad-test");
  PlotOutcome outcome;
  write_summary_plots({curve, steps}, (root / "plots").string(), outcome);
  for (const std::string name : {"styles_vs_lr", "styles_vs_step"}) {
    const std::string gp = read_text(root / "plots" / (name + ".gp"));
    INFO(gp);
    std::set<std::string> dts, pts;
    for (const xgrad::nn::ScalingEntry* e : entries) {
      const auto title = gp.find("title '" + e->name + "'");
      REQUIRE(title != std::string::npos);
      const auto begin = gp.rfind('\'', gp.rfind(" using ", title));
      const std::string element = gp.substr(begin, title - begin);
      CHECK(element.find("lc rgb '" + e->colour + "'") != std::string::npos);
      const auto dt = element.find(" dt ");
      REQUIRE(dt != std::string::npos);
      dts.insert(element.substr(dt + 4, element.find(' ', dt + 4) - dt - 4));
      const auto pt = element.find(" pt ");
      if (name == "styles_vs_lr") {
        REQUIRE(pt != std::string::npos);
        pts.insert(element.substr(pt + 4, element.find(' ', pt + 4) - pt - 4));
      }
    }
    CHECK(dts.size() == n_dashes);
    if (name == "styles_vs_lr") CHECK(pts.size() == n_dashes);
  }
}

namespace {

// The text of an SVG as gnuplot writes it (XML entities undone), so a label can be compared with what was given.
std::string svg_text(const fs::path& svg) {
  std::string s = read_text(svg), out;
  const std::vector<std::pair<std::string, std::string>> entities{
      {"&quot;", "\""}, {"&apos;", "'"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}};
  for (std::size_t i = 0; i < s.size();) {
    bool replaced = false;
    for (const auto& [entity, ch] : entities)
      if (s.compare(i, entity.size(), entity) == 0) {
        out += ch;
        i += entity.size();
        replaced = true;
        break;
      }
    if (!replaced) out += s[i++];
  }
  return out;
}

bool has_control(const std::string& s, bool newlines_allowed) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto ch = static_cast<unsigned char>(s[i]);
    if ((ch < 0x20 && !(newlines_allowed && ch == '\n')) || ch == 0x7F) return true;
    if (ch == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(s[i + 1]) <= 0x9F)
      return true;
  }
  return false;
}

}  // namespace

TEST_CASE("no command runs from data: backticks, $(), quotes, newlines and system() in names reach gnuplot inert") {
  const TempDir root("compare_hostile");
  const std::string marker = (root / "RAN").string();
  // Every way gnuplot (or a shell behind it) could be told to run something, in a scale name and a --text file name;
  // the other runs (none, sqrt_dk) read the same file name, so it reaches the figures.
  const std::string hostile =
      "x`touch " + marker + "1`$(touch " + marker + "2)'q\"dq\"\\n" + "\n" + "system(\"touch " + marker + "3\")@mac";
  const std::string text_path = "/data/a`touch " + marker + "4`.txt";
  const std::string ansi_dir = "run\x1b]0;title\a\x1b[2J";
  for (const std::string& scale : std::vector<std::string>{"none", "sqrt_dk", "sqrt_dk" + hostile}) {
    FakeRun r;
    r.scale = scale;
    for (int i = 0; i < 30; ++i) r.loss.push_back(3.0 * std::exp(-0.05 * i));
    r.summary = false;  // incomplete: its directory name is printed on the terminal too
    r.extra_config["inputs"] = {
        {{"setting", "text"}, {"path", text_path}, {"size", 3000}, {"xxh3", "0123456789abcdef"}}};
    if (scale != "none")
      r.extra_config["inputs"][0]["xxh3"] = "fedcba9876543210";  // arms differ in the file: in titles
    write_run(root / "sweep" / (scale == "none" ? ansi_dir : scale == "sqrt_dk" ? "sqrt" : "hostile"), r);
  }
  CompareOptions options;
  options.inputs = {(root / "sweep").string()};
  options.plots = gnuplot_available();
  std::ostringstream out;
  run_compare(options, out);
  const std::string console = out.str();
  INFO(console);
  for (int i = 1; i <= 4; ++i) {
    CHECK_FALSE(fs::exists(marker + std::to_string(i)));
    CHECK_FALSE(fs::exists(root / "sweep" / "plots" / ("RAN" + std::to_string(i))));
  }
  // No build registers such a scale name (is_entry_name): its run is skipped, naming the key, before any script.
  CHECK(console.find("'scale' must be an entry name") != std::string::npos);
  // Control characters are shown, not obeyed: on the terminal and in report.md.
  const std::string md = read_text(root / "sweep" / "report.md");
  CHECK_FALSE(has_control(console, true));
  CHECK_FALSE(has_control(md, true));
  CHECK(console.find("run\\e]0;title\\a\\e[2J") != std::string::npos);
  CHECK(md.find("run\\\\e\\]0;title\\\\a\\\\e\\[2J") != std::string::npos);  // as markdown text
  if (!options.plots) {
    MESSAGE("gnuplot not installed: SVG text check skipped");
    return;
  }
  // The file name reaches every script as one inert literal: the file is labelled by its base name.
  CHECK(svg_text(root / "sweep" / "plots" / "loss.svg").find("RAN4`.txt") != std::string::npos);
}

TEST_CASE("property: gnuplot_string and escape_control of random strings over the special characters") {
  // Random strings of the characters gnuplot, shells and terminals treat specially; each must come out of gnuplot
  // exactly as escape_control shows it, with nothing run.
  const TempDir root("gnuplot_fuzz");
  const std::vector<std::string> alphabet{
      "`",    "$",  "(", ")", "'", "\"",   "\\",       "\n",       "\r",      "\t",
      "\x1b", "\a", "@", ";", "|", "&",    "#",        "{",        "}",       "^",
      "_",    "%",  "a", "Z", " ", "\x7f", "\xc2\x9b", "\xc3\xa9", "system(", "touch " + (root / "RAN").string()};
  std::uint32_t state = 12345;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  std::vector<std::string> samples;
  for (int n = 0; n < 200; ++n) {
    std::string s;
    for (std::uint32_t len = next() % 24; len > 0; --len) s += alphabet[(next() >> 8) % alphabet.size()];
    samples.push_back(s);
  }
  std::string script = "set terminal svg noenhanced\nset output 'fuzz.svg'\n";
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const std::string& s = samples[i];
    const std::string shown = xgrad::escape_control(s);
    INFO(shown);
    CHECK_FALSE(has_control(shown, false));
    CHECK(xgrad::escape_control(s, true).find('\r') == std::string::npos);
    // The literal is 'text' or ('part'."\047".'part'...): single-quoted parts (no quote inside) and quotes.
    const std::string literal = gnuplot_string(s);
    CHECK_FALSE(has_control(literal, false));
    std::string inner = literal, undoubled;
    if (!inner.empty() && inner.front() == '(') {
      REQUIRE(inner.back() == ')');
      inner = inner.substr(1, inner.size() - 2);
    }
    for (std::size_t k = 0; k < inner.size();) {
      if (inner.front() == '(' || (k > 0 && inner[k++] != '.')) FAIL("not a concatenation: " << literal);
      if (inner.compare(k, 6, "\"\\047\"") == 0) {
        undoubled += '\'';
        k += 6;
        continue;
      }
      REQUIRE(inner[k] == '\'');
      const std::size_t close = inner.find('\'', k + 1);
      REQUIRE(close != std::string::npos);
      undoubled += inner.substr(k + 1, close - k - 1);
      k = close + 1;
    }
    CHECK(undoubled == shown);
    script += fmt::format("set label {} {} at graph 0.01, graph {}\n", i + 1,
                          gnuplot_string("L" + std::to_string(i) + ":" + s + ":E"), 0.005 * static_cast<double>(i));
  }
  if (!gnuplot_available()) {
    MESSAGE("gnuplot not installed: the gnuplot half of the property is skipped");
    return;
  }
  script += "plot [0:1] [0:1] NaN notitle\n";
  std::ofstream(root / "fuzz.gp") << script;
  const ProcessResult gnuplot = run_process({"gnuplot", "fuzz.gp"}, in_directory(root));
  CHECK(gnuplot.exit_code == 0);
  INFO(gnuplot.out << gnuplot.err);
  CHECK_FALSE(fs::exists(root / "RAN"));
  const std::string svg = svg_text(root / "fuzz.svg");
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const std::string want = "L" + std::to_string(i) + ":" + xgrad::escape_control(samples[i]) + ":E";
    INFO(want);
    CHECK(svg.find(want) != std::string::npos);
  }
}

TEST_CASE("a newline or a C1 control in a run's name adds no data line to the plot data and no raw byte to the page") {
  if (!gnuplot_available()) {
    MESSAGE("gnuplot not installed: skipped");
    return;
  }
  const TempDir root("compare_name_lines");
  FakeRun r;
  r.loss = constant(20, 1.0);
  const std::string name =
      "a\n3 1000000\xC2\x9B"
      "31mX";
  write_run(root / "runs" / name, r);
  CompareOptions options;
  options.inputs = {(root / "runs").string()};
  options.out = (root / "rep").string();
  std::ostringstream out;
  run_compare(options, out);
  bool any_dat = false;
  for (const auto& entry : fs::recursive_directory_iterator(root / "rep" / "plots")) {
    if (entry.path().extension() != ".dat") continue;
    any_dat = true;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      INFO(entry.path().string() << ": " << line);
      CHECK(line.rfind("3 1000000", 0) != 0);
    }
  }
  CHECK(any_dat);
  const std::string page = read_text(root / "rep" / "report.html");
  CHECK(page.find("\xC2\x9B") == std::string::npos);
  CHECK(page.find("\\u009b31mX") != std::string::npos);
}

TEST_CASE("a terminal table shows a newline or an escape inside a cell escaped: no forged row, no cursor move") {
  Table t;
  t.header = {"scale", "final loss"};
  t.rows = {{"sqrt_dk\n!touch PWN\x1b[2J", "1.0"}};
  const std::string text = t.text();
  INFO(text);
  CHECK(text.find("sqrt_dk\\n!touch PWN\\e[2J") != std::string::npos);
  CHECK(std::count(text.begin(), text.end(), '\n') == 3);  // header, rule, one row
  CHECK(text.find('\x1b') == std::string::npos);
}

TEST_CASE("compare never writes through symbolic links in the report directory, and refuses a plots/ link") {
  const TempDir root("compare_links");
  for (const std::string scale : {"none", "sqrt_dk"}) {
    FakeRun r;
    r.scale = scale;
    r.loss = constant(20, 1.0);
    write_run(root / "sweep" / scale, r);
  }
  const fs::path outside = root / "outside";
  fs::create_directories(outside);
  for (const std::string name : {"report.md", "report.html"}) {
    std::ofstream(outside / name) << "keep";
    fs::create_symlink(outside / name, root / "sweep" / name);
  }
  CompareOptions options;
  options.inputs = {(root / "sweep").string()};
  options.plots = false;
  std::ostringstream out;
  run_compare(options, out);
  for (const std::string name : {"report.md", "report.html"}) {
    CHECK(read_text(outside / name) == "keep");
    CHECK_FALSE(fs::is_symlink(root / "sweep" / name));
    CHECK(fs::file_size(root / "sweep" / name) > 100);
  }
  fs::create_directories(outside / "plots");
  fs::create_symlink(outside / "plots", root / "sweep" / "plots");
  options.plots = true;
  try {
    run_compare(options, out);
    FAIL("a plots/ link was written through");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find((root / "sweep" / "plots").string() + " is a symbolic link") != std::string::npos);
  }
  CHECK(fs::is_empty(outside / "plots"));
}

TEST_CASE("SIGTERM at any point of compare leaves the old report whole or the new one whole") {
  // Old: the report of two runs; new: of three. Whole means report.md, report.html and every plot file of one
  // generation, and nothing of the other.
  const TempDir root("compare_sigterm");
  auto add_run = [&](const std::string& scale, int seed) {
    FakeRun r;
    r.scale = scale;
    r.seed = seed;
    for (int i = 0; i < 200; ++i) r.loss.push_back(3.0 * std::exp(-0.01 * i * (seed + 1)));
    write_run(root / "sweep" / (scale + std::to_string(seed)), r);
  };
  add_run("none", 0);
  add_run("sqrt_dk", 0);
  const std::string rep = (root / "rep").string();
  const std::vector<std::string> compare{"compare", (root / "sweep").string(), "--out", rep};
  REQUIRE(run_xgrad(compare).exit_code == 0);
  fs::copy(rep, root / "old", fs::copy_options::recursive);
  add_run("sqrt_dk", 1);
  REQUIRE(run_xgrad(compare).exit_code == 0);
  fs::copy(rep, root / "new", fs::copy_options::recursive);
  auto same_as = [&](const fs::path& generation) {
    for (const auto& entry : fs::recursive_directory_iterator(generation)) {
      if (!entry.is_regular_file()) continue;
      const fs::path here = rep / fs::relative(entry.path(), generation);
      if (entry.path().filename() == "gnuplot.log") continue;
      if (!fs::exists(here) || read_text(here) != read_text(entry.path())) return false;
    }
    for (const auto& entry : fs::recursive_directory_iterator(fs::path(rep) / "plots"))
      if (!fs::exists(generation / fs::relative(entry.path(), rep))) return false;
    return true;
  };
  int saw_old = 0, saw_new = 0;
  for (int ms = 0; ms <= 900; ms += 50) {
    fs::remove_all(rep);
    fs::copy(root / "old", rep, fs::copy_options::recursive);
    // Process blocks signals from fork until the child's dispositions are the defaults: a SIGTERM that lands
    // between fork and exec never reaches a copy of this test process's doctest handler.
    Process compare_run(xgrad_command(compare));
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    compare_run.send(SIGTERM);
    compare_run.wait();
    INFO("killed after " << ms << " ms");
    const bool is_old = same_as(root / "old"), is_new = same_as(root / "new");
    CHECK((is_old || is_new));
    saw_old += is_old;
    saw_new += is_new && !is_old;
  }
  MESSAGE("old report kept " << saw_old << " times, new one whole " << saw_new << " times");
  CHECK(saw_old > 0);
}

TEST_CASE("plots: y ticks of values near 1e-5 in a narrow range are labelled distinctly") {
  if (!gnuplot_available()) {
    MESSAGE("gnuplot not installed: skipped");
    return;
  }
  const TempDir root("compare_small_ticks");
  FakeRun r;
  for (int i = 0; i < 40; ++i) {
    r.loss.push_back(1.0);
    r.entropy.push_back(1e-5 + 4e-11 * i);  // a linear panel spanning 1e-5 .. 1.0000156e-5
  }
  write_run(root / "run", r);
  CompareOptions options;
  options.inputs = {root.string()};
  std::ostringstream out;
  run_compare(options, out);
  const std::string svg = read_text(root / "plots" / "entropy.svg");
  std::vector<std::string> labels;
  for (std::size_t at = 0; (at = svg.find("<text>", at)) != std::string::npos; at += 6) {
    const std::string text = svg.substr(at + 6, svg.find('<', at + 6) - at - 6);
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() && *end == '\0' && v > 5e-6 && v < 2e-5) labels.push_back(text);
  }
  INFO(fmt::format("{}", fmt::join(labels, " ")));
  CHECK(labels.size() >= 3);
  CHECK(std::set<std::string>(labels.begin(), labels.end()).size() == labels.size());
}

TEST_CASE("a subnormal number in metrics.csv (1e-310) is read as the number: report.md and report.html both written") {
  const TempDir root("compare_subnormal");
  FakeRun r;
  r.loss = constant(25, 1e-310);
  r.score_std = constant(25, 4e-320);
  write_run(root / "run", r);
  CompareOptions options;
  options.inputs = {root.string()};
  options.plots = false;
  std::ostringstream out;
  REQUIRE_NOTHROW(run_compare(options, out));
  CHECK(fs::exists(root / "report.md"));
  REQUIRE(fs::exists(root / "report.html"));
  // The page holds the value itself (rounded to 6 digits), not 0 and not null.
  CHECK(read_text(root / "report.html").find("1e-310") != std::string::npos);
}

TEST_CASE(
    "a metrics.csv whose one line is 1 GiB (sparse on disk) is refused naming the file and line, not read whole") {
  const TempDir root("compare_long_line");
  FakeRun r;
  r.loss = constant(5, 1.0);
  write_run(root / "run", r);
  const fs::path csv = root / "run" / "metrics.csv";
  fs::resize_file(csv, fs::file_size(csv) + (std::uintmax_t{1} << 30));  // a hole: the last line is 1 GiB of NULs
  CompareOptions options;
  options.inputs = {root.string()};
  options.plots = false;
  std::ostringstream out;
  try {
    run_compare(options, out);
    FAIL("compare read a 1 GiB line");
  } catch (const std::exception& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find(csv.string()) != std::string::npos);
    CHECK(message.find("line 7 is longer than 16 MiB") != std::string::npos);
  }
}

TEST_CASE(
    "compare: a run whose config.json repeats a key or nests too deep is skipped with its reason; a sweep.json "
    "that does names no preset; the other runs are compared") {
  const TempDir root("compare_bad_json");
  FakeRun run;
  run.loss = constant(10, 1.0);
  for (const char* name : {"good", "repeated", "deep"}) write_run(root / "runs" / name, run);
  std::ofstream(root / "runs" / "repeated" / "config.json") << "{\"lr\": 0.1, \"lr\": 0.2}";
  std::ofstream(root / "runs" / "deep" / "config.json") << std::string(70, '[') << std::string(70, ']');
  std::ofstream(root / "sweep.json") << "{\"preset\": {\"name\": \"dk\", \"name\": \"width\"}}";
  CompareOptions options;
  options.inputs = {root.string()};
  options.plots = false;
  std::ostringstream out;
  REQUIRE(run_compare(options, out) == 1);
  INFO(out.str());
  CHECK(out.str().find("skipped " + (root / "runs" / "repeated").string() + ": ") != std::string::npos);
  CHECK(out.str().find("the key 'lr' appears twice in one object") != std::string::npos);
  CHECK(out.str().find("skipped " + (root / "runs" / "deep").string() + ": ") != std::string::npos);
  CHECK(out.str().find("nests objects and arrays deeper than 64 levels") != std::string::npos);
  CHECK(out.str().find("the key 'name' appears twice in one object; keep one of them: no preset sections are "
                       "written") != std::string::npos);
  CHECK(out.str().find("DIR: ") == std::string::npos);  // the sweep's note names no argument of another command
  CHECK(fs::exists(root / "report.md"));
}

TEST_CASE("compare links explain/explain.html from report.md and report.html when the report directory holds it") {
  const TempDir root("compare_explain_link");
  FakeRun r;
  r.loss = {2.0, 1.0};
  write_run(root / "runs" / "a", r);
  const fs::path out = root / "report";
  CHECK(report_md({(root / "runs").string()}, out).find("explain/explain.html") == std::string::npos);
  CHECK(read_text(out / "report.html").find("\"explain\":") == std::string::npos);
  fs::create_directories(out / "explain");
  std::ofstream(out / "explain" / "explain.html") << "<html></html>";
  CHECK(report_md({(root / "runs").string()}, out).find("[explain/explain.html](explain/explain.html)") !=
        std::string::npos);
  CHECK(read_text(out / "report.html").find("\"explain\":\"explain/explain.html\"") != std::string::npos);
}

TEST_CASE("a run whose last row's step cell is not a number reads as diverged at an unknown step, not a cast of NaN") {
  const TempDir root("compare_nan_step");
  FakeRun r;
  r.loss = {2.0, 1.0, std::nan("")};
  r.summary = false;  // without summary.json, a non-finite last row says the run diverged there
  write_run(root / "run", r);
  std::string csv = read_text(root / "run" / "metrics.csv");
  const auto last = csv.rfind('\n', csv.size() - 2) + 1;
  csv.replace(last, csv.find(',', last) - last, "nan");  // the last row's step cell
  std::ofstream(root / "run" / "metrics.csv") << csv;
  const RunRecord run = load_run((root / "run").string());
  CHECK(run.diverged);
  CHECK(run.diverged_step == -1);
  PathGuard no_gnuplot("/nonexistent-xgrad-test");
  const std::string md = report_md({(root / "run").string()}, root / "report");
  CHECK(md.find("step -1") == std::string::npos);  // the step is unknown, not -1 (runs and arms tables)
  CHECK(md.find("steps -1") == std::string::npos);
  std::ifstream cross(root / "report" / "plots" / "data" / "arm0_diverged.dat");
  std::string header, point;
  std::getline(cross, header);
  CHECK_FALSE(std::getline(cross, point));  // no step to put a cross at
}

TEST_CASE("without summary.json, a NaN last row is where the run diverged; a NaN with rows after it was skipped") {
  const TempDir root("compare_nan_mid_run");
  FakeRun r;
  r.loss = {2.0, 1.5, 1.25, std::nan("")};
  r.summary = false;  // killed after the NaN under --on-nan stop: only metrics.csv says what happened
  write_run(root / "stop", r);
  const RunRecord stop = load_run((root / "stop").string());
  CHECK(stop.diverged);
  CHECK(stop.diverged_step == 3);
  // Under stop no row follows a non-finite step: rows after one say it was skipped (under skip, perhaps before a
  // resume under stop, so config.json's on_nan no longer says skip).
  r.loss = {2.0, 1.5, std::nan(""), 1.25, 1.0};
  write_run(root / "skipped", r);
  CHECK_FALSE(load_run((root / "skipped").string()).diverged);
  // Text where a number belongs, in the last row, is damage drawn as a gap: not a NaN the trainer wrote.
  r.loss = {2.0, 1.5, 1.25, 1.75};
  write_run(root / "text", r);
  std::string csv = read_text(root / "text" / "metrics.csv");
  csv.replace(csv.find("\n3,1.75,") + 3, 4, "oops");
  std::ofstream(root / "text" / "metrics.csv") << csv;
  CHECK_FALSE(load_run((root / "text").string()).diverged);
}

TEST_CASE("the loss figure crosses a run that blew up mid-run at its loss then, not at its last loss") {
  const TempDir root("compare_blow_up_cross");
  FakeRun r;
  r.loss = {2.0, 1.5, 30.0, 40.0, 35.0};  // past 10x the first loss from step 2 on, and on average (loss_blew_up)
  r.summary = false;
  write_run(root / "runs" / "stop", r);
  PathGuard no_gnuplot("/nonexistent-xgrad-test");  // the data files are written either way
  CompareOptions options;
  options.inputs = {(root / "runs").string()};
  options.out = (root / "report").string();
  std::ostringstream out;
  run_compare(options, out);
  std::ifstream cross(root / "report" / "plots" / "data" / "arm0_diverged.dat");
  std::string header, step, loss;
  std::getline(cross, header);
  cross >> step >> loss;
  CHECK(step == "2");
  CHECK(std::stod(loss) == doctest::Approx(30.0));  // its loss at step 2; 35 is the final one
}

TEST_CASE("a metrics.csv that names a column twice is not read: the run is skipped with the column named") {
  const TempDir root("compare_duplicate_column");
  FakeRun r;
  r.loss = {2.0, 1.0};
  write_run(root / "run", r);
  std::string csv = read_text(root / "run" / "metrics.csv");
  csv.replace(0, csv.find(',', csv.find(',') + 1), "step,step");  // the header's second column becomes a 2nd "step"
  std::ofstream(root / "run" / "metrics.csv") << csv;
  CHECK_THROWS_WITH_AS(load_run((root / "run").string()), doctest::Contains("names column 'step' twice"),
                       std::runtime_error);
}

TEST_CASE("a terminal table pads a column to a bounded width: one very long cell does not widen every row") {
  Table t;
  t.header = {"name", "value"};
  t.rows.push_back({std::string(5000, 'x'), "1"});
  for (int i = 0; i < 100; ++i) t.rows.push_back({"r" + std::to_string(i), std::to_string(i)});
  t.rows.push_back({"bad\xff\nforged", "2"});
  const std::string text = t.text();
  CHECK(text.size() < 5000 + 102 * (kMaxPaddedWidth + 20));
  CHECK(text.find(std::string(5000, 'x')) != std::string::npos);  // the long cell is shown whole
  CHECK(raw_lines(text).empty());
  CHECK_FALSE(has_line_starting(text, "forged"));
}

TEST_CASE("markdown_name: a name is one line of inert markdown text, valid UTF-8, its '|' never a cell separator") {
  for (const std::string name :
       {"[click](javascript:alert(1))", "![img](http:x.example|y)", "a\\|b", "nl\nx\xff\xfe", "`code` *em* _u_ <b>"}) {
    const std::string md = markdown_escape(markdown_name(name));
    INFO(md);
    CHECK(raw_lines(md).empty());
    CHECK(md.find('\n') == std::string::npos);
    const bool no_link = md.find("](") == std::string::npos || md.find("\\](") != std::string::npos;
    CHECK(no_link);
    CHECK(md.find('<') == std::string::npos);
    for (std::size_t i = 0, slashes = 0; i < md.size(); slashes = md[i] == '\\' ? slashes + 1 : 0, ++i)
      if (md[i] == '|' || md[i] == '[' || md[i] == '`' || md[i] == '*' || md[i] == '_') CHECK(slashes % 2 == 1);
    CHECK(markdown_escape(md) == md);  // idempotent
  }
  CHECK(markdown_text("caf\xC3\xA9 \xFF").find("\\xFF") != std::string::npos);  // invalid UTF-8 shown, not passed
}

TEST_CASE("a run whose config.json holds a value its setting refuses is skipped naming the key, not grouped by it") {
  const TempDir root("compare_refused_value");
  FakeRun r;
  r.loss = {2.0, 1.0};
  r.on_nan = "skip";
  write_run(root / "run", r);
  CHECK(load_run((root / "run").string()).config.at("on_nan") == "skip");
  r.on_nan = "bogus";  // an edited file: no build trains such a run, so no arm stands for it
  write_run(root / "edited", r);
  CHECK_THROWS_WITH_AS(load_run((root / "edited").string()), doctest::Contains("'on_nan'"), std::runtime_error);
  r.on_nan = "";
  r.extra_config = {{"d_k", 16.5}};
  write_run(root / "fraction", r);
  CHECK_THROWS_WITH_AS(load_run((root / "fraction").string()), doctest::Contains("'d_k'"), std::runtime_error);
  r.extra_config = {{"parametrization", 5}};
  write_run(root / "number", r);
  CHECK_THROWS_WITH_AS(load_run((root / "number").string()), doctest::Contains("'parametrization'"),
                       std::runtime_error);
  // A scaling this build does not know is another build's entry, read as a name; a number is no name.
  r.extra_config = {{"scale", "another_builds_scaling"}};
  write_run(root / "other_build", r);
  CHECK(load_run((root / "other_build").string()).config.at("scale") == "another_builds_scaling");
  for (const nlohmann::json& scale : {nlohmann::json(5), nlohmann::json("Bad Name!"), nlohmann::json("\x1b[31mred")}) {
    r.extra_config = {{"scale", scale}};
    write_run(root / "bad_scale", r);
    CHECK_THROWS_WITH_AS(load_run((root / "bad_scale").string()), doctest::Contains("'scale'"), std::runtime_error);
  }
}

TEST_CASE("a run of an older release, whose config.json lacks a setting added since, shares the arm of its default") {
  const TempDir root("compare_added_setting");
  FakeRun older;
  older.loss = constant(5, 2.0);
  write_run(root / "older", older);  // no layer_norm_eps: it trained with the LayerNorm eps of its time, 1e-5
  FakeRun newer = older;
  newer.seed = 1;
  newer.extra_config = {{"layer_norm_eps", 1e-5}};
  write_run(root / "newer", newer);
  FakeRun other = newer;
  other.seed = 2;
  other.extra_config = {{"layer_norm_eps", 1e-3}};
  write_run(root / "other", other);
  const Comparison cmp = analyse_dirs({root.string()});
  REQUIRE(cmp.arms.size() == 2);
  std::vector<std::size_t> sizes{cmp.arms[0].runs.size(), cmp.arms[1].runs.size()};
  std::sort(sizes.begin(), sizes.end());
  CHECK(sizes == std::vector<std::size_t>{1, 2});
}

namespace {

// metrics.csv of `run` with data row `row` (from 1)'s step cell replaced by `step`.
void set_step_cell(const fs::path& run, std::size_t row, const std::string& step) {
  std::string csv = read_text(run / "metrics.csv");
  std::size_t at = 0;
  for (std::size_t line = 0; line < row; ++line) at = csv.find('\n', at) + 1;
  csv.replace(at, csv.find(',', at) - at, step);
  std::ofstream(run / "metrics.csv") << csv;
}

}  // namespace

TEST_CASE("losses near the largest double: final loss and means are the finite mean, or the run blew up; never inf") {
  const TempDir root("compare_huge_loss");
  FakeRun flat;  // 1e308 from step 0: no blow-up (not 10 times step 0), so its final loss is reported
  flat.loss = constant(25, 1e308);
  flat.w_q0 = flat.w_q1 = constant(25, 1e200);  // the squares of the combined norm overflow
  flat.score_std = constant(25, 1.5e308);       // the mean over the two heads' cells
  write_run(root / "flat", flat);
  const Comparison cmp = analyse_dirs({(root / "flat").string()});
  REQUIRE(cmp.runs.size() == 1);
  CHECK_FALSE(cmp.runs[0].diverged);
  // Relative 1e-12: the rounding of a sum of 20 values (20 ulps), far below any wrong answer (inf, or off by 2x).
  CHECK(cmp.arms[0].stat("final_loss").mean == doctest::Approx(1e308).epsilon(1e-12));
  CHECK(cmp.runs[0].series.grad_norm_w_q[0] == doctest::Approx(std::sqrt(2.0) * 1e200).epsilon(1e-12));
  CHECK(cmp.runs[0].series.score_std[0] == doctest::Approx(1.5e308).epsilon(1e-12));
  const MeanSd spread = mean_sd({1e308, 1.2e308, 1.4e308});  // (v - mean)^2 overflows unscaled
  CHECK(spread.mean == doctest::Approx(1.2e308).epsilon(1e-12));
  CHECK(spread.sd == doctest::Approx(0.2e308).epsilon(1e-12));
  // The trailing mean of two rows of 1e308 is 1e308, under a --loss-threshold of 1.7e308 (their sum overflows).
  CHECK(run_stats(cmp.runs[0], 1.7e308, 0.9, 2)["step_to_loss"] == 1);

  FakeRun blew_up = flat;  // from 2 nats to 1e308: diverged by loss_blew_up, at the first step past 10 x 2
  blew_up.loss[0] = 2.0;
  write_run(root / "blew_up", blew_up);
  const RunRecord run = load_run((root / "blew_up").string());
  CHECK(run.diverged);
  CHECK(run.diverged_step == 1);

  FakeRun from_zero;  // step 0's batch held no target (--task data): a loss of 0 sets no scale for a blow-up
  from_zero.loss = {0.0, 2.0, 1.5, 1.0};
  write_run(root / "from_zero", from_zero);
  CHECK_FALSE(load_run((root / "from_zero").string()).diverged);
}

TEST_CASE("a NaN loss row in a run whose summary.json says it did not diverge is a contradiction: dropped, named") {
  const TempDir root("compare_nan_not_diverged");
  FakeRun good;
  good.loss = {3.0, 2.0, 1.0, 0.5};
  write_run(root / "runs" / "good", good);
  FakeRun bad = good;
  bad.seed = 1;
  bad.loss[2] = std::nan("");  // summary.json: not diverged, and on_nan is stop (the trainer would have stopped)
  write_run(root / "runs" / "bad", bad);
  const Comparison cmp = analyse_dirs({(root / "runs").string()});
  REQUIRE(cmp.runs.size() == 2);
  const RunRecord& run = cmp.runs[0];
  REQUIRE(run.dir.find("bad") != std::string::npos);
  CHECK(run.incomplete);
  CHECK_FALSE(run.diverged);
  CHECK(run.series.size() == 2);  // row 3 and after dropped
  CHECK(run.incomplete_reason.find("row 3") != std::string::npos);
  REQUIRE(cmp.arms.size() == 1);
  CHECK(cmp.arms[0].n_incomplete == 1);  // as any incomplete run: out of the arm's numbers beside a complete one
  CHECK(cmp.arms[0].used.size() == 1);

  bad.on_nan = "skip";  // a skipped step is what --on-nan skip writes: no contradiction
  write_run(root / "skip", bad);
  const RunRecord skipped = load_run((root / "skip").string());
  CHECK_FALSE(skipped.incomplete);
  CHECK(skipped.series.size() == 4);

  // Trained under skip, resumed under stop: config.json says stop, summary.json counts the skipped step.
  bad.on_nan = "stop";
  write_run(root / "resumed", bad);
  nlohmann::json summary = fake_run_detail::summary(bad);
  summary["skipped_steps"] = 1;
  std::ofstream(root / "resumed" / kSummaryFile) << summary.dump();
  const RunRecord resumed = load_run((root / "resumed").string());
  CHECK_FALSE(resumed.incomplete);
  CHECK(resumed.series.size() == 4);

  FakeRun inf_loss = good;  // Inf as NaN
  inf_loss.loss[1] = inf_value;
  write_run(root / "inf", inf_loss);
  CHECK(load_run((root / "inf").string()).series.size() == 1);
}

TEST_CASE("rows whose step does not increase (repeated, reversed) are reported with their row and dropped") {
  const TempDir root("compare_step_order");
  FakeRun r;
  r.loss = {3.0, 2.0, 1.0, 0.5, 0.25};
  for (const char* step : {"1", "0"}) {  // row 3 repeats step 1; goes back to step 0
    const fs::path dir = root / (std::string("step") + step);
    write_run(dir, r);
    set_step_cell(dir, 3, step);
    const RunRecord run = load_run(dir.string());
    CHECK(run.incomplete);
    CHECK(run.series.size() == 2);
    CHECK(run.series.step.back() == 1.0);
    CHECK(run.incomplete_reason.find("row 3") != std::string::npos);
  }
}

TEST_CASE("a cell outside what its column can hold (accuracy 5, entropy < 0, a NaN gradient) is a damaged row") {
  const TempDir root("compare_cell_ranges");
  const double nan = std::nan("");
  struct Case {
    const char* name;
    std::vector<double> FakeRun::*series;
    double value;
  };
  for (const Case& c : {Case{"acc_big", &FakeRun::accuracy, 5}, Case{"acc_neg", &FakeRun::accuracy, -1},
                        Case{"grad_neg", &FakeRun::w_q0, -1}, Case{"grad_nan", &FakeRun::w_k1, nan},
                        Case{"grad_inf", &FakeRun::w_q1, inf_value}, Case{"entropy_big", &FakeRun::entropy, 2.5e299},
                        Case{"entropy_neg", &FakeRun::entropy, -2.2}}) {
    FakeRun r;
    r.loss = {3.0, 2.0, 1.0, 0.5};
    r.accuracy = {0.1, 0.2, 0.3, 0.4};
    r.entropy = {1.0, 1.0, 1.0, 1.0};
    r.*c.series = {1.0, 1.0, 1.0, 1.0};
    (r.*c.series)[2] = c.value;  // row 3; the loss is finite and summary.json says the run did not diverge
    write_run(root / c.name, r);
    const RunRecord run = load_run((root / c.name).string());
    INFO(std::string(c.name));
    CHECK(run.incomplete);
    CHECK_FALSE(run.diverged);
    CHECK(run.series.size() == 2);  // row 3 and after dropped
    CHECK(run.incomplete_reason.find("row 3") != std::string::npos);
    if (std::isfinite(c.value)) CHECK(run.incomplete_reason.find(fmt::format("{}", c.value)) != std::string::npos);
  }
  for (const std::size_t row : {1, 3}) {  // never a step the trainer counts to: -1 first, 1e20 last
    FakeRun r;
    r.loss = {3.0, 2.0, 1.0};
    const fs::path dir = root / ("step_row" + std::to_string(row));
    write_run(dir, r);
    set_step_cell(dir, row, row == 1 ? "-1" : "1e20");
    CHECK(load_run(dir.string()).series.size() == row - 1);
  }
  FakeRun skipped;  // --on-nan skip writes a NaN gradient with the NaN loss of a skipped step: kept
  skipped.loss = {3.0, nan, 1.0};
  skipped.w_q0 = {1.0, nan, 1.0};
  skipped.on_nan = "skip";
  write_run(root / "skip", skipped);
  CHECK(load_run((root / "skip").string()).series.size() == 3);
}

TEST_CASE("the mean W_q gradient norm over all steps does not overflow where the one before the threshold does not") {
  const TempDir root("compare_grad_mean_overflow");
  FakeRun r;
  r.loss = {3.0, 2.0, 1.0, 0.5};
  r.w_q0 = constant(4, 1.7e308);  // a sum of two overflows
  r.w_q1 = constant(4, 0.0);      // the combined norm stays 1.7e308
  write_run(root / "big", r);
  const Comparison cmp = analyse_dirs({(root / "big").string()});
  REQUIRE(cmp.runs.size() == 1);
  // Relative 1e-12: the rounding of a mean of 4 equal values, far below inf or any wrong answer.
  CHECK(cmp.stats[0]["mean_grad_norm_w_q"] == doctest::Approx(1.7e308).epsilon(1e-12));
  CHECK(cmp.stats[0]["mean_grad_norm_before_loss_w_q"] == doctest::Approx(1.7e308).epsilon(1e-12));
}

TEST_CASE("a negative loss (a cross-entropy is >= 0) is a damaged row, named with its value, not a divergence") {
  const TempDir root("compare_negative_loss");
  FakeRun r;
  r.loss = {-1.0, 0.5, 0.4};
  write_run(root / "first", r);
  const RunRecord first = load_run((root / "first").string());
  CHECK_FALSE(first.diverged);
  CHECK(first.incomplete);
  CHECK(first.series.size() == 0);
  CHECK(first.incomplete_reason.find("row 1") != std::string::npos);
  CHECK(first.incomplete_reason.find("-1") != std::string::npos);

  r.loss = {2.0, 1.0, -0.5, 0.4};
  write_run(root / "later", r);
  const RunRecord later = load_run((root / "later").string());
  CHECK_FALSE(later.diverged);
  CHECK(later.series.size() == 2);
  CHECK(later.incomplete_reason.find("row 3") != std::string::npos);

  r.loss = {2.0, -inf_value, 0.4};  // --on-nan skip allows a loss not finite, never one below 0
  r.on_nan = "skip";
  write_run(root / "skip", r);
  CHECK(load_run((root / "skip").string()).series.size() == 1);
}

TEST_CASE("a verdict's per-seed mean of values near the largest double is their mean, not an overflow to inf") {
  const TempDir root("compare_huge_verdict");
  for (const std::string scale : {"none", "sqrt_dk"})
    for (int seed : {0, 1}) {
      FakeRun r;
      r.scale = scale;
      r.seed = seed;
      r.loss = constant(5, 2.0);
      if (scale == "sqrt_dk") r.w_q0 = r.w_q1 = constant(5, 1e308);  // combined: sqrt(2) 1e308, still finite
      write_run(root / (scale + std::to_string(seed)), r);
    }
  const Comparison cmp = analyse_dirs({root.string()});
  const auto v = verdict_of(cmp, "more_gradient_step0_w_q", "sqrt_dk");
  REQUIRE(v.has_value());
  // Relative 1e-12: a mean of two equal values rounds by an ulp; inf (the overflowed sum) is what is ruled out.
  CHECK(v->subject_value == doctest::Approx(std::sqrt(2.0) * 1e308).epsilon(1e-12));
}
