// Every registered attention scaling (nn/scaling.h), iterated from the registry so a scaling added in its own file is
// checked with no edit here: a float64 gradcheck of the composed attention through its hooks (its parameters
// included), the fused attention equal to the composed reference (values and gradients, causal and not), and a short
// kv_recall run that learns. Facts particular to one scaling (its formula, its settings) follow.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <xtensor/xmanipulation.hpp>
#include <xtensor/xstrided_view.hpp>

#include "autograd/gradcheck.h"
#include "nn/attention.h"
#include "nn/attention_stats.h"
#include "nn/checkpoint.h"
#include "nn/constant_scaling.h"
#include "nn/model.h"
#include "tests/support/biased_scaling.h"
#include "tests/support/earlier_metrics.h"
#include "tests/support/op_testing.h"
#include "tests/support/run_files.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_run.h"
#include "train/trainer.h"

using namespace xgrad;
using namespace xgrad::nn;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> registered_scalings() { return Registry<ScalingEntry>::instance().names(); }

xt::xarray<float> normal_array(const shape_t& shape, Generator& gen, double std = 1.0) {
  xt::xarray<float> a = xt::xarray<float>::from_shape(shape);
  for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<float>(std * gen.normal());
  return a;
}

using testing::relative_difference;

// A layer of 2 heads of d_k 3 on d_model 6 over sequences of 5, in eval mode (no state advances between calls).
struct Layer {
  Generator gen{11};
  MultiHeadAttention attn;
  Layer(const std::string& scale, bool causal, const SettingValues& settings = SettingValues())
      : attn(6, 2, scale, causal, gen, /*max_seq_len=*/5, /*init_gain=*/1.0, /*d_k=*/3, settings) {
    attn.eval();
  }
};

// Runs a loss through `forward`, returns the loss's gradients of x and of every parameter (named order).
std::vector<xt::xarray<float>> gradients(MultiHeadAttention& attn, const Tensor& x, const xt::xarray<float>& weights,
                                         Tensor (MultiHeadAttention::*forward)(const Tensor&),
                                         xt::xarray<float>& output) {
  x.zero_grad();
  attn.zero_grad();
  Tensor y = (attn.*forward)(x);
  output = y.value();
  sum(y * Tensor(weights)).backward();
  std::vector<xt::xarray<float>> out{x.grad()};
  for (const auto& name_p_entry : attn.named_parameters()) {
    const auto& name = std::get<0>(name_p_entry);
    const auto& p = std::get<1>(name_p_entry);
    INFO("parameter " << name);
    REQUIRE(p.has_grad());
    out.push_back(p.grad());
  }
  return out;
}

}  // namespace

TEST_CASE(
    "constant_scaling: the entry's layers multiply every score by multiplier(context), with its settings and style") {
  const ScalingEntry e = constant_scaling(
      "test_half_power", "scores = q·k / d_k^p", 5,
      [](const ScalingContext& c) { return std::pow(static_cast<double>(c.d_k), -c.settings.get<double>("test_p")); },
      {"#123456", "dotted"}, {number_setting("test_p", 0.5, 0.0, 2.0, "the exponent")});
  CHECK(e.name == "test_half_power");
  CHECK(e.order == 5);
  CHECK(e.colour == "#123456");
  CHECK(e.dash == "dotted");
  CHECK(!e.is_reference);
  REQUIRE(e.settings.size() == 1);
  ScalingContext c;
  c.d_k = 16;
  c.settings = resolve_settings(e.settings, nlohmann::json::object());
  const auto scaling = e.build(c);
  CHECK(scaling->multiplier() == doctest::Approx(0.25));  // 16^-0.5
  CHECK(scaling->parameters().empty());                   // nothing learned: a constant has no parameters
  // The three built-in constant scalings are such entries: 1, 1/sqrt(d_k) and 1/d_k at d_k = 64.
  CHECK(make_scaling("none", 1, 64, 8, true)->multiplier() == doctest::Approx(1.0));
  CHECK(make_scaling("sqrt_dk", 1, 64, 8, true)->multiplier() == doctest::Approx(0.125));
  CHECK(make_scaling("dk", 1, 64, 8, true)->multiplier() == doctest::Approx(1.0 / 64));
  // A multiplier that is not a finite number > 0 is refused naming the entry, not used to train.
  const ScalingEntry bad =
      constant_scaling("test_zero", "scores = 0", 6, [](const ScalingContext&) { return 0.0; }, {"#654321", "solid"});
  CHECK_THROWS_WITH_AS(bad.build(c), doctest::Contains("scaling test_zero: its multiplier for d_k = 16 is 0"),
                       std::invalid_argument);
}

TEST_CASE("the registry holds the built-in scalings, each with a description, a colour and a build function") {
  const auto names = registered_scalings();
  for (const char* name :
       {"none", "sqrt_dk", "dk", "qk_layernorm", "qk_norm", "learned", "softcap", "ssmax", "sigma_reparam"})
    CHECK(std::find(names.begin(), names.end(), name) != names.end());
  REQUIRE(reference_scaling() != nullptr);
  CHECK(reference_scaling()->name == "none");
  for (const ScalingEntry* e : Registry<ScalingEntry>::instance().entries()) {
    INFO("scaling " << e->name);
    CHECK(!e->description.empty());
    CHECK(e->build);
    CHECK(e->colour.size() == 7);
    CHECK(e->colour[0] == '#');
    const auto& dashes = scaling_dash_styles();
    CHECK(std::find(dashes.begin(), dashes.end(), e->dash) != dashes.end());
  }
}

