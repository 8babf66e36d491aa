// `xgrad explain`: the softmax statistics against closed forms and an independent quadrature, the measurements on
// the model against the theory they illustrate, and verdicts that follow the numbers (the same data with the
// opposite property gets the opposite verdict).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include "autograd/kernels/softmax.h"
#include "report/explain.h"
#include "report/explain_figures.h"
#include "support/fake_run.h"
#include "support/temp_dir.h"

using namespace xgrad::train;
using namespace xgrad::report;
namespace fs = std::filesystem;

namespace {

// The Jacobian's Frobenius norm entry by entry, for comparison with softmax_row's closed form.
double jacobian_norm_by_entries(const std::vector<double>& p) {
  double s = 0;
  for (std::size_t i = 0; i < p.size(); ++i)
    for (std::size_t j = 0; j < p.size(); ++j) {
      const double J = (i == j ? p[i] : 0) - p[i] * p[j];
      s += J * J;
    }
  return std::sqrt(s);
}

// E[f(softmax(sigma z))] over z ~ N(0, I_2) by quadrature: the two weights depend on d = z1 - z2 ~ N(0, 2) only.
// Midpoint rule over [-10, 10] standard deviations of d, 20000 points: error far below the Monte Carlo tolerance.
SoftmaxRow two_key_expectation(double sigma) {
  SoftmaxRow m;
  const std::size_t n = 20000;
  const double sd = std::sqrt(2.0), lo = -10 * sd, h = 20 * sd / static_cast<double>(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double d = lo + (static_cast<double>(i) + 0.5) * h;
    const double w = std::exp(-d * d / 4) / std::sqrt(4 * M_PI) * h;
    const double s[2] = {sigma * d, 0};
    double p[2];
    xgrad::simd::softmax_row(s, p, 2);
    const SoftmaxRow r = softmax_row(p, 2);
    m.entropy += w * r.entropy;
    m.max_prob += w * r.max_prob;
    m.jacobian_norm += w * r.jacobian_norm;
  }
  return m;
}

TrainConfig small_config() {
  TrainConfig c;
  c.model.d_model = 32;
  c.model.n_heads = 2;
  c.model.n_layers = 2;
  c.batch_size = 16;
  c.out = "-";
  c.eval_every = 0;
  return c;
}

}  // namespace

TEST_CASE("explain: softmax_row against closed forms and the Jacobian entry by entry") {
  for (const std::size_t n : {2u, 5u, 64u}) {
    const std::vector<double> uniform(n, 1.0 / static_cast<double>(n));
    const SoftmaxRow u = softmax_row(uniform.data(), n);
    // Equal weights: entropy ln n and ‖diag(p) - ppᵀ‖_F = sqrt(n - 1) / n. Tolerance: a few ulps of sums of n terms.
    CHECK(u.entropy == doctest::Approx(std::log(static_cast<double>(n))).epsilon(1e-12));
    CHECK(u.jacobian_norm ==
          doctest::Approx(std::sqrt(static_cast<double>(n - 1)) / static_cast<double>(n)).epsilon(1e-12));
    std::vector<double> one_hot(n, 0.0);
    one_hot[1] = 1;
    const SoftmaxRow o = softmax_row(one_hot.data(), n);
    CHECK(o.entropy == 0);
    CHECK(o.max_prob == 1);
    CHECK(o.jacobian_norm == 0);  // one-hot p: the Jacobian vanishes only here
  }
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<double> s(9), p(9);
    for (auto& v : s) v = 3 * normal(rng);
    xgrad::simd::softmax_row(s.data(), p.data(), s.size());
    // The closed form subtracts terms of size up to 1: an absolute floor of 1e-12 covers their cancellation.
    CHECK(softmax_row(p.data(), p.size()).jacobian_norm ==
          doctest::Approx(jacobian_norm_by_entries(p)).epsilon(1e-10).scale(1e-2));
  }
}

