// QK-Clip (the scaling qk_clip, nn/scaling/qk_clip.cpp): the largest logit each head had in a training step, and the
// rescaling of W_q and W_k after the optimizer's update (Kimi Team 2025, "Kimi K2", sec. 2.1).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include <xtensor/xview.hpp>

#include "nn/attention.h"
#include "nn/attention_stats.h"
#include "nn/optim.h"

using namespace xgrad;
using namespace xgrad::nn;

namespace {

constexpr std::size_t kDModel = 16, kHeads = 2, kDk = 8, kT = 6;

xt::xarray<float> normal_array(const shape_t& shape, Generator& gen) {
  xt::xarray<float> a = xt::xarray<float>::from_shape(shape);
  for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<float>(gen.normal());
  return a;
}

// A causal layer of 2 heads of d_k 8 on d_model 16 (the weights of seed 5 whatever the scaling), its projections
// four times the LeCun init so that the scores are tens; in training mode.
std::shared_ptr<MultiHeadAttention> layer(const std::string& scale, double tau = 100) {
  Generator gen(5);
  SettingValues settings;
  settings.set("qk_clip_tau", tau);
  return std::make_shared<MultiHeadAttention>(kDModel, kHeads, scale, true, gen, kT, /*init_gain=*/4.0, kDk, settings);
}

Tensor input() {
  Generator gen(9);
  return Tensor(normal_array({2, kT, kDModel}, gen));
}

// W's columns of head h: [d_model, d_k].
xt::xarray<float> head_columns(const Tensor& w, std::size_t h) {
  return xt::view(w.value(), xt::all(), xt::range(h * kDk, (h + 1) * kDk));
}

// The largest logit of each head on the input, one training forward pass of `attn` (the counts start afresh).
std::vector<float> max_logits(MultiHeadAttention& attn, const Tensor& x) {
  std::fill(attn.step_max_logits.begin(), attn.step_max_logits.end(), -INFINITY);
  attn.forward(x);
  return attn.step_max_logits;
}

}  // namespace

TEST_CASE("qk_clip: a layer keeps each head's largest logit of the step, the scaled score sqrt_dk's layer records") {
  const Tensor x = input();
  const auto clip = layer("qk_clip");
  REQUIRE(clip->step_max_logits.size() == kHeads);
  CHECK(clip->step_max_logits[0] == -INFINITY);
  const std::vector<float> m = max_logits(*clip, x);
  // Its multiplier is sqrt_dk's: a sqrt_dk layer of the same weights records the same scores (-inf where masked).
  const auto plain = layer("sqrt_dk");
  CHECK(plain->step_max_logits.empty());  // a scaling that does not act after the step keeps none
  plain->record_attention = true;
  plain->forward(x);
  const xt::xarray<float>& scores = plain->last.scores.value();  // [B, H, T, T]
  // metrics.csv's max_logit column is the same number (attention_stats of the record).
  const std::vector<AttentionStats> stats = attention_stats(scores, plain->last.probs, nullptr, nullptr);
  for (std::size_t h = 0; h < kHeads; ++h) {
    CAPTURE(h);
    CHECK(m[h] == xt::amax(xt::view(scores, xt::all(), h))());
    CHECK(stats[h].max_logit == m[h]);
    CHECK(m[h] > 5.0f);  // init_gain 4: scores of tens, a premise of the tests below
  }
  // Two passes of one step: the larger of each.
  clip->forward(x * 0.5);
  CHECK(clip->step_max_logits == m);
  clip->forward(x * 2.0);
  for (std::size_t h = 0; h < kHeads; ++h) CHECK(clip->step_max_logits[h] == doctest::Approx(4.0 * m[h]).epsilon(1e-5));
  // Passes that are not training steps do not count: evaluation mode, or gradients off.
  const auto evaluated = layer("qk_clip");
  evaluated->eval();
  evaluated->forward(x);
  CHECK(evaluated->step_max_logits[0] == -INFINITY);
  evaluated->train();
  {
    NoGradGuard no_grad;
    evaluated->forward(x);
  }
  CHECK(evaluated->step_max_logits[1] == -INFINITY);
}

TEST_CASE("qk_clip: attention-weight dropout (the composed path) keeps the same largest logits") {
  const Tensor x = input();
  const std::vector<float> fused = max_logits(*layer("qk_clip"), x);
  const auto dropped = layer("qk_clip");
  dropped->attn_dropout->p = 0.5;
  dropped->attn_dropout->generator = std::make_shared<Generator>(3);
  REQUIRE(dropped->attn_dropout->active());
  const std::vector<float> composed = max_logits(*dropped, x);
  // The same scores (dropout acts on the weights after the softmax), summed by the composed ops' GEMMs.
  for (std::size_t h = 0; h < kHeads; ++h) CHECK(composed[h] == doctest::Approx(fused[h]).epsilon(1e-5));
  // The queries at some positions only (the last block's forward_at): the composed path computes every query but
  // counts those alone, as the fused path does. Expected: the largest of those rows in a sqrt_dk layer's record.
  const std::vector<std::size_t> positions{0};
  const auto plain = layer("sqrt_dk");
  plain->record_attention = true;
  plain->forward(x);
  const xt::xarray<float>& scores = plain->last.scores.value();  // [B, H, T, T], -inf where masked
  const auto fused_at = layer("qk_clip");
  fused_at->forward_at(x, positions);
  std::fill(dropped->step_max_logits.begin(), dropped->step_max_logits.end(), -INFINITY);
  dropped->forward_at(x, positions);
  bool some_head_elsewhere = false;
  for (std::size_t h = 0; h < kHeads; ++h) {
    float expected = -INFINITY;
    for (std::size_t b = 0; b < scores.shape(0); ++b)
      for (std::size_t r : positions) expected = std::max(expected, xt::amax(xt::view(scores, b, h, r, xt::all()))());
    CHECK(fused_at->step_max_logits[h] == doctest::Approx(expected).epsilon(1e-5));
    CHECK(dropped->step_max_logits[h] == doctest::Approx(expected).epsilon(1e-5));
    some_head_elsewhere = some_head_elsewhere || expected < 0.99 * fused[h];
  }
  CHECK(some_head_elsewhere);  // the premise: another query holds some head's largest logit
}