namespace {

// An entry of `name` multiplying scores by 1, drawn in `style`.
ScalingEntry unit_scaling(const std::string& name, PlotStyle style) {
  return constant_scaling(
      name, "scores = q·k (a test's own)", 900, [](const ScalingContext&) { return 1.0; }, std::move(style));
}

}  // namespace

TEST_CASE("a scaling's declared style is checked when it registers: a dash style it names, a colour #RRGGBB") {
  Registry<ScalingEntry>& registry = Registry<ScalingEntry>::instance();
  const std::size_t before = registry.entries().size();
  CHECK_THROWS_AS(registry.add(unit_scaling("test_dotdash", {"#123456", "dotdash"})), RegistryError);
  try {
    registry.add(unit_scaling("test_dotdash", {"#123456", "dotdash"}));
  } catch (const RegistryError& e) {
    const std::string message = e.what();
    for (const std::string& dash : scaling_dash_styles()) CHECK(message.find(dash) != std::string::npos);
  }
  for (const char* colour : {"red", "#12345", "#1234567", "#12345G", "123456#"}) {
    CAPTURE(colour);
    CHECK_THROWS_AS(registry.add(unit_scaling("test_bad_colour", {colour, "dotted"})), RegistryError);
  }
  CHECK(registry.find("test_dotdash") == nullptr);
  CHECK(registry.find("test_bad_colour") == nullptr);
  CHECK(registry.entries().size() == before);
  // Through a Registration, as a user's file registers: recorded, so the executable exits 2 naming it at start-up.
  const std::size_t errors = registration_errors().size();
  const Registration<ScalingEntry> refused{unit_scaling("test_dotdash", {"#123456", "dotdash"})};
  REQUIRE(registration_errors().size() == errors + 1);
  CHECK(registration_errors().back().find("test_dotdash") != std::string::npos);
  registration_errors().pop_back();
  CHECK(registry.find("test_dotdash") == nullptr);
}

TEST_CASE("scalings that declare no style get a colour and dash no other registered entry has, deterministically") {
  // A registry of its own holding copies of the program's entries (the built-in scalings), then two without a style.
  auto with_two_unstyled = [] {
    auto registry = std::make_unique<Registry<ScalingEntry>>();
    for (const ScalingEntry* e : Registry<ScalingEntry>::instance().entries()) registry->add(*e);
    registry->add(unit_scaling("test_unstyled_a", {}));
    registry->add(unit_scaling("test_unstyled_b", {}));
    return registry;
  };
  const auto registry = with_two_unstyled();
  std::set<std::pair<std::string, std::string>> styles;
  std::set<std::string> builtin_colours;
  for (const ScalingEntry* e : registry->entries()) {
    styles.insert({e->colour, e->dash});
    if (e->name.rfind("test_unstyled", 0) != 0) builtin_colours.insert(e->colour);
  }
  CHECK(styles.size() == registry->entries().size());  // every (colour, dash) its own
  const auto& dashes = scaling_dash_styles();
  for (const char* name : {"test_unstyled_a", "test_unstyled_b"}) {
    CAPTURE(name);
    const ScalingEntry& e = registry->at(name);
    CHECK(e.colour.size() == 7);
    CHECK(e.colour[0] == '#');
    CHECK(std::find(dashes.begin(), dashes.end(), e.dash) != dashes.end());
    CHECK(builtin_colours.count(e.colour) == 0);  // not even a built-in's colour with another dash
    CHECK(with_two_unstyled()->at(name).colour == e.colour);
    CHECK(with_two_unstyled()->at(name).dash == e.dash);
  }
  CHECK(registry->at("test_unstyled_a").colour != registry->at("test_unstyled_b").colour);
  // A colour without a dash is drawn solid, as before.
  Registry<ScalingEntry> own;
  own.add(unit_scaling("test_colour_only", {"#123456", ""}));
  CHECK(own.at("test_colour_only").dash == "solid");
}

TEST_CASE("a declared style that an entry registered earlier was given moves that entry: link order makes no clash") {
  Registry<ScalingEntry> auto_first, declared_first;
  auto_first.add(unit_scaling("test_auto", {}));
  const PlotStyle given{auto_first.at("test_auto").colour, auto_first.at("test_auto").dash};
  auto_first.add(unit_scaling("test_declared", given));
  declared_first.add(unit_scaling("test_declared", given));
  declared_first.add(unit_scaling("test_auto", {}));
  for (const Registry<ScalingEntry>* registry : {&auto_first, &declared_first}) {
    const ScalingEntry &declared = registry->at("test_declared"), &chosen = registry->at("test_auto");
    CHECK(declared.colour == given.colour);
    CHECK(declared.dash == given.dash);
    CHECK_FALSE((chosen.colour == given.colour && chosen.dash == given.dash));
  }
  // Either order ends in the same styles.
  CHECK(auto_first.at("test_auto").colour == declared_first.at("test_auto").colour);
  CHECK(auto_first.at("test_auto").dash == declared_first.at("test_auto").dash);
  // A dash the moved entry declared is kept; only its colour is chosen again.
  Registry<ScalingEntry> dashed;
  dashed.add(unit_scaling("test_dotted", {"", "dotted"}));
  const std::string first_colour = dashed.at("test_dotted").colour;
  dashed.add(unit_scaling("test_takes_it", {first_colour, "dotted"}));
  CHECK(dashed.at("test_dotted").dash == "dotted");
  CHECK(dashed.at("test_dotted").colour != first_colour);
}