TEST_CASE("explain: the softmax curves at std 0 are exact, follow quadrature for two keys, and fall with the std") {
  const std::vector<std::size_t> counts{2, 3, 3, 8, 17};
  const SoftmaxCurves zero = softmax_curves(counts, {0.0}, 1);
  double ln_n = 0, jac = 0;
  for (const auto n : counts) {
    ln_n += std::log(static_cast<double>(n)) / 5;
    jac += std::sqrt(static_cast<double>(n - 1)) / static_cast<double>(n) / 5;
  }
  CHECK(zero.entropy[0] == doctest::Approx(ln_n).epsilon(1e-12));  // every count enters equally often
  CHECK(zero.jacobian_norm[0] == doctest::Approx(jac).epsilon(1e-12));

  const std::vector<double> stds{0.3, 1, 3, 10, 100};
  const SoftmaxCurves two = softmax_curves({2}, stds, 5, 20000);
  for (std::size_t i = 0; i < stds.size(); ++i) {
    const SoftmaxRow q = two_key_expectation(stds[i]);
    // 20000 Monte Carlo rows: the standard error of a mean of values in [0, ln 2] is below 0.7 / sqrt(20000) = 0.005;
    // 0.02 is four of them.
    CHECK(two.entropy[i] == doctest::Approx(q.entropy).epsilon(0).scale(1).epsilon(0.02));
    CHECK(std::abs(two.max_prob[i] - q.max_prob) < 0.02);
    CHECK(std::abs(two.jacobian_norm[i] - q.jacobian_norm) < 0.02);
  }
  const SoftmaxCurves many = softmax_curves(counts, stds, 3);
  for (std::size_t i = 1; i < stds.size(); ++i) {
    CHECK(many.entropy[i] < many.entropy[i - 1]);  // common random numbers: monotone in sigma for each row
    CHECK(many.max_prob[i] > many.max_prob[i - 1]);
  }
  CHECK(many.max_prob.back() > 0.95);
  CHECK_THROWS_AS(softmax_curves({}, stds, 1), std::invalid_argument);
  CHECK_THROWS_AS(softmax_curves({0}, stds, 1), std::invalid_argument);
}

TEST_CASE("explain: the theory's score std against sampled dot products of independent components") {
  std::mt19937_64 rng(11);
  for (const std::size_t d_k : {4u, 64u, 1024u}) {
    std::normal_distribution<double> q(0.0, 0.7), k(0.0, 1.3);
    const std::size_t n = 4000;
    double s2 = 0;
    for (std::size_t i = 0; i < n; ++i) {
      double dot = 0;
      for (std::size_t j = 0; j < d_k; ++j) dot += q(rng) * k(rng);
      s2 += dot * dot;  // zero mean by construction
    }
    const double sampled = std::sqrt(s2 / n);
    // The std of a std estimated from 4000 draws of a product-sum is below 2%; 6% is three of those.
    CHECK(theory_score_std(d_k, 0.7, 1.3, 1.0) == doctest::Approx(sampled).epsilon(0.06));
    CHECK(theory_score_std(d_k, 0.7, 1.3, 1.0 / std::sqrt(double(d_k))) == doctest::Approx(0.7 * 1.3));
  }
}

TEST_CASE("explain: measured scores follow sqrt(d_k) std(q) std(k), saturate unscaled and not scaled") {
  const auto arms = measure_arms(small_config(), {4, 64, 1024}, {"none", "sqrt_dk"});
  REQUIRE(arms.size() == 6);
  for (const auto& a : arms) {
    INFO(a.d_k << " " << a.scale);
    // q and k come from the same inputs, so their components are not quite independent: 20% covers that at batch 16.
    CHECK(a.score_std == doctest::Approx(a.theory_std).epsilon(0.2));
    CHECK(a.multiplier == doctest::Approx(a.scale == "none" ? 1.0 : 1.0 / std::sqrt(static_cast<double>(a.d_k))));
    CHECK(a.sorted_weights.front() >= a.sorted_weights.back());
    double total = 0;
    for (double p : a.sorted_weights) total += p;
    CHECK(total == doctest::Approx(1).epsilon(1e-5));  // float weights
    for (const auto& row : a.heatmap) {
      double sum = 0;
      for (double p : row) sum += std::isnan(p) ? 0 : p;
      CHECK(sum == doctest::Approx(1).epsilon(1e-5));
    }
    CHECK(a.score_grad_median > 0);
    CHECK(a.grad_norm_w_q > 0);
    CHECK(a.n_answerable > 0);  // kv_recall names the key of each query's answer
    CHECK(a.scores.size() > 0);
  }
  CHECK(arms[4].saturated_share > arms[0].saturated_share + 0.3);  // none: d_k 1024 against 4
  CHECK(arms[5].saturated_share < 0.1);                            // sqrt_dk at d_k 1024
  CHECK(arms[4].jacobian_norm_mean < arms[0].jacobian_norm_mean / 2);
  CHECK_THROWS_AS(measure_arms(small_config(), {4, 4}, {"none"}), ConfigError);
  CHECK_THROWS_AS(measure_arms(small_config(), {4}, {"none", "none"}), ConfigError);
  CHECK_THROWS_AS(measure_arms(small_config(), {}, {"none"}), ConfigError);
}

