// The per-head spectral norm of W_q,h W_k,h^T (power iteration) against an eigendecomposition in double, on random
// matrices and on a model's heads as metrics.csv logs them; and a run begun without the column resumes without it.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "nn/attention_stats.h"
#include "nn/entropy_bound.h"
#include "nn/model.h"
#include "tests/support/earlier_metrics.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_run.h"
#include "train/metrics_log.h"
#include "train/run_files.h"
#include "train/trainer.h"

using namespace xgrad;
namespace fs = std::filesystem;

namespace {

// The eigenvalues of the symmetric matrix `a` [n, n] (row-major), by cyclic Jacobi rotations: a reference that
// shares nothing with power iteration.
std::vector<double> jacobi_eigenvalues(std::vector<double> a, std::size_t n) {
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (std::size_t p = 0; p < n; ++p)
      for (std::size_t q = p + 1; q < n; ++q) off += a[p * n + q] * a[p * n + q];
    if (off < 1e-30) break;
    for (std::size_t p = 0; p < n; ++p)
      for (std::size_t q = p + 1; q < n; ++q) {
        const double apq = a[p * n + q];
        if (std::abs(apq) < 1e-300) continue;
        const double theta = (a[q * n + q] - a[p * n + p]) / (2 * apq);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (std::size_t k = 0; k < n; ++k) {  // columns p, q
          const double akp = a[k * n + p], akq = a[k * n + q];
          a[k * n + p] = c * akp - s * akq;
          a[k * n + q] = s * akp + c * akq;
        }
        for (std::size_t k = 0; k < n; ++k) {  // rows p, q
          const double apk = a[p * n + k], aqk = a[q * n + k];
          a[p * n + k] = c * apk - s * aqk;
          a[q * n + k] = s * apk + c * aqk;
        }
      }
  }
  std::vector<double> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = a[i * n + i];
  return out;
}

// ||W_q,h W_k,h^T||_2 from the eigenvalues of M^T M, M formed explicitly in double.
template <class T>
double reference_norm(const xt::xarray<T>& w_q, const xt::xarray<T>& w_k, std::size_t n_heads, std::size_t head) {
  const std::size_t d = w_q.shape(0), cols = w_q.shape(1), d_k = cols / n_heads;
  std::vector<double> m(d * d, 0.0), mtm(d * d, 0.0);
  for (std::size_t i = 0; i < d; ++i)
    for (std::size_t j = 0; j < d; ++j)
      for (std::size_t c = 0; c < d_k; ++c)
        m[i * d + j] += static_cast<double>(w_q(i, head * d_k + c)) * static_cast<double>(w_k(j, head * d_k + c));
  for (std::size_t i = 0; i < d; ++i)
    for (std::size_t j = 0; j < d; ++j)
      for (std::size_t k = 0; k < d; ++k) mtm[i * d + j] += m[k * d + i] * m[k * d + j];
  double largest = 0;
  for (double e : jacobi_eigenvalues(mtm, d)) largest = std::max(largest, e);
  return std::sqrt(largest);
}

}  // namespace

TEST_CASE("qk_spectral_norm: power iteration equals the largest singular value from an eigendecomposition") {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  struct Shape {
    std::size_t d_model, n_heads, d_k;
  };
  for (const Shape shape : {Shape{8, 1, 8}, Shape{16, 2, 4}, Shape{12, 3, 5}, Shape{24, 1, 32}, Shape{5, 2, 1}}) {
    xt::xarray<double> w_q = xt::zeros<double>({shape.d_model, shape.n_heads * shape.d_k}), w_k = w_q;
    for (auto& e : w_q) e = normal(rng);
    for (auto& e : w_k) e = normal(rng) * 0.3;
    for (std::size_t h = 0; h < shape.n_heads; ++h) {
      INFO("d_model " << shape.d_model << ", " << shape.n_heads << " heads of " << shape.d_k << ", head " << h);
      const double expected = reference_norm(w_q, w_k, shape.n_heads, h);
      CHECK(nn::qk_spectral_norm(w_q, w_k, shape.n_heads, h, 20000, 1e-15) == doctest::Approx(expected).epsilon(1e-9));
      // float weights: the same number, computed in double from the rounded weights
      const xt::xarray<float> fq = xt::cast<float>(w_q), fk = xt::cast<float>(w_k);
      CHECK(nn::qk_spectral_norm(fq, fk, shape.n_heads, h, 20000, 1e-15) ==
            doctest::Approx(reference_norm(fq, fk, shape.n_heads, h)).epsilon(1e-9));
    }
  }
  // a rank-one product a b^T (d_k = 1): its norm is |a| |b|
  xt::xarray<double> w_q = xt::zeros<double>({3, 1}), w_k = xt::zeros<double>({3, 1});
  w_q(0, 0) = 1, w_q(1, 0) = 2, w_q(2, 0) = 2;  // |a| = 3
  w_k(1, 0) = 3, w_k(2, 0) = 4;                 // |b| = 5
  CHECK(nn::qk_spectral_norm(w_q, w_k, 1, 0) == doctest::Approx(3.0 * 5.0));
  CHECK(nn::qk_spectral_norm(xt::xarray<double>(xt::zeros<double>({4, 2})),
                             xt::xarray<double>(xt::zeros<double>({4, 2})), 1, 0) == 0.0);
  CHECK_THROWS_AS(nn::qk_spectral_norm(w_q, w_k, 2, 0), std::invalid_argument);
  CHECK_THROWS_AS(nn::qk_spectral_norm(w_q, w_k, 1, 1), std::invalid_argument);
}

