// Tests of the code a user adds outside the engine: the custom ops softplus and lerp, and the RMSNorm and
// QKNormAttention layers. Gradients are checked in float64 with xgrad::gradcheck: the ops directly, the attention
// layer through the function template its Module calls (qk_norm_attention<double>), and the float Module is then
// tied to that function by comparing values and gradients on the same weights.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "examples/lerp_op.h"
#include "examples/qk_norm_attention.h"
#include "examples/rms_norm_layer.h"
#include "examples/softplus_op.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "tests/support/op_testing.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_run.h"
#include "train/trainer.h"

using namespace xgrad;
using namespace xgrad::testing;
using examples::lerp;
using examples::softplus;

namespace {

/// Every element within atol + rtol |want|.
bool close(const xt::xarray<double>& got, const xt::xarray<double>& want, double rtol, double atol) {
  return got.shape() == want.shape() && xt::all(xt::abs(got - want) <= atol + rtol * xt::abs(want));
}

}  // namespace

TEST_CASE("softplus: a custom op outside the engine") {
  std::mt19937 gen(5);

  SUBCASE("gradients") {
    CHECK_GRADIENT([](const Inputs& in) { return softplus(in[0]); }, {rand_input({3, 4}, gen, -4, 4)});
    CHECK_GRADIENT([](const Inputs& in) { return softplus(in[0]); }, {rand_input({}, gen)});
    // beta 2, threshold 3: the linear branch starts at x = 1.5; the points straddle it without touching it
    // (at the switch the two branches differ by log1p(e^-3) / 2, a step finite differences must not cross).
    const DTensor x(xt::xarray<double>{{-2.5, -0.7, 0.3}, {1.2, 1.9, 2.8}}, true);
    CHECK_GRADIENT([](const Inputs& in) { return softplus(in[0], 2.0, 3.0); }, {x});
  }
  SUBCASE("values and gradients by hand") {
    const Tensor x(xt::xarray<float>{0.0f, 30.0f, -30.0f, 1.0f}, true);
    const Tensor y = softplus(x);
    CHECK(y.value()(0) == doctest::Approx(std::log(2.0)));
    CHECK(y.value()(1) == 30.0f);  // above the threshold: x itself
    CHECK(y.value()(2) == doctest::Approx(std::exp(-30.0)).epsilon(1e-5));
    CHECK(y.value()(3) == doctest::Approx(std::log1p(std::exp(1.0))));
    sum(y).backward();
    CHECK(x.grad()(0) == doctest::Approx(0.5));
    CHECK(x.grad()(1) == 1.0f);
    CHECK(x.grad()(3) == doctest::Approx(1.0 / (1.0 + std::exp(-1.0))));
    // beta scales the curvature, not the asymptote: softplus(1; beta = 2) = log(1 + e^2) / 2.
    CHECK(softplus(Tensor(xt::xarray<float>{1.0f}), 2.0).value()(0) == doctest::Approx(std::log1p(std::exp(2.0)) / 2));
  }
  SUBCASE("float and double agree; no graph without a gradient") {
    const xt::xarray<double> v = uniform({5}, gen, -5, 5);
    const Tensor f(xt::xarray<float>(v), false);
    CHECK(close(xt::xarray<double>(softplus(f).value()), softplus(DTensor(v)).value(), 1e-6, 1e-7));
    CHECK(softplus(f).is_leaf());  // no input requires a gradient: make_result records nothing
    const Tensor g(xt::xarray<float>(v), true);
    NoGradGuard guard;
    CHECK(softplus(g).is_leaf());
  }
  SUBCASE("errors") {
    const Tensor x(xt::xarray<float>{1.0f, 2.0f});
    CHECK_ERROR_STARTS(softplus(x, 0.0), "softplus:");
    CHECK_ERROR_STARTS(softplus(x, -1.0), "softplus:");
    CHECK_ERROR_STARTS(softplus(x, 1.0, NAN), "softplus:");
  }
}

