// Modules, initialisation and optimizers: names, shapes, masking, equal weights across scale modes, update rules.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>

#include "autograd/gradcheck.h"
#include "nn/model.h"
#include "nn/optim.h"

using namespace xgrad;
using namespace xgrad::nn;

namespace {
ModelConfig small_config(const std::string& scale = "sqrt_dk") {
  ModelConfig c;
  c.vocab_size = 11;
  c.max_seq_len = 7;
  c.d_model = 8;
  c.n_heads = 2;
  c.n_layers = 2;
  c.scale = scale;
  return c;
}
index_array tokens(std::size_t B, std::size_t T, std::size_t V) {
  index_array t = index_array::from_shape({B, T});
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<std::int64_t>((i * 7 + 3) % V);
  return t;
}
}  // namespace

TEST_CASE("named_parameters are dotted, in registration order, and all require grad") {
  AttentionModel model(small_config(), 0);
  const auto named = model.named_parameters();
  std::vector<std::string> names;
  for (auto& [n, p] : named) {
    names.push_back(n);
    CHECK(p.requires_grad());
  }
  CHECK(names.front() == "tok_emb.weight");
  CHECK(std::find(names.begin(), names.end(), "blocks.0.attn.w_q.weight") != names.end());
  CHECK(std::find(names.begin(), names.end(), "blocks.1.mlp.fc_in.bias") != names.end());
  CHECK(names.back() == "head.bias");
}

TEST_CASE("module output shapes") {
  Generator gen(0);
  Tensor x = zeros<float>({3, 5, 8});
  CHECK(Linear(8, 4, true, gen).forward(x).shape() == shape_t{3, 5, 4});
  CHECK(LayerNorm(8).forward(x).shape() == shape_t{3, 5, 8});
  CHECK(MLP(8, 16, gen).forward(x).shape() == shape_t{3, 5, 8});
  MultiHeadAttention attn(8, 2, "sqrt_dk", true, gen);
  CHECK(attn.d_k == 4);
  CHECK(attn.forward(x).shape() == shape_t{3, 5, 8});
  CHECK(Embedding(11, 8, gen).forward(tokens(3, 5, 11)).shape() == shape_t{3, 5, 8});
  AttentionModel model(small_config(), 0);
  CHECK(model.forward(tokens(3, 7, 11)).shape() == shape_t{3, 7, 11});
  CHECK_THROWS_AS(model.forward(tokens(3, 8, 11)), Error);  // longer than max_seq_len
  CHECK_THROWS_AS(MultiHeadAttention(10, 3, "none", true, gen), Error);
}

TEST_CASE("causal attention: a later token never changes an earlier position's output") {
  AttentionModel model(small_config(), 1);
  index_array t = tokens(1, 7, 11);
  const xt::xarray<float> before = model.forward(t).value();
  t(0, 6) = (t(0, 6) + 1) % 11;
  const xt::xarray<float> after = model.forward(t).value();
  for (std::size_t pos = 0; pos < 6; ++pos)
    for (std::size_t c = 0; c < 11; ++c) CHECK(before(0, pos, c) == after(0, pos, c));
  bool last_changed = false;
  for (std::size_t c = 0; c < 11; ++c) last_changed = last_changed || before(0, 6, c) != after(0, 6, c);
  CHECK(last_changed);
}

TEST_CASE("models with different scalings start from identical weights") {
  AttentionModel a(small_config("sqrt_dk"), 42), b(small_config("none"), 42), c(small_config("none"), 43);
  const auto pa = a.named_parameters(), pb = b.named_parameters(), pc = c.named_parameters();
  REQUIRE(pa.size() == pb.size());
  bool any_differs_with_seed = false;
  for (std::size_t i = 0; i < pa.size(); ++i) {
    CHECK(pa[i].first == pb[i].first);
    CHECK(pa[i].second.value() == pb[i].second.value());
    any_differs_with_seed = any_differs_with_seed || pa[i].second.value() != pc[i].second.value();
  }
  CHECK(any_differs_with_seed);
}

TEST_CASE("scaling multipliers: 1, 1/sqrt(d_k), 1/d_k; unknown names are rejected with the registered names") {
  CHECK(make_scaling("none", 1, 64, 16, true)->multiplier() == 1.0);
  // Computed as before the registry (1 / sqrt in double), so scaled runs keep their numbers bit for bit.
  CHECK(make_scaling("sqrt_dk", 1, 64, 16, true)->multiplier() == 1.0 / std::sqrt(64.0));
  CHECK(make_scaling("dk", 1, 64, 16, true)->multiplier() == 1.0 / 64.0);
  CHECK_THROWS_WITH_AS(make_scaling("sqrt", 1, 64, 16, true),
                       doctest::Contains("scaling 'sqrt' is unknown (allowed: none, sqrt_dk, dk"), RegistryError);
  Generator gen(1);
  CHECK_THROWS_AS(MultiHeadAttention(8, 2, "sqrt", true, gen), RegistryError);
}

