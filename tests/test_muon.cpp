// Muon (nn/muon.h): the Newton-Schulz result against the exact polar factor from a float64 SVD, which parameter takes
// which update, and two steps worked out by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "nn/model.h"
#include "nn/muon.h"
#include "nn/optim.h"
#include "support/model_config.h"

using namespace xgrad;

namespace {

// The scalar quintic s → a s + b s^3 + c s^5, five times: what Newton-Schulz does to each singular value of G /
// ||G||_F.
double quintic_five_times(double s) {
  for (int i = 0; i < 5; ++i) s = 3.4445 * s - 4.7750 * s * s * s + 2.0315 * s * s * s * s * s;
  return s;
}

xt::xarray<float> gaussian(std::size_t rows, std::size_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  xt::xarray<float> m = xt::zeros<float>({rows, cols});
  for (float& v : m) v = normal(rng);
  return m;
}

void set_grad(Tensor& p, const xt::xarray<float>& g) {
  p.node()->grad = g;
  p.node()->has_grad = true;
}

}  // namespace

TEST_CASE("newton_schulz keeps G's singular vectors and maps its singular values as the quintic does, near U V^T") {
  // Tolerance: the iteration runs in float (unit roundoff u = 6e-8). A step's three products over at most 16 terms of
  // size at most 1.2 err by about 16 u ≈ 1e-6 each, and every later step multiplies an error by at most
  // max |p'(s)| = 3.9 on [0, 1.2] (p the quintic): 3e-6 x (1 + 3.9 + ... + 3.9^4 = 311) ≈ 1e-3 at worst. The SVD is of
  // the float matrix itself, in double, so it adds nothing.
  const double tolerance = 1e-3;
  struct Case {
    std::size_t rows, cols;
    unsigned seed;
  };
  for (const Case& m : std::vector<Case>{{8, 16, 1}, {16, 8, 2}, {12, 12, 3}, {1, 5, 4}}) {
    CAPTURE(m.rows);
    CAPTURE(m.cols);
    const xt::xarray<float> g = gaussian(m.rows, m.cols, m.seed);
    const xt::xarray<double> gd = xt::cast<double>(g);
    const auto [u, s, vt] = xt::linalg::svd(gd, false, true);
    const xt::xarray<double> o = xt::cast<double>(nn::newton_schulz(g));
    REQUIRE(o.shape() == g.shape());
    // U^T O V: diagonal, each entry the quintic of s_i / ||G||_F.
    const xt::xarray<double> inner = xt::linalg::dot(xt::linalg::dot(xt::transpose(u), o), xt::transpose(vt));
    const double frobenius = std::sqrt(xt::sum(gd * gd)());
    double worst = 0;
    for (std::size_t i = 0; i < s.size(); ++i)
      for (std::size_t j = 0; j < s.size(); ++j) {
        const double want = i == j ? quintic_five_times(s(i) / frobenius) : 0.0;
        worst = std::max(worst, std::abs(inner(i, j) - want));
        // Not orthogonal: the singular values land in a band around 1 (these matrices have s_i / ||G||_F >= 0.01,
        // where the quintic gives [0.68, 1.135]).
        if (i == j) CHECK(s(i) / frobenius >= 0.01);
        if (i == j) CHECK((inner(i, i) >= 0.68 && inner(i, i) <= 1.135));
      }
    CHECK(worst <= tolerance);
    // Against the polar factor U V^T itself: O - U V^T = U (S' - I) V^T, whose largest singular value is at most
    // 0.32 (1 - 0.68), while the cosine between O and U V^T stays near 1.
    const xt::xarray<double> polar = xt::linalg::dot(u, vt);
    const auto [du, ds, dvt] = xt::linalg::svd(xt::xarray<double>(o - polar), false, true);
    CHECK(ds(0) <= 0.32 + tolerance);
    const double cosine = xt::sum(o * polar)() / std::sqrt(xt::sum(o * o)() * xt::sum(polar * polar)());
    CHECK(cosine >= 0.98);
  }
  CHECK(xt::all(xt::equal(nn::newton_schulz(xt::zeros<float>({3, 4})), 0.0f)));
  CHECK_THROWS_WITH_AS(nn::newton_schulz(xt::zeros<float>({2, 3, 4})),
                       doctest::Contains("newton_schulz: expects a matrix [rows, cols], got shape [2, 3, 4]"), Error);
}