TEST_CASE("lerp: a custom op with broadcasting inputs") {
  std::mt19937 gen(7);

  SUBCASE("gradients") {
    auto f = [](const Inputs& in) { return lerp(in[0], in[1], in[2]); };
    CHECK_GRADIENT(f, {rand_input({2, 3}, gen), rand_input({3}, gen), rand_input({2, 1}, gen)});
    CHECK_GRADIENT(f, {rand_input({1, 4}, gen), rand_input({3, 1}, gen), rand_input({}, gen)});
    CHECK_GRADIENT(f, {rand_input({2, 2}, gen), rand_input({2, 2}, gen), rand_input({2, 2}, gen)});
  }
  SUBCASE("a constant weight gets no gradient") {
    const DTensor weight(uniform({3}, gen), false);
    CHECK_GRADIENT([&](const Inputs& in) { return lerp(in[0], in[1], weight); },
                   {rand_input({2, 3}, gen), rand_input({2, 3}, gen)});
    const DTensor a = rand_input({2, 3}, gen);
    sum(lerp(a, a, weight)).backward();
    CHECK_FALSE(weight.has_grad());
    // d/da of lerp(a, a, w) = (1 - w) + w = 1, summed from both paths.
    CHECK(close(a.grad(), xt::ones<double>({2, 3}), 0, 1e-12));
  }
  SUBCASE("values") {
    const Tensor y =
        lerp(Tensor(xt::xarray<float>{0, 10}), Tensor(xt::xarray<float>{10, 20}), Tensor(xt::xarray<float>{0.25f}));
    CHECK(close(xt::xarray<double>(y.value()), xt::xarray<double>{2.5, 12.5}, 0, 1e-6));
  }
  SUBCASE("errors") {
    const Tensor a(xt::xarray<float>::from_shape({2, 3})), b(xt::xarray<float>::from_shape({4}));
    CHECK_ERROR_STARTS(lerp(a, b, a), "lerp:");
    CHECK_ERROR_STARTS(lerp(a, a, b), "lerp:");
  }
}

TEST_CASE("RMSNorm: a layer around an engine op") {
  examples::RMSNorm norm(4);
  const auto params = norm.named_parameters();
  REQUIRE(params.size() == 1);
  CHECK(params[0].first == "weight");
  CHECK(params[0].second.shape() == shape_t{4});
  norm.weight.mutable_value() = xt::xarray<float>{1.0f, 2.0f, 0.5f, -1.0f};
  const Tensor x(xt::xarray<float>{{1, 2, 3, 4}, {-1, 0, 2, 0.5f}});
  const Tensor y = norm.forward(x);
  CHECK(close(xt::xarray<double>(y.value()), xt::xarray<double>(rms_norm(x, norm.weight, 1e-6).value()), 0, 0));
  sum(y).backward();
  CHECK(norm.weight.has_grad());
  CHECK_ERROR_STARTS(norm.forward(Tensor(xt::xarray<float>::from_shape({2, 3}))), "rms_norm:");
}

namespace {

// The seven inputs of qk_norm_attention: x, w_q, w_k, w_v, w_o, q_norm_weight, k_norm_weight.
Inputs qk_norm_inputs(std::mt19937& gen, std::size_t B, std::size_t T, std::size_t D, std::size_t H) {
  const std::size_t d_k = D / H;
  return Inputs{rand_input({B, T, D}, gen),      rand_input({D, D}, gen), rand_input({D, D}, gen),
                rand_input({D, D}, gen),         rand_input({D, D}, gen), rand_input({d_k}, gen, 0.5, 1.5),
                rand_input({d_k}, gen, 0.5, 1.5)};
}

// qk_norm_attention with n_heads H as a function of its seven inputs.
std::function<DTensor(const Inputs&)> qk_norm_layer(std::size_t H, bool causal) {
  return [H, causal](const Inputs& in) {
    return examples::qk_norm_attention(in[0], in[1], in[2], in[3], in[4], in[5], in[6], H, causal);
  };
}

}  // namespace

TEST_CASE("QKNormAttention: gradients of the layer's function in double") {
  std::mt19937 gen(11);
  CHECK_GRADIENT(qk_norm_layer(2, true), qk_norm_inputs(gen, 2, 3, 4, 2));
  CHECK_GRADIENT(qk_norm_layer(2, false), qk_norm_inputs(gen, 1, 4, 4, 2));
  CHECK_GRADIENT(qk_norm_layer(1, true), qk_norm_inputs(gen, 2, 2, 3, 1));
  CHECK_GRADIENT(qk_norm_layer(3, true), qk_norm_inputs(gen, 1, 1, 6, 3));  // T = 1: every query sees only itself
}