TEST_CASE("qk_clip: a head past tau is scaled so the same input gives tau exactly; heads under tau are untouched") {
  const Tensor x = input();
  const std::vector<float> m = max_logits(*layer("qk_clip"), x);
  REQUIRE(m[0] != m[1]);
  const std::size_t above = m[0] > m[1] ? 0 : 1, below = 1 - above;
  const double tau = 0.5 * (m[0] + m[1]);  // between the heads: one is clipped
  const auto attn = layer("qk_clip", tau);
  CHECK(max_logits(*attn, x) == m);  // same weights, same logits
  const xt::xarray<float> w_q = attn->w_q->weight.value(), w_k = attn->w_k->weight.value();
  attn->after_optimizer_step(true);
  CHECK(attn->step_max_logits == std::vector<float>(kHeads, -INFINITY));  // reset for the next step

  // The clipped head's columns times sqrt(tau / m) each (one float rounding per element).
  const double factor = std::sqrt(tau / m[above]);
  CHECK(xt::allclose(head_columns(attn->w_q->weight, above), factor * head_columns(Tensor(w_q), above), 1e-6, 0.0));
  CHECK(xt::allclose(head_columns(attn->w_k->weight, above), factor * head_columns(Tensor(w_k), above), 1e-6, 0.0));
  CHECK(head_columns(attn->w_q->weight, below) == head_columns(Tensor(w_q), below));  // bit for bit
  CHECK(head_columns(attn->w_k->weight, below) == head_columns(Tensor(w_k), below));
  // Scores are bilinear in W_q and W_k: the clipped head's largest logit is now tau, up to the rounding of the scaled
  // weights and of the GEMM's sum of 8 products (a few float ulps; 1e-5 leaves ample room).
  const std::vector<float> after = max_logits(*attn, x);
  CHECK(after[above] == doctest::Approx(tau).epsilon(1e-5));
  CHECK(after[below] == m[below]);

  // A step without an update (a non-finite gradient) clips nothing, and still starts the next step's count afresh.
  const xt::xarray<float> kept = attn->w_q->weight.value();
  attn->forward(x * 3.0);
  attn->after_optimizer_step(false);
  CHECK(attn->w_q->weight.value() == kept);
  CHECK(attn->step_max_logits[above] == -INFINITY);
}

TEST_CASE("qk_clip under AdamW: after each clip the next step's largest logit is tau, up to what one update moves") {
  // The same input every step and a loss that rewards sharper attention (its gradient grows the scores), so that only
  // the optimizer's update and the clip change the logits. Without the clip (sqrt_dk) they stay past tau.
  const Tensor x = input();
  Generator gen(12);
  const Tensor target(normal_array({2, kT, kDModel}, gen));
  const double lr = 1e-2;
  auto run = [&](const std::string& scale, double tau) {
    const auto attn = layer(scale, tau);
    AdamW opt(attn->parameters(), lr, 0.9, 0.999, 1e-8, 0.0);
    std::vector<std::vector<float>> logits;  // per step, each head's largest logit (sqrt_dk: recorded)
    for (int step = 0; step < 30; ++step) {
      attn->record_attention = true;
      opt.zero_grad();
      xgrad::sum(attn->forward(x) * target).backward();
      const xt::xarray<float>& scores = attn->last.scores.value();
      logits.push_back({xt::amax(xt::view(scores, xt::all(), 0))(), xt::amax(xt::view(scores, xt::all(), 1))()});
      opt.step();
      attn->after_optimizer_step(true);
    }
    return logits;
  };
  const std::vector<std::vector<float>> start = run("sqrt_dk", 100);
  const double tau = 0.5 * std::min(start[0][0], start[0][1]);  // both heads past tau at step 0
  const std::vector<std::vector<float>> clipped = run("qk_clip", tau), free = run("sqrt_dk", tau);
  for (std::size_t step = 1; step < clipped.size(); ++step)
    for (std::size_t h = 0; h < kHeads; ++h) {
      CAPTURE(step);
      CAPTURE(h);
      CHECK(free[step][h] > tau);  // the premise: without the clip the head stays past tau
      // One AdamW step moves each weight by at most about lr (|m / sqrt(v)| <= 1 early on) against weights of about
      // 1 (4 times LeCun's 1/4): the logit by a few percent of itself. 10% bounds it with room.
      CHECK(clipped[step][h] <= 1.10 * tau);
    }
}

namespace {
// The least layer of ScaledAttentionLayer's kind (its forward is not used here).
struct PlainLayer : ScaledAttentionLayer {
  explicit PlainLayer(const AttentionLayerContext& c) : ScaledAttentionLayer(c, "plain_layer") {}
  Tensor forward(const Tensor& x) override { return x; }
};
}  // namespace

TEST_CASE("a layer of its own (ScaledAttentionLayer) refuses qk_clip: only it knows which weights are W_q and W_k") {
  AttentionLayerContext c;
  c.d_model = kDModel;
  c.n_heads = kHeads;
  c.d_k = kDk;
  c.max_seq_len = kT;
  c.scale = "qk_clip";
  CHECK_THROWS_AS(PlainLayer{c}, Error);
  c.scale = "sqrt_dk";
  CHECK_NOTHROW(PlainLayer{c});
}