TEST_CASE("every scaling: float64 gradcheck of the attention through its hooks, parameters included") {
  for (const std::string& name : registered_scalings())
    for (bool causal : {true, false}) {
      INFO("scaling " << name << (causal ? ", causal" : ", not causal"));
      Layer layer(name, causal);
      MultiHeadAttention& attn = layer.attn;
      Generator gen(5);
      std::vector<DTensor> inputs{testing::to_double(Tensor(normal_array({2, 5, 6}, gen))),
                                  testing::to_double(attn.w_q->weight), testing::to_double(attn.w_k->weight),
                                  testing::to_double(attn.w_v->weight), testing::to_double(attn.w_o->weight)};
      const std::size_t first_param = inputs.size();
      for (const Tensor& p : attn.scaling->parameters()) inputs.push_back(testing::to_double(p));
      auto f = [&](const std::vector<DTensor>& in) {
        const std::vector<DTensor> params(in.begin() + static_cast<long>(first_param), in.end());
        return multi_head_attention_reference(in[0], in[1], in[2], in[3], in[4], *attn.scaling, params, 2, causal);
      };
      const GradcheckResult r = gradcheck(f, inputs);
      CHECK_MESSAGE(r.ok, r.message);
    }
}

TEST_CASE("every scaling: the fused attention equals the composed reference, values and gradients") {
  for (const std::string& name : registered_scalings())
    for (bool causal : {true, false})
      for (bool record : {false, true}) {
        INFO("scaling " << name << (causal ? ", causal" : ", not causal") << (record ? ", recording" : ""));
        Layer layer(name, causal);
        MultiHeadAttention& attn = layer.attn;
        attn.record_attention = record;
        Generator gen(9);
        Tensor x(normal_array({2, 5, 6}, gen));
        x.set_requires_grad(true);
        const xt::xarray<float> weights = normal_array({2, 5, 6}, gen);
        xt::xarray<float> fused_out, reference_out;
        const auto fused = gradients(attn, x, weights, &MultiHeadAttention::forward, fused_out);
        const auto reference = gradients(attn, x, weights, &MultiHeadAttention::forward_reference, reference_out);
        CHECK(relative_difference(fused_out, reference_out) < 1e-5);
        REQUIRE(fused.size() == reference.size());
        for (std::size_t i = 0; i < fused.size(); ++i) {
          INFO("gradient " << i << " (0: x, then named_parameters order)");
          CHECK(relative_difference(fused[i], reference[i]) < 1e-5);
        }
      }
}

TEST_CASE("the recorded q and k are the projections' heads, on the packed path as on three tensors") {
  // sqrt_dk computes q, k, v in one GEMM (x @ [W_q | W_k | W_v]); qk_norm (which transforms q and k) in three.
  Layer layer("sqrt_dk", true);
  MultiHeadAttention& attn = layer.attn;
  attn.record_attention = true;
  Generator gen(3);
  const Tensor x(normal_array({2, 5, 6}, gen));
  attn.forward(x);
  // [B, T, H d_k] → [B, H, T, d_k]
  auto heads = [](const Tensor& t) {
    return xt::xarray<float>(xt::transpose(xt::reshape_view(t.value(), {2, 5, 2, 3}), {0, 2, 1, 3}));
  };
  // The same dot products of 6 terms, in one [6, 18] GEMM or three [6, 6] ones: at most 6 roundings apart (3.6e-7).
  CHECK(relative_difference(attn.last.q, heads(matmul(x, attn.w_q->weight))) < 1e-6);
  CHECK(relative_difference(attn.last.k, heads(matmul(x, attn.w_k->weight))) < 1e-6);
}

TEST_CASE("every scaling trains kv_recall below chance in a short run") {
  for (const std::string& name : registered_scalings()) {
    INFO("scaling " << name);
    const testing::TempDir dir("scalings_" + name);
    train::TrainConfig c = testing::tiny_run(dir.string(), 200);
    c.model.d_model = 32;
    c.model.scale = name;
    const train::RunSummary s = train::train(c);
    CHECK(!s.diverged);
    CHECK(s.final_loss < 0.85 * s.chance_loss);
  }
}

TEST_CASE("scaled_dot_product_attention with a score bias: float64 gradcheck of q, k, v and the bias") {
  Generator gen(3);
  const auto normal = [&](const shape_t& shape) { return testing::to_double(Tensor(normal_array(shape, gen))); };
  const xt::xarray<bool> mask = causal_mask(4);
  // q, k, v: [B 2, H 3, T 4, d_k 2]; the bias [H, T, T] broadcasts over the batch.
  const std::vector<DTensor> inputs{normal({2, 3, 4, 2}), normal({2, 3, 4, 2}), normal({2, 3, 4, 2}),
                                    normal({3, 4, 4})};
  for (const xt::xarray<bool>* m : {&mask, static_cast<const xt::xarray<bool>*>(nullptr)}) {
    const char* masking = m ? "causal" : "no mask";
    INFO(masking);
    auto f = [&](const std::vector<DTensor>& in) {
      return scaled_dot_product_attention(in[0], in[1], in[2], m, 0.7, in[3]);
    };
    const GradcheckResult r = gradcheck(f, inputs);
    CHECK_MESSAGE(r.ok, r.message);
  }
}