TEST_CASE("init: LeCun normal projections have variance ~1/fan_in; at init unscaled scores have std ~sqrt(d_k)") {
  Generator gen(3);
  Linear lin(256, 256, false, gen);
  const auto& w = lin.weight.value();
  double s2 = 0;
  for (std::size_t i = 0; i < w.size(); ++i) s2 += w.data()[i] * w.data()[i];
  CHECK(s2 / static_cast<double>(w.size()) == doctest::Approx(1.0 / 256).epsilon(0.05));

  // Unit-variance inputs (what LayerNorm feeds attention): q.k std should be near sqrt(d_k) without scaling.
  MultiHeadAttention attn(64, 1, "none", false, gen);
  attn.record_attention = true;
  Tensor x = zeros<float>({8, 16, 64});
  for (std::size_t i = 0; i < x.numel(); ++i) x.mutable_value().data()[i] = static_cast<float>(gen.normal());
  attn.forward(x);
  double m = 0, v = 0;
  const auto& sc = attn.last.scores.value();
  for (std::size_t i = 0; i < sc.size(); ++i) m += sc.data()[i];
  m /= static_cast<double>(sc.size());
  for (std::size_t i = 0; i < sc.size(); ++i) v += (sc.data()[i] - m) * (sc.data()[i] - m);
  CHECK(std::sqrt(v / static_cast<double>(sc.size())) == doctest::Approx(8.0).epsilon(0.2));
}

TEST_CASE("SGD with momentum follows PyTorch's update rule") {
  Tensor p(xt::xarray<float>{1.f, -2.f}, true);
  SGD opt({p}, 0.1, 0.9);
  for (int step = 0; step < 2; ++step) {
    opt.zero_grad();
    sum(p * p).backward();  // grad = 2p
    opt.step();
  }
  // step 1: buf = 2p0 = [2,-4]; p1 = p0 - 0.1 buf = [0.8, -1.6]
  // step 2: buf = 0.9 [2,-4] + 2 p1 = [3.4, -6.8]; p2 = p1 - 0.1 buf = [0.46, -0.92]
  CHECK(p.value()(0) == doctest::Approx(0.46));
  CHECK(p.value()(1) == doctest::Approx(-0.92));
}

TEST_CASE("AdamW: the first step moves each weight by lr against its gradient's sign, plus decoupled decay") {
  Tensor p(xt::xarray<float>{1.f, -2.f, 0.5f}, true);
  AdamW opt({p}, 0.01, 0.9, 0.999, 1e-8, 0.1);
  sum(p * Tensor(xt::xarray<float>{3.f, -1.f, 0.f})).backward();
  opt.step();
  // m_hat / sqrt(v_hat) = sign(g) on step 1; decay multiplies by (1 - lr * wd) first.
  CHECK(p.value()(0) == doctest::Approx(1.0 * (1 - 0.001) - 0.01));
  CHECK(p.value()(1) == doctest::Approx(-2.0 * (1 - 0.001) + 0.01));
  CHECK(p.value()(2) == doctest::Approx(0.5 * (1 - 0.001)));  // zero gradient: decay only
  CHECK(opt.step_count() == 1);
}

TEST_CASE("clip_grad_norm returns the norm before clipping and scales gradients to max_norm") {
  Tensor a(xt::xarray<float>{0.f, 0.f}, true), b(xt::xarray<float>{0.f}, true);
  sum(a * Tensor(xt::xarray<float>{3.f, 0.f})).backward();
  sum(b * 4.0).backward();
  const double total = clip_grad_norm({a, b}, 1.0);
  CHECK(total == doctest::Approx(5.0));
  CHECK(a.grad()(0) == doctest::Approx(0.6).epsilon(1e-4));
  CHECK(b.grad()(0) == doctest::Approx(0.8).epsilon(1e-4));
  CHECK(clip_grad_norm({a, b}, 0.0) == doctest::Approx(1.0).epsilon(1e-4));  // 0 = no clipping
}

TEST_CASE("clip_grads_with_norm scales as clip_grad_norm does, given the norm") {
  auto grads = [] {
    Tensor a(xt::xarray<float>{0.f, 0.f}, true), b(xt::xarray<float>{0.f}, true);
    sum(a * Tensor(xt::xarray<float>{3.f, 0.f})).backward();
    sum(b * 4.0).backward();
    return std::vector<Tensor>{a, b};
  };
  const std::vector<Tensor> by_norm = grads(), computed = grads();
  clip_grads_with_norm(by_norm, 1.0, 5.0);
  clip_grad_norm(computed, 1.0);
  for (std::size_t i = 0; i < 2; ++i) CHECK(by_norm[i].grad() == computed[i].grad());  // the same float ops
  CHECK(by_norm[1].grad()(0) == doctest::Approx(0.8).epsilon(1e-4));
  clip_grads_with_norm(by_norm, 2.0, 1.0);  // under max_norm: untouched
  clip_grads_with_norm(by_norm, 0.0, 9.0);  // 0 = no clipping
  CHECK(by_norm[1].grad()(0) == computed[1].grad()(0));
}