TEST_CASE("probe prints explain's measurement of the same arm, also with several heads") {
  // Two heads: the score std is over every visible score of both, as the theory's std(q), std(k) are (a mean of the
  // per-head stds would read low against it).
  const auto probed = probe(small_config(), {4, 64}, {"none", "sqrt_dk"});
  const auto measured = measure_arms(small_config(), {4, 64}, {"none", "sqrt_dk"});
  REQUIRE(probed.size() == measured.size());
  for (std::size_t i = 0; i < probed.size(); ++i) {
    INFO(probed[i].d_k << " " << probed[i].scale);
    CHECK(probed[i].d_k == measured[i].d_k);
    CHECK(probed[i].scale == measured[i].scale);
    // The same model, batch and arithmetic: equal to rounding (the measurements repeat the same float operations).
    for (const double ArmMeasurement::*field :
         {&ArmMeasurement::theory_std, &ArmMeasurement::score_std, &ArmMeasurement::entropy_mean,
          &ArmMeasurement::max_prob_mean, &ArmMeasurement::saturated_share})
      CHECK(probed[i].*field == doctest::Approx(measured[i].*field).epsilon(1e-12));
  }
  const std::string table = format_probe_table(probed);
  CHECK(table.find(fmt::format("{:.3f}", measured[2].score_std)) != std::string::npos);
  CHECK_THROWS_AS(probe(small_config(), {4, 4}, {"none"}), ConfigError);
  CHECK_THROWS_AS(probe(small_config(), {0}, {"none"}), ConfigError);
}

TEST_CASE("explain: the histogram's area is the share of scores inside it") {
  ArmMeasurement a;
  a.scores = {-1, 0, 0, 0.5, 1, 100};
  a.score_mean = 0;
  a.score_std = 1;
  a.theory_std = 1;
  const Histogram h = score_histogram(a);
  double area = 0;
  for (double d : h.density) area += d * h.width;
  CHECK(area == doctest::Approx(5.0 / 6));  // 100 lies outside ±4.5
  CHECK(h.density.size() == kHistogramBins);
}

namespace {

// Arms whose numbers have chosen properties: unscaled scores with std d_k^slope, every point on the softmax curve,
// the unscaled W_q gradient `w_q_factor` times the scaled one.
Explanation synthetic(double slope, double w_q_factor, double earned_share = std::nan("")) {
  Explanation e;
  e.d_ks = {4, 64, 1024};
  e.scales = {"none", "sqrt_dk"};
  std::vector<double> grid;
  for (int i = 0; i <= 60; ++i) grid.push_back(0.01 * std::pow(10.0, i / 10.0));
  e.curves = softmax_curves({8}, grid, 1);
  const double saturated[] = {0.02, 0.4, 0.9};
  for (std::size_t i = 0; i < e.d_ks.size(); ++i)
    for (const auto& scale : e.scales) {
      ArmMeasurement a;
      a.d_k = e.d_ks[i];
      a.scale = scale;
      a.score_std = a.theory_std = scale == "none" ? std::pow(static_cast<double>(a.d_k), slope) : 1.0;
      const SoftmaxCurves at = softmax_curves({8}, {a.score_std}, 1);
      a.entropy_mean = at.entropy[0];
      a.max_prob_mean = at.max_prob[0];
      a.jacobian_norm_mean = a.score_grad_median = at.jacobian_norm[0];
      a.saturated_share = scale == "none" ? saturated[i] : 0.0;
      a.grad_norm_w_q = a.grad_norm_w_k = scale == "none" ? w_q_factor : 1.0;
      a.earned_share = scale == "none" ? earned_share : std::nan("");
      a.chance_share = 1.0 / 8;
      a.n_answerable_saturated = 200;
      a.earned_se = 0.03;
      a.n_earned_clusters = 16;
      e.arms.push_back(a);
    }
  return e;
}

const ExplainSection& section(const std::vector<ExplainSection>& s, const std::string& id) {
  for (const auto& x : s)
    if (x.id == id) return x;
  FAIL("no section " << id);
  return s.front();
}

}  // namespace