TEST_CASE(
    "scaled_dot_product_attention: a bias of -1e30 above the diagonal is the causal mask; a bias of another "
    "shape is refused") {
  Generator gen(4);
  const Tensor q(normal_array({1, 2, 5, 3}, gen)), k(normal_array({1, 2, 5, 3}, gen)),
      v(normal_array({1, 2, 5, 3}, gen));
  const xt::xarray<bool> mask = causal_mask(5);
  xt::xarray<float> bias = xt::zeros<float>({5, 5});
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = i + 1; j < 5; ++j) bias(i, j) = -1e30f;
  const Tensor masked = scaled_dot_product_attention(q, k, v, &mask, 0.5);
  const Tensor biased = scaled_dot_product_attention(q, k, v, nullptr, 0.5, Tensor(bias));
  // exp(-1e30 - max) is exactly 0 in float, so the two softmaxes see the same terms: equal to float rounding.
  CHECK(relative_difference(biased.value(), masked.value()) < 1e-6);
  CHECK_THROWS_AS(
      scaled_dot_product_attention(q, k, v, nullptr, 0.5, Tensor(xt::xarray<float>(xt::zeros<float>({3, 5, 5})))),
      Error);
}

TEST_CASE("the fused attention refuses a scaling whose score bias is not [n_heads, T, T], naming the shapes") {
  struct WrongBias : public ConstantScaling {
    WrongBias() : ConstantScaling(1.0) {}
    bool adds_score_bias() const override { return true; }
    xt::xarray<float> score_bias(std::size_t T) const override { return xt::zeros<float>({T, T}); }
  };
  Generator gen(6);
  MultiHeadAttention attn(6, 2, "sqrt_dk", true, gen, 5);
  attn.scaling = std::make_shared<WrongBias>();
  CHECK_THROWS_WITH_AS(attn.forward(Tensor(normal_array({1, 5, 6}, gen))),
                       doctest::Contains("score bias must be [n_heads, T, T] = [2, 5, 5], got [5, 5]"), Error);
}

TEST_CASE("a scaling's learned scalars are metrics.csv columns: learned's qk_gain, ssmax's s per head, none else") {
  struct Expected {
    std::string scale, parameter;
    std::size_t per_layer;  // elements: one gain, or one s per head
  };
  for (const Expected& e :
       {Expected{"learned", "qk_gain", 1}, Expected{"ssmax", "ssmax_s", 2}, Expected{"sqrt_dk", "", 0}}) {
    INFO("scale " << e.scale);
    const testing::TempDir dir("scalars_" + e.scale);
    train::TrainConfig c = testing::tiny_run(dir.string(), 30);
    c.model.scale = e.scale;
    c.model.n_heads = 2;
    c.lr = 0.05;  // large enough that the scalars move visibly in 30 steps
    train::train(c);
    const testing::TableShape table = testing::table_shape(dir.path() / "metrics.csv");
    const auto rows = testing::metrics_without_timing(dir.path());
    const std::vector<std::string> header = testing::csv_cells(rows.at(0));
    std::vector<std::string> scalars;
    for (const auto& name : header)
      if (name.rfind("scalar/", 0) == 0) scalars.push_back(name);
    std::vector<std::string> expected;
    for (std::size_t l = 0; l < c.model.n_layers; ++l)
      for (std::size_t i = 0; i < e.per_layer; ++i)
        expected.push_back("scalar/blocks." + std::to_string(l) + ".attn." + e.parameter +
                           (e.per_layer == 1 ? "" : "/" + std::to_string(i)));
    CHECK(scalars == expected);
    CHECK(table.rows_of_header_width == 30);
    if (scalars.empty()) continue;
    // The first row holds the value after one step, near its init (log2(T^2 - T) > 2 for learned, 1/log(T) < 1 for
    // ssmax at the task's T >= 3); later rows have moved.
    const auto column = static_cast<std::size_t>(std::find(header.begin(), header.end(), scalars[0]) - header.begin());
    const double first = std::stod(testing::csv_cells(rows[1])[column]);
    const double last = std::stod(testing::csv_cells(rows.back())[column]);
    CHECK(std::isfinite(first));
    CHECK((e.scale == "learned" ? first > 2.0 : (first > 0.0 && first < 1.0)));
    CHECK(last != first);
  }
}

TEST_CASE("a run of learned whose metrics.csv has no scalar columns (an earlier release) resumes without them") {
  const testing::TempDir dir("scalars_resume");
  train::TrainConfig c = testing::tiny_run(dir.string(), 16);
  c.model.scale = "learned";
  c.checkpoint_every = 8;
  train::train(c);
  const fs::path csv = dir.path() / "metrics.csv";
  // The release before the scalars wrote neither them nor the columns added after them (max_logit, one per head).
  const auto [old_header, dropped] = testing::drop_columns(csv, [](const std::string& name) {
    return name.rfind("scalar/", 0) == 0 || name.find("/max_logit") != std::string::npos;
  });
  REQUIRE(dropped == 2 * c.model.n_layers);
  train::TrainConfig more = c;
  more.steps = 24;
  more.resume = true;
  train::train(more);
  const testing::TableShape table = testing::table_shape(csv);
  CHECK(table.header == old_header);
  CHECK(table.rows == 24);
  CHECK(table.rows_of_header_width == 24);
}

