// Every registered attention scaling (nn/scaling.h), iterated from the registry so a scaling added in its own file is
// checked with no edit here: a float64 gradcheck of the composed attention through its hooks (its parameters
// included), the fused attention equal to the composed reference (values and gradients, causal and not), and a short
// kv_recall run that learns. Facts particular to one scaling (its formula, its settings) follow.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "nn/attention.h"
#include "nn/model.h"
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

DTensor to_double(const Tensor& t) {
  DTensor d(xt::xarray<double>(xt::cast<double>(t.value())));
  d.set_requires_grad(true);
  return d;
}

// max |a - b| / (1 + max |b|): a relative error that stays meaningful where b is near 0.
double relative_difference(const xt::xarray<float>& a, const xt::xarray<float>& b) {
  REQUIRE(a.shape() == b.shape());
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a.data()[i]) - b.data()[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b.data()[i])));
  }
  return diff / (1.0 + scale);
}

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
  for (const auto& [name, p] : attn.named_parameters()) {
    INFO("parameter " << name);
    REQUIRE(p.has_grad());
    out.push_back(p.grad());
  }
  return out;
}

// A run directory under the system's temp dir, removed when the test ends however it ends.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / ("xgrad_test_scalings_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

TEST_CASE("the registry holds the built-in scalings, each with a description, a colour and a build function") {
  const auto names = registered_scalings();
  for (const char* name : {"none", "sqrt_dk", "dk", "qk_layernorm", "learned", "softcap", "ssmax"})
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

TEST_CASE("every scaling: float64 gradcheck of the attention through its hooks, parameters included") {
  for (const std::string& name : registered_scalings())
    for (bool causal : {true, false}) {
      INFO("scaling " << name << (causal ? ", causal" : ", not causal"));
      Layer layer(name, causal);
      MultiHeadAttention& attn = layer.attn;
      Generator gen(5);
      std::vector<DTensor> inputs{to_double(Tensor(normal_array({2, 5, 6}, gen))), to_double(attn.w_q->weight),
                                  to_double(attn.w_k->weight), to_double(attn.w_v->weight),
                                  to_double(attn.w_o->weight)};
      const std::size_t first_param = inputs.size();
      for (const Tensor& p : attn.scaling->parameters()) inputs.push_back(to_double(p));
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

TEST_CASE("every scaling trains kv_recall below chance in a short run") {
  for (const std::string& name : registered_scalings()) {
    INFO("scaling " << name);
    TempDir dir(name);
    train::TrainConfig c;
    c.d_model = 32;
    c.steps = 200;
    c.print_every = 1000;
    c.scale = name;
    c.out = dir.path.string();
    const train::RunSummary s = train::train(c);
    CHECK(!s.diverged);
    CHECK(s.final_loss < 0.85 * s.chance_loss);
  }
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
  CHECK(names_of("qk_layernorm") ==
        std::vector<std::string>{"w_q.weight", "w_k.weight", "w_v.weight", "w_o.weight", "q_norm.weight",
                                 "q_norm.bias", "k_norm.weight", "k_norm.bias"});
}