TEST_CASE("explain: each verdict follows its numbers, and flips with them") {
  const auto as_told = explain_sections(synthetic(0.5, 0.5));
  REQUIRE(as_told.size() == 5);
  for (const auto& s : as_told) {
    INFO(s.id << ": " << s.verdict.text);
    CHECK(s.verdict.verdict_class == "holds");
    CHECK_FALSE(s.verdict.text.empty());
  }
  // Slopes are printed to two decimals (a flat line is "0.00", not 17 digits).
  CHECK(section(as_told, "scaling").verdict.text.find("log-log slope 0.00)") != std::string::npos);
  // Flat unscaled scores: no growth, no saturation from magnitude.
  const auto flat = explain_sections(synthetic(0.0, 0.5));
  CHECK(section(flat, "growth").verdict.verdict_class == "fails");
  // A larger unscaled W_q gradient at initialisation: the gradient step holds per query only.
  const auto larger = explain_sections(synthetic(0.5, 2.0));
  CHECK(section(larger, "gradient").verdict.key == "gradient.per_query");
  CHECK(section(larger, "gradient").verdict.text.find("3 of 3") != std::string::npos);
  // Peaks on the answer far above chance (90% of 200 against 12.5%): the peak is partly earned.
  const auto earned = explain_sections(synthetic(0.5, 0.5, 0.9));
  CHECK(section(earned, "saturation").verdict.verdict_class == "partly");
  const auto chance = explain_sections(synthetic(0.5, 0.5, 0.13));
  CHECK(section(chance, "saturation").verdict.verdict_class == "holds");
}

TEST_CASE("explain: a slope over d_k from two head sizes is not decided; the same arms with a third decide it") {
  // Two head sizes always lie on a line: growth's and scaling's slope would "hold" whatever the curve between them.
  Explanation two = synthetic(0.5, 0.5);
  two.d_ks = {4, 1024};
  two.arms.erase(std::remove_if(two.arms.begin(), two.arms.end(), [](const ArmMeasurement& a) { return a.d_k == 64; }),
                 two.arms.end());
  const auto sections = explain_sections(two);
  for (const std::string id : {"growth", "scaling"}) {
    INFO(id);
    CHECK(section(sections, id).verdict.verdict == "not decided");
    CHECK(section(sections, id).verdict.key == "few_d_k");
    CHECK(section(explain_sections(synthetic(0.5, 0.5)), id).verdict.verdict == "holds");
  }
}

TEST_CASE("explain: steps 2, 3 and 5 check every head size between the ends, and decide from two") {
  // Saturated share 2%, 95%, 60% and a Jacobian norm that rises at d_k 64: the ends agree with the claims, the middle
  // does not move one way with d_k.
  Explanation e = synthetic(0.5, 0.5);
  for (auto& a : e.arms)
    if (a.scale == "none" && a.d_k == 64) a.saturated_share = 0.95, a.jacobian_norm_mean *= 5;
  for (auto& a : e.arms)
    if (a.scale == "none" && a.d_k == 1024) a.saturated_share = 0.6;
  const auto sections = explain_sections(e);
  for (const std::string id : {"saturation", "gradient", "sizes"}) {
    INFO(id << ": " << section(sections, id).verdict.text);
    CHECK(section(sections, id).verdict.key == "not_monotone");
    CHECK(section(sections, id).verdict.verdict_class == "partly");
  }
  // "half from d_k 64" would say every larger d_k has half saturated: not so when d_k 1024 falls back to 45%.
  for (auto& a : e.arms)
    if (a.scale == "none" && a.d_k == 1024) a.saturated_share = 0.45;
  CHECK(std::get<long long>(section(explain_sections(e), "sizes").verdict.fields.at("most").value) == 0);
  // Two head sizes: nothing lies between the ends, so the comparison of the ends decides.
  Explanation two = synthetic(0.5, 0.5);
  two.d_ks = {4, 1024};
  two.arms.erase(std::remove_if(two.arms.begin(), two.arms.end(), [](const ArmMeasurement& a) { return a.d_k == 64; }),
                 two.arms.end());
  for (const std::string id : {"saturation", "gradient", "sizes"}) {
    INFO(id);
    CHECK(section(explain_sections(two), id).verdict.verdict_class == "holds");
  }
}