TEST_CASE("softcap: scores = c tanh(q.k / (sqrt(d_k) c)), c from the setting softcap_cap") {
  SettingValues settings;
  settings.set("softcap_cap", 2.0);
  const auto scaling = make_scaling("softcap", 1, 4, 8, true, settings);
  CHECK(scaling->multiplier() == doctest::Approx(0.5));
  const std::vector<float> z{-30.0f, -1.0f, 0.0f, 0.5f, 7.0f};
  std::vector<float> s(z.size()), grad(z.size(), 1.0f);
  scaling->transform_scores(z.data(), s.data(), z.size());
  scaling->transform_scores_backward(z.data(), grad.data(), z.size());
  for (std::size_t i = 0; i < z.size(); ++i) {
    CHECK(s[i] == doctest::Approx(2.0 * std::tanh(z[i] / 2.0)));
    CHECK(std::abs(s[i]) <= 2.0f);
    const double t = std::tanh(z[i] / 2.0);
    CHECK(grad[i] == doctest::Approx(1.0 - t * t));
  }
  // The default cap is Gemma 2's 50: the transform is near the identity at init-sized scores.
  const auto by_default = make_scaling("softcap", 1, 4, 8, true);
  float one = 1.0f;
  by_default->transform_scores(&one, &one, 1);
  CHECK(one == doctest::Approx(50.0 * std::tanh(1.0 / 50.0)));
  // A cap small enough to bend the scores: the fused op and the gradcheck see the tanh.
  for (bool causal : {true, false}) {
    Layer layer("softcap", causal, settings);
    Generator gen(3);
    Tensor x(normal_array({2, 5, 6}, gen, 4.0));
    x.set_requires_grad(true);
    const xt::xarray<float> weights = normal_array({2, 5, 6}, gen);
    xt::xarray<float> fused_out, reference_out;
    const auto fused = gradients(layer.attn, x, weights, &MultiHeadAttention::forward, fused_out);
    const auto reference = gradients(layer.attn, x, weights, &MultiHeadAttention::forward_reference, reference_out);
    CHECK(relative_difference(fused_out, reference_out) < 1e-5);
    for (std::size_t i = 0; i < fused.size(); ++i) CHECK(relative_difference(fused[i], reference[i]) < 1e-5);
  }
}

TEST_CASE("ssmax: row multipliers log(n), n = keys the query may attend to; s per head starts at 1/log(T)") {
  const auto causal = make_scaling("ssmax", 2, 4, 8, true);
  const auto full = make_scaling("ssmax", 2, 4, 8, false);
  const std::vector<float> rows = causal->row_multipliers(4);
  REQUIRE(rows.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) CHECK(rows[i] == doctest::Approx(std::log(static_cast<double>(i + 1))));
  for (float r : full->row_multipliers(4)) CHECK(r == doctest::Approx(std::log(4.0)));
  const auto params = causal->named_parameters();
  REQUIRE(params.size() == 1);
  CHECK(params[0].first == "ssmax_s");
  CHECK(params[0].second.shape() == shape_t{2});
  for (std::size_t h = 0; h < 2; ++h) CHECK(params[0].second.value()(h) == doctest::Approx(1.0 / std::log(8.0)));
  // s rides on q, so the multiplier of the recorded q·k is log(T) / sqrt(d_k); with s = 1/log(T) folded back in, the
  // scores at the full length start as sqrt_dk's.
  CHECK(full->effective_multiplier(8) == doctest::Approx(std::log(8.0) / 2.0));
}

TEST_CASE("scalings with parameters keep the names they had as attention members") {
  Generator gen(1);
  auto names_of = [&](const std::string& scale) {
    std::vector<std::string> out;
    for (const auto& [name, p] : MultiHeadAttention(8, 2, scale, true, gen).named_parameters()) out.push_back(name);
    return out;
  };
  CHECK(names_of("learned") ==
        std::vector<std::string>{"w_q.weight", "w_k.weight", "w_v.weight", "w_o.weight", "qk_gain"});
  CHECK(names_of("qk_layernorm") == std::vector<std::string>{"w_q.weight", "w_k.weight", "w_v.weight", "w_o.weight",
                                                             "q_norm.weight", "q_norm.bias", "k_norm.weight",
                                                             "k_norm.bias"});
}

namespace {

// [n, n] rotation by `angle` in the plane of axes a and b.
xt::xarray<float> givens(std::size_t n, std::size_t a, std::size_t b, double angle) {
  xt::xarray<float> g = xt::eye<float>(n);
  g(a, a) = g(b, b) = static_cast<float>(std::cos(angle));
  g(a, b) = static_cast<float>(-std::sin(angle));
  g(b, a) = static_cast<float>(std::sin(angle));
  return g;
}

// A [6, 6] matrix with singular values `s` (rotations on both sides of diag(s)), built in double.
xt::xarray<float> with_singular_values(const std::vector<double>& s) {
  xt::xarray<double> m = xt::zeros<double>({6, 6});
  for (std::size_t i = 0; i < 6; ++i) m(i, i) = s[i];
  auto rotate = [](const xt::xarray<double>& x, const xt::xarray<float>& r, bool left) {
    xt::xarray<double> rd = xt::cast<double>(r), out = xt::zeros<double>({6, 6});
    for (std::size_t i = 0; i < 6; ++i)
      for (std::size_t j = 0; j < 6; ++j)
        for (std::size_t k = 0; k < 6; ++k) out(i, j) += left ? rd(i, k) * x(k, j) : x(i, k) * rd(k, j);
    return out;
  };
  m = rotate(rotate(rotate(m, givens(6, 0, 3, 0.7), true), givens(6, 1, 4, -1.1), true), givens(6, 0, 5, 0.4), false);
  m = rotate(rotate(m, givens(6, 2, 0, 2.3), false), givens(6, 3, 1, 0.9), true);
  return xt::cast<float>(m);
}

double frobenius(const xt::xarray<double>& x) {
  double s = 0;
  for (double e : x) s += e * e;
  return std::sqrt(s);
}

// sigma(W) as sigma_reparam uses it: W / W' with the gains set to 1 (W' = W / sigma).
double sigma_of(const AttentionScaling& scaling, const xt::xarray<float>& w) {
  const DTensor wd(xt::xarray<double>(xt::cast<double>(w)));
  const std::vector<DTensor> unit_gains{DTensor(xt::xarray<double>{1.0}), DTensor(xt::xarray<double>{1.0})};
  const auto reparametrised = scaling.transform_weights(wd, wd, unit_gains);
  return frobenius(wd.value()) / frobenius(reparametrised.first.value());
}

Tensor tensor_of(const xt::xarray<float>& a) { return Tensor(xt::xarray<float>(a)); }

}  // namespace