TEST_CASE("QKNormAttention: the float Module computes the checked function") {
  std::mt19937 gen(11);
  Generator init(3);
  examples::QKNormAttention attn(8, 2, /*causal=*/true, init);
  std::vector<std::string> names;
  for (const auto& [name, p] : attn.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"w_q.weight", "w_k.weight", "w_v.weight", "w_o.weight", "q_norm.weight",
                                          "k_norm.weight"});
  // Norm gains away from their init of 1, so a gain the Module failed to pass on would show. (Swapping the
  // two would not: the scores depend on the gains only through their elementwise product.)
  attn.q_norm->weight.mutable_value() = xt::xarray<float>(uniform({4}, gen, 0.5, 1.5));
  attn.k_norm->weight.mutable_value() = xt::xarray<float>(uniform({4}, gen, 0.5, 1.5));

  const Tensor x(xt::xarray<float>(uniform({2, 5, 8}, gen)), true);
  const xt::xarray<double> W = uniform({2, 5, 8}, gen);
  const Tensor y = attn.forward(x);
  sum(y * Tensor(xt::xarray<float>(W))).backward();

  // parameters() is in registration order, which is the function's argument order after x.
  Inputs d{to_double(x)};
  for (const auto& p : attn.parameters()) d.push_back(to_double(p));
  const DTensor yd = qk_norm_layer(2, true)(d);
  sum(yd * DTensor(W)).backward();
  // float32 against float64 on the same weights: float rounding only (values are O(1), a few ops deep).
  CHECK(close(xt::xarray<double>(y.value()), yd.value(), 1e-4, 1e-5));
  CHECK(close(xt::xarray<double>(x.grad()), d[0].grad(), 1e-4, 1e-5));
  const auto params = attn.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    CAPTURE(i);
    CHECK(close(xt::xarray<double>(params[i].grad()), d[i + 1].grad(), 1e-4, 1e-5));
  }
}

TEST_CASE("QKNormAttention: QK-norm: scaling the input scales the output and leaves the attention pattern alone") {
  std::mt19937 gen(11);
  // q and k are normalised, so the scores do not grow with x; v does, linearly, and so does the output. Plain
  // attention would instead sharpen its softmax as x grows.
  Generator init(4);
  examples::QKNormAttention attn(6, 3, /*causal=*/true, init);
  const Tensor x(xt::xarray<float>(uniform({2, 4, 6}, gen)));
  const xt::xarray<double> y = attn.forward(x).value();
  const xt::xarray<double> y_big = attn.forward(x * 1000.0).value();
  CHECK(close(y_big, 1000.0 * y, 1e-4, 1e-3));
}

TEST_CASE("QKNormAttention: causal: a position does not see later ones") {
  std::mt19937 gen(11);
  Generator init(5);
  examples::QKNormAttention attn(4, 2, /*causal=*/true, init);
  xt::xarray<float> v = xt::xarray<float>(uniform({1, 3, 4}, gen));
  const xt::xarray<float> before = attn.forward(Tensor(v)).value();
  xt::view(v, 0, 2, xt::all()) += 5.0f;  // change the last position only
  const xt::xarray<float> after = attn.forward(Tensor(v)).value();
  CHECK(xt::xarray<float>(xt::view(after, 0, xt::range(0, 2), xt::all())) ==
        xt::xarray<float>(xt::view(before, 0, xt::range(0, 2), xt::all())));
  CHECK(xt::xarray<float>(xt::view(after, 0, 2, xt::all())) != xt::xarray<float>(xt::view(before, 0, 2, xt::all())));
}

TEST_CASE("QKNormAttention: trains with an engine optimizer") {
  std::mt19937 gen(11);
  Generator init(6);
  examples::QKNormAttention attn(8, 2, /*causal=*/false, init);
  const Tensor x(xt::xarray<float>(uniform({4, 3, 8}, gen)));
  const Tensor target(xt::xarray<float>(uniform({4, 3, 8}, gen)));
  nn::AdamW opt(attn.parameters(), 1e-2);
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    opt.zero_grad();
    const Tensor diff = attn.forward(x) - target;
    const Tensor loss = mean(diff * diff);
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item();
  }
  CHECK(last < 0.8 * first);
}