TEST_CASE("explain: --runs of damaged or unrelated directories gives a note or a clear error") {
  xgrad::testing::TempDir tmp("explain_runs");
  const fs::path root = tmp.path();
  xgrad::testing::FakeRun r;
  r.loss = {2.0, 1.5, 1.0, 0.5};
  xgrad::testing::write_run(root / "sweep" / "good", r);
  fs::create_directories(root / "sweep" / "broken");
  std::ofstream(root / "sweep" / "broken" / "config.json") << "{not json";
  std::ofstream(root / "sweep" / "broken" / "metrics.csv") << "step,loss\n0,1\n";
  const TrainingEvidence t = training_evidence({(root / "sweep").string()}, -1);
  REQUIRE(t.points.size() == 1);
  CHECK(t.points[0].d_k == 16);
  REQUIRE(t.notes.size() == 1);
  CHECK(t.notes[0].find("broken") != std::string::npos);
  // Runs of another model than the one measured: the page says in what they differ.
  ExplainOptions options;
  options.d_ks = {16};
  options.runs = {(root / "sweep").string()};
  const Explanation e = explain(small_config(), options);  // d_model 32; the fake runs have 64
  bool named = false;
  for (const auto& n : e.notes) named = named || n.find("d_model (runs 64; measured 32)") != std::string::npos;
  CHECK(named);
  fs::create_directories(root / "empty");
  CHECK_THROWS_WITH_AS(training_evidence({(root / "empty").string()}, -1), doctest::Contains("empty"),
                       std::invalid_argument);
}

TEST_CASE("explain: head sizes in any order, settings of one scaling, overflow and one head size") {
  ExplainOptions options;
  options.d_ks = {1024, 4, 64};
  const Explanation e = explain(small_config(), options);
  CHECK(e.d_ks == std::vector<std::size_t>{4, 64, 1024});  // each step reads from the smallest d_k up
  CHECK(e.arms.front().d_k == 4);
  CHECK(section(e.sections, "saturation").verdict.verdict_class != "fails");

  // A setting of softcap given with none and softcap goes to the softcap arms only; one no arm reads is refused.
  TrainConfig capped = small_config();
  capped.settings.set("softcap_cap", 0.5);
  CHECK(measure_arms(capped, {4}, {"none", "softcap"}).size() == 2);
  CHECK_THROWS_WITH_AS(measure_arms(capped, {4}, {"none", "sqrt_dk"}), doctest::Contains("--softcap-cap"), ConfigError);

  TrainConfig overflow = small_config();
  overflow.model.proj_init_gain = 1e20;
  CHECK_THROWS_WITH_AS(measure_arms(overflow, {4}, {"none"}), doctest::Contains("are not finite"), ConfigError);

  options.d_ks = {1};
  for (const auto& s : explain(small_config(), options).sections) {
    INFO(s.id << ": " << s.verdict.text);
    CHECK(s.verdict.verdict == "not decided");
    CHECK(s.verdict.text.find("nan") == std::string::npos);
  }
}

TEST_CASE("explain: a verdict judges the unscaled arm, and claims only what was measured") {
  Explanation e = synthetic(0.5, 0.5);
  e.scales.push_back("ssmax");  // a third scaling far from the theory's line does not move step 1's verdict
  for (const auto d_k : e.d_ks) {
    ArmMeasurement a = *e.arm(d_k, "sqrt_dk");
    a.scale = "ssmax";
    a.theory_std = a.score_std / 1.4;
    e.arms.push_back(a);
  }
  const auto sections = explain_sections(e);
  CHECK(section(sections, "growth").verdict.verdict == "holds");
  // No key named by the task: the saturation verdict holds without a word on the answer's key, which it says is not
  // measured.
  const auto unmeasured = explain_sections(synthetic(0.5, 0.5));
  CHECK(section(unmeasured, "saturation").verdict.key == "saturation.holds_unmeasured");
}