TEST_CASE("an empty batch runs forward and backward without crashing (zero loss, zero gradients)") {
  AttentionModel model(small_config(), 0);
  index_array tokens = index_array::from_shape({0, 4});
  index_array targets = index_array::from_shape({0, 4});
  Tensor loss = cross_entropy(model.forward(tokens), targets);
  CHECK(loss.item() == 0.f);
  loss.backward();
  for (auto& [name, p] : model.named_parameters())
    if (p.has_grad()) CHECK(xt::all(xt::equal(p.grad(), 0.f)));
}

TEST_CASE("attention layers come from their registry: multi_head by default, unknown names refused with the list") {
  AttentionModel model(small_config(), 1);
  for (const auto& layer : model.attention_layers()) {
    REQUIRE(dynamic_cast<MultiHeadAttention*>(layer.get()) != nullptr);
    CHECK(layer->n_heads() == 2);
  }
  ModelConfig c = small_config();
  c.attention = "multihead";
  CHECK_THROWS_WITH_AS(AttentionModel(c, 1),
                       doctest::Contains("attention layer 'multihead' is unknown (allowed: multi_head"), RegistryError);
  AttentionLayerContext context;
  context.d_model = 10;
  context.n_heads = 3;
  context.scale = "sqrt_dk";
  Generator gen(1);
  CHECK_THROWS_WITH_AS(make_attention_layer("multi_head", context, gen), doctest::Contains("multiple of n_heads"),
                       Error);
  context.d_k = 4;  // a given head size decouples it from the width
  CHECK(make_attention_layer("multi_head", context, gen)->n_heads() == 3);
}

namespace {
// A registry of its own, so the duplicate below leaves the real scalings and tasks alone.
struct WidgetEntry {
  static constexpr const char* kind = "widget";
  std::string name;
  int order = 0;
};
}  // namespace

TEST_CASE("a duplicate registration at start-up is recorded with both sources, not thrown") {
  const std::size_t before = registration_errors().size();
  const Registration<WidgetEntry> first{WidgetEntry{"knob", 0}, "built in (nn/widgets.cpp)"};
  // An exception here would escape a static initialiser and abort the program (exit 134), --help included.
  CHECK_NOTHROW(Registration<WidgetEntry>(WidgetEntry{"knob", 1}, "user/extension.cpp"));
  REQUIRE(registration_errors().size() == before + 1);
  CHECK(registration_errors().back() ==
        "widget 'knob' registered twice: by built in (nn/widgets.cpp) and by user/extension.cpp");
  CHECK(Registry<WidgetEntry>::instance().at("knob").order == 0);
  registration_errors().resize(before);
}

namespace {
// An entry type with a build function, as scalings, optimizers and tasks have.
struct GadgetEntry {
  static constexpr const char* kind = "gadget";
  std::string name;
  int order = 0;
  std::function<int()> build;
};
}  // namespace

TEST_CASE("a registry refuses a name that cannot stand as a flag value, list item and file name") {
  Registry<WidgetEntry> registry;
  // Each breaks something downstream: ',' splits --scale a,b; '@' splits --arms; '/' and '..' leave the run
  // directory's name; a space or newline splits --help; capitals make AdamW beside adamw.
  for (const std::string& bad : std::vector<std::string>{"a,b", "my@opt", "../evil", "x y", "line\nbreak", "AdamW",
                                                         "9lives", "_x", "a-b", std::string(65, 'a')})
    CHECK_THROWS_AS(registry.add(WidgetEntry{bad, 0}, "user/extension.cpp"), RegistryError);
  CHECK(registry.names().empty());
  for (const std::string& good : std::vector<std::string>{"a", "sqrt_dk", "qk_layernorm2", std::string(64, 'a')})
    CHECK_NOTHROW(registry.add(WidgetEntry{good, 0}, "user/extension.cpp"));
  CHECK(registry.names().size() == 4);
}

TEST_CASE("a registry refuses an entry without its build function") {
  Registry<GadgetEntry> registry;
  CHECK_THROWS_AS(registry.add(GadgetEntry{"empty", 0, nullptr}), RegistryError);
  CHECK(registry.find("empty") == nullptr);
  CHECK_NOTHROW(registry.add(GadgetEntry{"built", 0, [] { return 1; }}));
}

TEST_CASE("a registration names its source file by default") {
  const Registration<WidgetEntry> entry{WidgetEntry{"dial", 0}};
  CHECK(doctest::String(Registry<WidgetEntry>::instance().source("dial").c_str()) == doctest::Contains("test_nn.cpp"));
}