TEST_CASE("muon: hidden matrices take the orthogonalised update; embeddings, readout, gains and biases AdamW's") {
  nn::ModelConfig c = testing::model_config(11, 6, 8, 2);
  c.layer_norm = true;
  c.bias = true;
  c.scale = "learned";
  nn::AttentionModel muon_model(c, 1), adamw_model(c, 1);
  const double lr = 0.02, adamw_lr = 0.005;
  auto muon = nn::make_optimizer("muon", nn::optimizer_parameters(muon_model.named_parameters()), lr,
                                 SettingValues(nlohmann::json{{"muon_adamw_lr", adamw_lr}}));
  auto adamw = nn::make_optimizer("adamw", nn::optimizer_parameters(adamw_model.named_parameters()), adamw_lr);
  auto named = muon_model.named_parameters(), reference = adamw_model.named_parameters();
  std::vector<xt::xarray<float>> before;
  for (std::size_t i = 0; i < named.size(); ++i) {
    before.push_back(named[i].second.value());
    const xt::xarray<float> g = gaussian(1, named[i].second.numel(), 10 + static_cast<unsigned>(i));
    set_grad(named[i].second, xt::xarray<float>(xt::reshape_view(g, named[i].second.shape())));
    set_grad(reference[i].second, named[i].second.grad());
  }
  muon->step();
  adamw->step();
  const auto& m = dynamic_cast<const nn::Muon&>(*muon);
  const std::map<std::string, bool> expected{{"tok_emb.weight", false},
                                             {"pos_emb.weight", false},
                                             {"head.weight", false},
                                             {"head.bias", false},
                                             {"ln_f.weight", false},
                                             {"blocks.0.attn.qk_gain", false},
                                             {"blocks.0.ln_1.weight", false},
                                             {"blocks.0.attn.w_q.weight", true},
                                             {"blocks.0.attn.w_o.weight", true},
                                             {"blocks.0.mlp.fc_in.weight", true}};
  std::size_t seen = 0;
  for (std::size_t i = 0; i < named.size(); ++i) {
    const std::string& name = named[i].first;
    CAPTURE(name);
    const bool hidden = muon->roles()[i] == nn::ParameterRole::hidden_matrix;
    CHECK(m.orthogonalised(i) == hidden);
    if (expected.count(name)) {
      ++seen;
      CHECK(hidden == expected.at(name));
    }
    if (!hidden) {
      // AdamW's step, to the bit, at muon_adamw_lr.
      CHECK(named[i].second.value() == reference[i].second.value());
      continue;
    }
    // Moonlight's scale: the update is 0.2 lr sqrt(max(rows, cols)) O, and O has min(rows, cols) singular values in
    // about [0.68, 1.135] (a Gaussian gradient has full rank), so its RMS is theirs over sqrt(max(rows, cols)): the
    // update's RMS is 0.2 lr times a number in that band, as AdamW's typical RMS of 0.2 lr.
    const xt::xarray<float> delta = before[i] - named[i].second.value();
    const double rms = std::sqrt(xt::sum(xt::cast<double>(delta * delta))() / static_cast<double>(delta.size()));
    CHECK(rms / lr >= 0.2 * 0.68);
    CHECK(rms / lr <= 0.2 * 1.135);
    CHECK(named[i].second.value() != reference[i].second.value());
  }
  CHECK(seen == expected.size());
}