TEST_CASE("explain: text from the runs read reaches explain.md as text, never as markup") {
  Explanation e = synthetic(0.5, 0.5);
  TrainingEvidence t;
  TrainingPoint p;
  p.d_k = 4;
  p.scale = "none";
  p.label = "EVIL\n\n# INJECTED <img src=x onerror=alert(1)> [clk](javascript:alert(1))";
  t.points.push_back(p);
  e.training = t;
  e.notes.push_back(p.label);
  e.sections = explain_sections(e);
  e.sections[0].paragraphs.push_back(p.label);
  const std::string md = explain_markdown(e, {}, "");
  CHECK(md.find("\n# INJECTED") == std::string::npos);
  // Every '<' of the tag and ']' of the link is escaped, so markdown shows them as text.
  const auto all_escaped = [&](const std::string& what) {
    for (auto at = md.find(what); at != std::string::npos; at = md.find(what, at + 1))
      if (at == 0 || md[at - 1] != '\\') return false;
    return true;
  };
  CHECK(all_escaped("<img"));
  CHECK(all_escaped("](javascript"));
  CHECK(md.find("\\# INJECTED") != std::string::npos);
}

TEST_CASE("explain: step 3 names the quantity that did not fall; step 4 judges 1/sqrt(d_k) only") {
  Explanation e = synthetic(0.5, 0.5);
  for (auto& a : e.arms)
    if (a.scale == "none") a.jacobian_norm_mean = 0.3;  // flat Jacobian, the score gradient still falls
  const auto flat = explain_sections(e);
  CHECK(section(flat, "gradient").verdict.verdict_class == "fails");
  CHECK(section(flat, "gradient").verdict.key == "gradient.jacobian_flat");  // the quantity that did not fall

  Explanation other = synthetic(0.5, 0.5);
  other.scales = {"none", "dk"};
  for (auto& a : other.arms)
    if (a.scale == "sqrt_dk") a.scale = "dk";
  const auto sections = explain_sections(other);
  CHECK(section(sections, "scaling").verdict.verdict == "not measured");
  REQUIRE_FALSE(section(sections, "scaling").paragraphs.empty());
  CHECK(section(sections, "scaling").paragraphs.back().rfind("dk: ", 0) == 0);  // dk is described, not judged
}

TEST_CASE("explain: step 5 names no d_k from which a share is reached when none of the measured reaches it") {
  Explanation e = synthetic(0.5, 0.5);
  for (auto& a : e.arms) a.saturated_share = std::min(a.saturated_share, 0.3);  // 10% from d_k 64, never half
  const SectionVerdict v = section(explain_sections(e), "sizes").verdict;
  CHECK(std::get<long long>(v.fields.at("mild").value) == 64);
  CHECK(std::get<long long>(v.fields.at("most").value) == 0);
  CHECK(v.text.find(text("explain", "sizes.from", {{"d_k", 0}})) == std::string::npos);  // no "from d_k 0"
  CHECK(v.text.find(text("explain", "sizes.from_none")) != std::string::npos);
}

TEST_CASE("explain: with training evidence, steps 3 and 5 follow the runs' comparisons") {
  Explanation e = synthetic(0.5, 2.0);
  TrainingEvidence t;
  for (const std::string scale : {"none", "sqrt_dk"})
    for (const auto d_k : e.d_ks) {
      TrainingPoint p;
      p.d_k = d_k;
      p.scale = p.label = scale;
      p.n_runs = 2;
      p.score_grad_relative = scale == "none" ? 0.1 : 1.0;  // unscaled passes less gradient in training
      p.versus_reference = scale == "none" ? "" : d_k >= 64 ? "lower" : "same";
      t.points.push_back(p);
    }
  e.training = t;
  const auto sections = explain_sections(e);
  CHECK(section(sections, "gradient").verdict.key == "gradient.per_query_training");
  CHECK(section(sections, "sizes").verdict.key == "sizes.trains_better");
  CHECK(section(sections, "sizes").verdict.text.find("from d_k 64") != std::string::npos);
  for (auto& p : e.training->points)
    if (p.scale == "sqrt_dk") p.versus_reference = "higher";
  CHECK(section(explain_sections(e), "sizes").verdict.key == "sizes.init_only");
}