TEST_CASE("QKNormAttention: errors") {
  std::mt19937 gen(11);
  Generator init(7);
  CHECK_ERROR_STARTS(examples::QKNormAttention(6, 4, true, init), "QKNormAttention:");
  CHECK_ERROR_STARTS(examples::QKNormAttention(0, 1, true, init), "QKNormAttention:");
  examples::QKNormAttention attn(4, 2, true, init);
  CHECK_ERROR_STARTS(attn.forward(Tensor(xt::xarray<float>::from_shape({1, 3, 6}))), "qk_norm_attention:");
  CHECK_ERROR_STARTS(attn.forward(Tensor(xt::xarray<float>::from_shape({3, 4}))), "qk_norm_attention:");
  Inputs in = qk_norm_inputs(gen, 1, 2, 4, 2);
  in[5] = rand_input({4}, gen);  // a norm weight of d_model instead of d_k
  CHECK_ERROR_STARTS(qk_norm_layer(2, true)(in), "qk_norm_attention:");
  CHECK_ERROR_STARTS(qk_norm_layer(3, true)(qk_norm_inputs(gen, 1, 2, 4, 2)), "qk_norm_attention:");
}

TEST_CASE("QKNormAttention is the registered attention layer qk_norm: a model builds it, the trainer trains it") {
  const auto& layers = Registry<nn::AttentionLayerEntry>::instance();
  REQUIRE(layers.find("qk_norm") != nullptr);
  nn::ModelConfig mc;
  mc.vocab_size = 11;
  mc.max_seq_len = 5;
  mc.d_model = 8;
  mc.n_heads = 2;
  mc.attention = "qk_norm";
  nn::AttentionModel model(mc, 1);
  REQUIRE(model.attention_layers().size() == 1);
  CHECK(dynamic_cast<examples::QKNormAttention*>(model.attention_layers()[0].get()) != nullptr);
  // Its attention weights go through the layer's attn_dropout: with only that site dropping, the logits change.
  index_array tokens = index_array::from_shape({2, 5});
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens.data()[i] = static_cast<std::int64_t>(i % 11);
  const xt::xarray<float> plain = model.forward(tokens).value();
  model.attention_layers()[0]->attn_dropout->p = 0.5;
  model.attention_layers()[0]->attn_dropout->generator = std::make_shared<Generator>(2);
  CHECK(model.forward(tokens).value() != plain);
  model.eval();
  CHECK(model.forward(tokens).value() == plain);
  mc.scale = "none";
  CHECK_ERROR_STARTS(nn::AttentionModel(mc, 1), "--attention qk_norm scales its scores by 1/sqrt(d_k) itself");

  // A short kv_recall run: it learns, and the saturation statistics come from its recorded scores.
  const testing::TempDir dir("examples_qk_norm");
  train::TrainConfig c = testing::tiny_run(dir.string(), 200);
  c.model.attention = "qk_norm";
  c.model.d_model = 32;
  const train::RunSummary s = train::train(c);
  CHECK(s.final_loss < 0.85 * s.chance_loss);
  std::ifstream in(dir / "metrics.csv");
  std::string header, first_row;
  std::getline(in, header);
  std::getline(in, first_row);
  std::vector<std::string> names, values;
  for (std::stringstream h(header); std::getline(h, names.emplace_back(), ',');) {
  }
  for (std::stringstream r(first_row); std::getline(r, values.emplace_back(), ',');) {
  }
  std::size_t attention_columns = 0;
  for (std::size_t i = 0; i < names.size() && i < values.size(); ++i)
    if (names[i].rfind("attn/l0h0/", 0) == 0) {
      ++attention_columns;
      INFO(names[i] << " = " << values[i]);
      // qk_spectral_norm comes from AttentionLayer::qk_spectral_norms, which this layer leaves at its default
      // (empty: nan): it normalises q and k, so the weights' spectral norm would bound no score.
      if (names[i] == "attn/l0h0/qk_spectral_norm")
        CHECK(std::isnan(std::stod(values[i])));
      else
        CHECK(std::isfinite(std::stod(values[i])));
    }
  CHECK(attention_columns > 0);
}