TEST_CASE("muon: two steps of a rank-1 2x2 matrix and a gain, by hand (Nesterov, decoupled decay, both scales)") {
  // G = (1, 2)^T (1, 2): one singular value, ||G||_F = 5, so newton_schulz(k G) = sign(k) f(1) G / 5 with f(1) the
  // quintic five times at 1. The second gradient -0.6 G turns the Nesterov update negative while the momentum buffer
  // stays positive: buf1 = 0.05 G, u1 = 0.0975 G; buf2 = 0.0175 G, u2 = -0.013375 G.
  // Tolerance on the orthogonalised update O: float rounding leaves G a second singular value of about 1e-7 of the
  // first, and the quintic's slope at 0, a = 3.4445, grows it by a^5 = 488 over five steps: 5e-5, so 1e-4 per
  // entry of O, and lr x scale x 1e-4 per step on a weight.
  const double lr = 0.1, wd = 0.1, adamw_lr = 0.01, f1 = quintic_five_times(1.0), o_tolerance = 1e-4;
  const xt::xarray<float> g{{1.0f, 2.0f}, {2.0f, 4.0f}};
  Tensor w(xt::xarray<float>{{1.0f, -0.5f}, {0.25f, 2.0f}}, true), gain(xt::xarray<float>{1.0f, 1.0f}, true);
  auto opt = nn::make_optimizer(
      "muon", {w, gain}, lr,
      SettingValues(nlohmann::json{{"weight_decay", wd}, {"muon_adamw_lr", adamw_lr}, {"momentum", 0.95}}));
  std::vector<double> expected{1.0, -0.5, 0.25, 2.0}, gain_expected{1.0, 1.0};
  const double scale = 0.2 * std::sqrt(2.0);  // match_rms_adamw for [2, 2]
  for (const double k : {1.0, -0.6}) {
    set_grad(w, xt::xarray<float>(g * static_cast<float>(k)));
    set_grad(gain, xt::xarray<float>{0.5f, -0.25f});
    opt->step();
    const double sign = k > 0 ? 1.0 : -1.0;  // of u1 and u2 above
    for (std::size_t j = 0; j < 4; ++j) {
      expected[j] = expected[j] * (1 - lr * wd) - lr * scale * sign * f1 * g.data()[j] / 5;
      CHECK(std::abs(w.value().data()[j] - expected[j]) <= 2 * lr * scale * o_tolerance);
    }
    // The gain's AdamW steps: a constant gradient gives m_hat / sqrt(v_hat) = sign(g), every step.
    for (std::size_t j = 0; j < 2; ++j) {
      gain_expected[j] = gain_expected[j] * (1 - adamw_lr * wd) - adamw_lr * (j == 0 ? 1.0 : -1.0);
      CHECK(gain.value()(j) == doctest::Approx(gain_expected[j]).epsilon(1e-6));
    }
  }
  CHECK(opt->state().buffers.at("momentum_buffer")[0](0, 0) == doctest::Approx(0.0175).epsilon(1e-5));

  // Jordan's scale, sqrt(max(1, fan_out / fan_in)): sqrt(1.5) for a [2, 3] weight, 1 for [3, 2] (the transposed path).
  struct Scale {
    std::size_t fan_in, fan_out;
    double factor;
  };
  for (const Scale& c : std::vector<Scale>{{2, 3, std::sqrt(1.5)}, {3, 2, 1.0}}) {
    const std::size_t fan_in = c.fan_in, fan_out = c.fan_out;
    const double factor = c.factor;
    CAPTURE(fan_in);
    CHECK(nn::muon_lr_factor(nn::MuonAdjustLr::original, fan_in, fan_out) == doctest::Approx(factor));
    CHECK(nn::muon_lr_factor(nn::MuonAdjustLr::match_rms_adamw, fan_in, fan_out) ==
          doctest::Approx(0.2 * std::sqrt(3)));
    // Rank 1 again: a = (1, 2, 2) / 3 and b = (0.6, 0.8) are unit vectors, G = a b^T or b a^T has ||G||_F = 1.
    const xt::xarray<float> a{1.0f / 3, 2.0f / 3, 2.0f / 3}, b{0.6f, 0.8f};
    const xt::xarray<float> rank1 =
        fan_in == 3 ? xt::xarray<float>(xt::linalg::outer(a, b)) : xt::xarray<float>(xt::linalg::outer(b, a));
    Tensor p(xt::zeros<float>({fan_in, fan_out}), true);
    auto jordan = nn::make_optimizer("muon", {p}, lr, SettingValues(nlohmann::json{{"adjust_lr_fn", "original"}}));
    set_grad(p, rank1);
    jordan->step();
    for (std::size_t j = 0; j < 6; ++j)
      CHECK(std::abs(-p.value().data()[j] / (lr * factor) - f1 * rank1.data()[j]) <= o_tolerance);
  }
}
