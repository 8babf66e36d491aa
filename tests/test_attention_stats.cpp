// Saturation statistics against values computed by hand on a small fixed attention matrix.
#include <doctest/doctest.h>

#include <cmath>

#include "nn/attention_stats.h"

using namespace xgrad::nn;

namespace {
// One batch, one head, T = 3, causal: row 0 attends to 1 key (skipped), row 1 to 2, row 2 to 3.
// Row 1 scores [0, ln 3] → weights [1/4, 3/4]; row 2 scores [0, 0, ln 2] → weights [1/4, 1/4, 1/2].
struct Fixture {
  xt::xarray<float> scores = xt::xarray<float>::from_shape({1, 1, 3, 3});
  xt::xarray<float> probs = xt::xarray<float>::from_shape({1, 1, 3, 3});
  xt::xarray<float> grad = xt::zeros<float>({1, 1, 3, 3});
  Fixture() {
    const float ninf = -INFINITY;
    const float s[9] = {0, ninf, ninf, 0, std::log(3.f), ninf, 0, 0, std::log(2.f)};
    const float p[9] = {1, 0, 0, 0.25f, 0.75f, 0, 0.25f, 0.25f, 0.5f};
    std::copy(s, s + 9, scores.data());
    std::copy(p, p + 9, probs.data());
    grad(0, 0, 0, 0) = 100;  // row 0 is skipped, so this must not show up
    grad(0, 0, 1, 0) = 3;    // row 1: |g| = 5
    grad(0, 0, 1, 1) = 4;
    grad(0, 0, 2, 2) = 1;  // row 2: |g| = 1
  }
};
}  // namespace

TEST_CASE("attention_stats: every metric on a hand-computed 3x3 causal attention matrix") {
  Fixture f;
  const auto stats = attention_stats(f.scores, f.probs, &f.grad, nullptr);
  REQUIRE(stats.size() == 1);
  const AttentionStats& s = stats[0];
  CHECK(s.n_queries == 2);
  // valid entries 0, ln 3, 0, 0, ln 2: population std
  CHECK(s.score_std == doctest::Approx(0.4572355138));
  CHECK(s.score_max_abs == doctest::Approx(std::log(3.0)));
  // entropies: -(1/4 ln 1/4 + 3/4 ln 3/4) = 0.5623351446, -(2 * 1/4 ln 1/4 + 1/2 ln 1/2) = 1.0397207708
  CHECK(s.entropy_mean == doctest::Approx(0.8010279577));
  CHECK(s.entropy_min == doctest::Approx(0.5623351446));
  CHECK(s.max_prob_mean == doctest::Approx(0.625));
  CHECK(s.frac_max_prob_above_099 == 0.0);
  // row gradient norms {5, 1}: linear interpolation between ranks
  CHECK(s.score_grad_p10 == doctest::Approx(1.4));
  CHECK(s.score_grad_median == doctest::Approx(3.0));
  CHECK(s.score_grad_p90 == doctest::Approx(4.6));
}

TEST_CASE("attention_stats: a saturated row, a query mask, and no gradient") {
  Fixture f;
  f.probs(0, 0, 2, 0) = 0.995f;  // row 2 now saturated (scores need not match for this field)
  f.probs(0, 0, 2, 1) = 0.004f;
  f.probs(0, 0, 2, 2) = 0.001f;
  xt::xarray<bool> only_last = xt::xarray<bool>::from_shape({1, 3});
  only_last.fill(false);
  only_last(0, 2) = true;
  const auto s = attention_stats(f.scores, f.probs, nullptr, &only_last)[0];
  CHECK(s.n_queries == 1);
  CHECK(s.frac_max_prob_above_099 == 1.0);
  CHECK(s.max_prob_mean == doctest::Approx(0.995));
  CHECK(std::isnan(s.score_grad_median));  // no gradient given
  only_last(0, 2) = false;
  only_last(0, 0) = true;  // only the one-key row: nothing left to measure
  const auto empty = attention_stats(f.scores, f.probs, nullptr, &only_last)[0];
  CHECK(empty.n_queries == 0);
  CHECK(std::isnan(empty.entropy_mean));
}

TEST_CASE("attention_stats: mismatched shapes throw") {
  Fixture f;
  xt::xarray<float> wrong = xt::zeros<float>({1, 1, 3, 2});
  CHECK_THROWS_AS(attention_stats(f.scores, wrong, nullptr, nullptr), std::invalid_argument);
  xt::xarray<bool> bad_mask = xt::xarray<bool>::from_shape({2, 3});
  CHECK_THROWS_AS(attention_stats(f.scores, f.probs, nullptr, &bad_mask), std::invalid_argument);
}

TEST_CASE("percentile interpolates like numpy") {
  std::vector<double> v{4, 1, 3, 2};
  CHECK(percentile(v, 0.0) == 1.0);
  CHECK(percentile(v, 1.0) == 4.0);
  CHECK(percentile(v, 0.5) == doctest::Approx(2.5));
  std::vector<double> none;
  CHECK(std::isnan(percentile(none, 0.5)));
}