TEST_CASE("sigma_reparam: sigma is the largest singular value; gamma starts at it, so W' = W at init") {
  const std::vector<double> s_q{3.0, 2.0, 1.0, 0.5, 0.2, 0.1}, s_k{0.9, 0.8, 0.3, 0.3, 0.2, 0.05};
  const xt::xarray<float> w_q = with_singular_values(s_q), w_k = with_singular_values(s_k);
  const auto scaling = make_scaling("sigma_reparam", 2, 3, 8, true);
  scaling->init_weights(tensor_of(w_q), tensor_of(w_k));
  CHECK(sigma_of(*scaling, w_q) == doctest::Approx(3.0).epsilon(1e-6));
  const auto params = scaling->named_parameters();
  REQUIRE(params.size() == 2);
  CHECK(params[0].first == "w_q_gamma");
  CHECK(params[0].second.item() == doctest::Approx(3.0).epsilon(1e-6));
  CHECK(params[1].first == "w_k_gamma");
  CHECK(params[1].second.item() == doctest::Approx(0.9).epsilon(1e-5));
  const auto reparametrised = scaling->transform_weights(tensor_of(w_q), tensor_of(w_k), scaling->parameters());
  CHECK(relative_difference(reparametrised.first.value(), w_q) < 1e-6);
  CHECK(relative_difference(reparametrised.second.value(), w_k) < 1e-6);
}

TEST_CASE("sigma_reparam: one power-iteration step per update_state follows the weights as they change") {
  const xt::xarray<float> start = with_singular_values({3.0, 2.0, 1.0, 0.5, 0.2, 0.1});
  const xt::xarray<float> moved = with_singular_values({5.0, 1.0, 1.0, 0.5, 0.2, 0.1}) + 0.1f * start;
  const auto scaling = make_scaling("sigma_reparam", 2, 3, 8, true);
  scaling->init_weights(tensor_of(start), tensor_of(start));
  const auto before = scaling->named_buffers();
  REQUIRE(before.size() == 4);
  CHECK(before[0].first == "w_q_u");
  const xt::xarray<float> u_before = before[0].second.value();
  scaling->update_state(tensor_of(moved), tensor_of(moved));
  CHECK(scaling->named_buffers()[0].second.value() != u_before);  // one step moved it
  for (int i = 0; i < 200; ++i) scaling->update_state(tensor_of(moved), tensor_of(moved));
  // Converged on the new weights: sigma is their largest singular value, computed here by many steps in double.
  std::vector<double> u(6, 1.0), v(6);
  for (int i = 0; i < 2000; ++i) {
    double n = 0;
    for (std::size_t j = 0; j < 6; ++j) {
      v[j] = 0;
      for (std::size_t k = 0; k < 6; ++k) v[j] += moved(k, j) * u[k];
      n += v[j] * v[j];
    }
    for (double& e : v) e /= std::sqrt(n);
    n = 0;
    for (std::size_t k = 0; k < 6; ++k) {
      u[k] = 0;
      for (std::size_t j = 0; j < 6; ++j) u[k] += moved(k, j) * v[j];
      n += u[k] * u[k];
    }
    for (double& e : u) e /= std::sqrt(n);
  }
  double sigma = 0;
  for (std::size_t k = 0; k < 6; ++k)
    for (std::size_t j = 0; j < 6; ++j) sigma += u[k] * moved(k, j) * v[j];
  CHECK(sigma_of(*scaling, moved) == doctest::Approx(sigma).epsilon(1e-6));
}

TEST_CASE("sigma_reparam: the forward pass advances the state only in training mode with gradients on") {
  Generator gen(2);
  MultiHeadAttention attn(6, 2, "sigma_reparam", true, gen, 5, 1.0, 3);
  Tensor x(normal_array({1, 5, 6}, gen));
  auto u = [&] { return xt::xarray<float>(attn.named_buffers()[0].second.value()); };
  // Perturb W_q so a step has somewhere to go (the state starts converged on the initial weights).
  attn.w_q->weight.mutable_value() += normal_array({6, 6}, gen, 0.5);
  const xt::xarray<float> start = u();
  {
    NoGradGuard no_grad;
    attn.forward(x);
  }
  CHECK(u() == start);
  attn.eval();
  attn.forward(x);
  CHECK(u() == start);
  attn.train();
  attn.forward(x);
  CHECK(u() != start);
}

namespace {

// `c` (already run into `part`) resumed to step 50, against an uninterrupted run of 50 steps into `whole`: the same
// metrics.csv, but for its timing columns.
void check_resume_to_50(const train::TrainConfig& c, const std::filesystem::path& part,
                        const std::filesystem::path& whole) {
  train::TrainConfig longer = c;
  longer.steps = 50;
  longer.resume = true;
  train::train(longer);
  train::TrainConfig uninterrupted = c;
  uninterrupted.steps = 50;
  uninterrupted.out = whole.string();
  train::train(uninterrupted);
  const auto resumed_rows = testing::metrics_without_timing(part);
  CHECK(resumed_rows.size() == 51);
  CHECK(resumed_rows == testing::metrics_without_timing(whole));
}

}  // namespace