TEST_CASE("metrics.csv's qk_spectral_norm: per head, beside score_max_abs, the scaled norm of the weights used") {
  for (const char* scale : {"sqrt_dk", "none", "dk"}) {
    train::TrainConfig c = xgrad::testing::tiny_run(xgrad::testing::temp_dir("qk_norm").string(), 30);
    c.model.n_heads = 2;
    c.model.scale = scale;
    c.lr = 0.01;
    c.log_every = 5;
    c.checkpoint_every = 0;
    train::train(c);
    const train::MetricsTable t = train::read_metrics((fs::path(c.out) / "metrics.csv").string());
    namespace columns = train::metrics_columns;
    // beside the largest score, in every head's group
    for (std::size_t h = 0; h < 2; ++h) {
      const std::size_t max_logit = t.column(columns::attention(0, h, "score_max_abs"));
      CHECK(t.column(columns::attention(0, h, "qk_spectral_norm")) == max_logit + 1);
    }
    // step 0's forward used the initial weights: a model built from the same seed has them
    const auto task = c.make_task();
    nn::AttentionModel model(train::model_config(c, *task), c.seed);
    auto& attn = dynamic_cast<nn::MultiHeadAttention&>(*model.attention_layers()[0]);
    const double c_scale = std::string(scale) == "sqrt_dk" ? 1 / std::sqrt(8.0)
                           : std::string(scale) == "dk"    ? 1 / 8.0
                                                           : 1.0;
    for (std::size_t h = 0; h < 2; ++h) {
      INFO(scale << ", head " << h);
      const double expected = c_scale * reference_norm(attn.w_q->weight.value(), attn.w_k->weight.value(), 2, h);
      const double logged = t.rows[0][t.column(columns::attention(0, h, "qk_spectral_norm"))];
      CHECK(logged == doctest::Approx(expected).epsilon(1e-5));
      // measured steps only, and it changes as the weights train
      CHECK(std::isnan(t.rows[1][t.column(columns::attention(0, h, "qk_spectral_norm"))]));
      CHECK(t.rows[25][t.column(columns::attention(0, h, "qk_spectral_norm"))] != logged);
      // Zero scores are impossible to exceed: every logged |score| is within norm x |x_i| |x_j| for LayerNorm'd
      // inputs, |x| <= sqrt(d_model) (LayerNorm weight 1 at step 0).
      CHECK(t.rows[0][t.column(columns::attention(0, h, "score_max_abs"))] <= logged * 16 * (1 + 1e-4));
    }
    fs::remove_all(c.out);
  }
}

TEST_CASE("a run whose metrics.csv has no qk_spectral_norm columns (an earlier release) resumes without them") {
  train::TrainConfig c = xgrad::testing::tiny_run(xgrad::testing::temp_dir("qk_norm_resume").string(), 16);
  c.checkpoint_every = 8;
  train::train(c);
  const fs::path csv = fs::path(c.out) / "metrics.csv";
  // Rewrite the file as a release before qk_spectral_norm wrote it: the same table without those columns and the
  // ones added after them (max_logit).
  const auto [old_header, dropped] = xgrad::testing::drop_columns(csv, [](const std::string& name) {
    return name.find("qk_spectral_norm") != std::string::npos || name.find("/max_logit") != std::string::npos;
  });
  REQUIRE(dropped == 2);
  train::TrainConfig more = c;
  more.steps = 24;
  more.resume = true;
  train::train(more);
  const xgrad::testing::TableShape table = xgrad::testing::table_shape(csv);
  CHECK(table.header == old_header);
  CHECK(table.rows == 24);
  CHECK(table.rows_of_header_width == 24);
  fs::remove_all(c.out);
}

TEST_CASE("entropy_lower_bound: the least softmax entropy under a norm on the logits, attained, never undercut") {
  auto entropy = [](const std::vector<double>& a) {
    double m = -INFINITY, z = 0, h = 0;
    for (double v : a) m = std::max(m, v);
    for (double v : a) z += std::exp(v - m);
    for (double v : a) {
      const double p = std::exp(v - m) / z;
      if (p > 0) h -= p * std::log(p);
    }
    return h;
  };
  CHECK(nn::entropy_lower_bound(0, 9) == doctest::Approx(std::log(9.0)));
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (const double T : {2.0, 5.0, 9.0}) {
    for (const double sigma : {0.5, 2.0, 6.0, 20.0}) {
      INFO("T " << T << ", sigma " << sigma);
      const double bound = nn::entropy_lower_bound(sigma, T);
      // the extremal vector: centred, one logit sigma sqrt((T-1)/T), the others -sigma / sqrt(T (T-1))
      std::vector<double> a(static_cast<std::size_t>(T), -sigma / std::sqrt(T * (T - 1)));
      a[0] = sigma * std::sqrt((T - 1) / T);
      double norm2 = 0;
      for (double v : a) norm2 += v * v;
      CHECK(std::sqrt(norm2) == doctest::Approx(sigma));
      CHECK(entropy(a) == doctest::Approx(bound).epsilon(1e-9));
      // random vectors of that norm never go below it
      for (int trial = 0; trial < 2000; ++trial) {
        std::vector<double> r(a.size());
        double n2 = 0;
        for (double& v : r) {
          v = normal(rng) + (trial % 2 ? 0.0 : 3.0 * (&v == &r[0]));  // half of them peaked on one key
          n2 += v * v;
        }
        for (double& v : r) v *= sigma / std::sqrt(n2);
        CHECK(entropy(r) >= bound - 1e-12);
      }
    }
  }
}