TEST_CASE("sigma_reparam: its power-iteration state is in the checkpoint, and a resumed run continues it exactly") {
  Generator gen(4);
  ModelConfig mc;
  mc.vocab_size = 11;
  mc.max_seq_len = 5;
  mc.d_model = 6;
  mc.n_heads = 2;
  mc.scale = "sigma_reparam";
  AttentionModel model(mc, 1);
  std::vector<std::string> buffer_names;
  for (const auto& [name, b] : model.named_buffers()) buffer_names.push_back(name);
  CHECK(buffer_names == std::vector<std::string>{"blocks.0.attn.w_q_u", "blocks.0.attn.w_q_v", "blocks.0.attn.w_k_u",
                                                 "blocks.0.attn.w_k_v"});
  for (const auto& [name, p] : model.named_parameters()) CHECK(name.find("_u") == std::string::npos);

  const testing::TempDir part("sigma_part"), whole("sigma_whole");
  train::TrainConfig c = testing::tiny_run(part.string(), 30);
  c.checkpoint_every = 8;
  c.model.scale = "sigma_reparam";
  train::train(c);
  const Checkpoint saved = load_checkpoint((part / "checkpoint.safetensors").string());
  CHECK(saved.find("model.blocks.0.attn.w_q_u") != nullptr);
  CHECK(saved.find("model.blocks.0.attn.w_k_v") != nullptr);
  check_resume_to_50(c, part, whole);
}

namespace {

// qk_norm's settings with the multiplier `scale` ("1", "inv_sqrt_dk", "0.12").
SettingValues qk_norm_scale(const std::string& scale) {
  SettingValues s;
  s.set("qk_norm_scale", scale);
  return s;
}

// A one-head qk_norm layer of d_model 2, d_k 2, W_q = W_k = I, gains g_q = [2, 0.5] and g_k = [1, 3], recording its
// scores: on x = [[3, 4], [1, -1]] its scaled scores, [1, 1, 2, 2].
xt::xarray<float> qk_norm_scores(const std::string& scale) {
  Generator gen(2);
  MultiHeadAttention attn(2, 1, "qk_norm", false, gen, 2, 1.0, 2, qk_norm_scale(scale));
  attn.w_q->weight.mutable_value() = xt::eye<float>(2);
  attn.w_k->weight.mutable_value() = xt::eye<float>(2);
  auto params = attn.scaling->parameters();
  REQUIRE(params.size() == 2);
  params[0].mutable_value() = xt::xarray<float>{2.0f, 0.5f};
  params[1].mutable_value() = xt::xarray<float>{1.0f, 3.0f};
  attn.record_attention = true;
  attn.forward(Tensor(xt::xarray<float>{{{3.0f, 4.0f}, {1.0f, -1.0f}}}));
  return attn.last.scores.value();
}

}  // namespace

TEST_CASE("qk_norm: scores = c RMSNorm(q).RMSNorm(k), gains q_norm.weight and k_norm.weight [d_k] shared by heads") {
  // By hand, eps = 1e-6 inside the root: rms([3, 4]) = sqrt(12.5 + eps), rms([1, -1]) = sqrt(1 + eps).
  const double r0 = std::sqrt(12.5 + 1e-6), r1 = std::sqrt(1.0 + 1e-6);
  const double q[2][2] = {{2 * 3 / r0, 0.5 * 4 / r0}, {2 * 1 / r1, 0.5 * -1 / r1}};
  const double k[2][2] = {{1 * 3 / r0, 3 * 4 / r0}, {1 * 1 / r1, 3 * -1 / r1}};
  const xt::xarray<float> scores = qk_norm_scores("1");
  REQUIRE(scores.shape() == shape_t{1, 1, 2, 2});
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 2; ++j) {
      CAPTURE(i);
      CAPTURE(j);
      CHECK(scores(0, 0, i, j) == doctest::Approx(q[i][0] * k[j][0] + q[i][1] * k[j][1]).epsilon(1e-6));
    }
  // The first score: (6·3 + 2·12) / (12.5 + eps) = 3.36 to float rounding.
  CHECK(scores(0, 0, 0, 0) == doctest::Approx(42.0 / 12.5).epsilon(1e-6));
  Generator gen(1);
  std::vector<std::string> names;
  for (const auto& [name, p] : MultiHeadAttention(8, 2, "qk_norm", true, gen).named_parameters()) {
    names.push_back(name);
    if (name.find("_norm") != std::string::npos) CHECK(xt::all(xt::equal(p.value(), 1.0f)));  // d_k 4, gains start at 1
  }
  CHECK(names == std::vector<std::string>{"w_q.weight", "w_k.weight", "w_v.weight", "w_o.weight", "q_norm.weight",
                                          "k_norm.weight"});
}

TEST_CASE("qk_norm: float64 gradcheck of the gains and of q and k through the RMSNorm") {
  const auto scaling = make_scaling("qk_norm", 2, 4, 3, true, qk_norm_scale("1"));
  Generator gen(8);
  const auto normal = [&](const shape_t& shape) { return testing::to_double(Tensor(normal_array(shape, gen))); };
  // q, k: [B 2, T 3, H 2, d_k 4]; gains away from 1 so that a gain entering the wrong place would show.
  const std::vector<DTensor> inputs{normal({2, 3, 2, 4}), normal({2, 3, 2, 4}), normal({4}), normal({4})};
  auto f = [&](const std::vector<DTensor>& in) {
    const auto [q, k] = scaling->transform_qk(in[0], in[1], {in[2], in[3]});
    return q * k;  // every element of both outputs, each gain's gradient through both q and k's positions
  };
  const GradcheckResult r = gradcheck(f, inputs);
  CHECK_MESSAGE(r.ok, r.message);
}

TEST_CASE("qk_norm_scale: 1, inv_sqrt_dk and 0.12 give the same scores in the ratio of their multipliers") {
  CHECK(make_scaling("qk_norm", 1, 256, 8, true, qk_norm_scale("1"))->multiplier() == 1.0);
  CHECK(make_scaling("qk_norm", 1, 256, 8, true, qk_norm_scale("0.12"))->multiplier() == 0.12);
  CHECK(make_scaling("qk_norm", 1, 256, 8, true)->multiplier() == 1.0 / 16);  // the default: inv_sqrt_dk
  const xt::xarray<float> one = qk_norm_scores("1"), inv = qk_norm_scores("inv_sqrt_dk"),
                          fixed = qk_norm_scores("0.12");
  for (std::size_t i = 0; i < one.size(); ++i) {
    // One float rounding of the product c · (q·k) apart.
    CHECK(inv.data()[i] == doctest::Approx(one.data()[i] / std::sqrt(2.0)).epsilon(1e-6));
    CHECK(fixed.data()[i] == doctest::Approx(one.data()[i] * 0.12).epsilon(1e-6));
  }
  // Other values are refused naming the allowed ones.
  const Setting& declared = Registry<ScalingEntry>::instance().at("qk_norm").settings.at(0);
  for (const char* bad : {"0", "-1", "sqrt_dk", "1/16", "nan"})
    CHECK(check_setting_value(declared, bad) ==
          "must be inv_sqrt_dk or a number in (0, inf), got '" + std::string(bad) + "'");
  CHECK(check_setting_value(declared, 0.12) == "must be a string, got 0.12");
}

TEST_CASE("qk_norm at d_k 256: scale 1 starts near one-hot (entropy far below ln T), inv_sqrt_dk does not") {
  // At init the normalised q and k have unit RMS, so q·k of unrelated positions has std ~sqrt(d_k) = 16: times 1,
  // softmax over 32 keys is near one-hot; times 1/16, the scores have std ~1 and attention is broad.
  const std::size_t T = 32;
  auto stats = [&](const std::string& scale) {
    Generator gen(6);
    MultiHeadAttention attn(64, 1, "qk_norm", false, gen, T, 1.0, 256, qk_norm_scale(scale));
    attn.record_attention = true;
    attn.forward(Tensor(normal_array({2, T, 64}, gen)));
    return attention_stats(attn.last.scores.value(), attn.last.probs, nullptr, nullptr).at(0);
  };
  const AttentionStats sharp = stats("1"), broad = stats("inv_sqrt_dk");
  const double uniform = std::log(static_cast<double>(T));  // 3.47 nats
  MESSAGE("entropy (nats) at scale 1: " << sharp.entropy_mean << ", at inv_sqrt_dk: " << broad.entropy_mean
                                        << "; largest weight " << sharp.max_prob_mean << " and "
                                        << broad.max_prob_mean);
  CHECK(sharp.entropy_mean < 0.2 * uniform);
  CHECK(sharp.max_prob_mean > 0.8);
  CHECK(broad.entropy_mean > 0.7 * uniform);
  CHECK(broad.max_prob_mean < 0.3);
  CHECK(sharp.score_std == doctest::Approx(16.0 * broad.score_std).epsilon(1e-5));
}

TEST_CASE("qk_norm: qk_norm_scale is in config.json, and a resumed run at scale 1 continues the uninterrupted one") {
  const testing::TempDir part("qk_norm_part"), whole("qk_norm_whole");
  train::TrainConfig c = testing::tiny_run(part.string(), 30);
  c.checkpoint_every = 8;
  train::set_setting(c, "scale", "qk_norm");
  train::set_setting(c, "qk_norm_scale", "1");
  const train::RunSummary s = train::train(c);
  CHECK(!s.diverged);
  std::ifstream config_file(part / "config.json");
  CHECK(nlohmann::json::parse(config_file).at("qk_norm_scale") == "1");
  check_resume_to_50(c, part, whole);
}

TEST_CASE("qk_clip: a run whose logits pass qk_clip_tau is clipped, and a resumed run continues it exactly") {
  const testing::TempDir part("qk_clip_part"), whole("qk_clip_whole"), plain("qk_clip_plain");
  train::TrainConfig c = testing::tiny_run(part.string(), 30);
  c.checkpoint_every = 8;
  train::set_setting(c, "scale", "qk_clip");
  train::set_setting(c, "qk_clip_tau", 0.5);  // under the tiny model's logits of about 1: heads are clipped
  CHECK(!train::train(c).diverged);
  std::ifstream config_file(part / "config.json");
  CHECK(nlohmann::json::parse(config_file).at("qk_clip_tau") == 0.5);
  // The clip acted: the same run under sqrt_dk (qk_clip's multiplier, no clip) trains other weights.
  train::TrainConfig unclipped = c;
  unclipped.out = plain.string();
  train::set_setting(unclipped, "scale", "sqrt_dk");
  train::train(unclipped);
  CHECK(testing::metrics_without_timing(part) != testing::metrics_without_timing(plain));
  check_resume_to_50(c, part, whole);
}
