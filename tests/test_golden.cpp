// Golden tests against PyTorch, as llm.c's test_gpt2.c: xgrad in float32 reproduces outputs, gradients and ten
// AdamW steps that PyTorch computed and tests/golden/make_golden.py saved in tests/golden/fixtures/ (read its
// docstring for when and how to regenerate them). No Python is needed here: the fixtures are committed .npy files.
//
// The reference was computed in float64 from the float32 inputs, so a difference measures xgrad's float32 error.
// Tolerance: |xgrad - reference| <= atol + rtol |reference| with rtol 1e-4, atol 1e-5 everywhere. The manifest
// records how far PyTorch's own float32 run lands from the same reference on that scale: at most 0.03 of the
// allowance (fixtures/manifest.json, "f32_ratio"), so the tolerance leaves room for a different summation order
// but not for a wrong formula.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <xtensor/xnpy.hpp>

#include "autograd/ops.h"
#include "nn/attention.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "tests/support/model_config.h"
#include "tests/support/paths.h"

using namespace xgrad;

namespace {

const std::string fixture_dir = std::string(XGRAD_SOURCE_DIR) + "/tests/golden/fixtures/";

template <class T>
xt::xarray<T> load(const std::string& path) {
  if (!std::filesystem::exists(path))
    throw std::runtime_error("golden fixture " + path + " is missing (tests/golden/make_golden.py writes it)");
  return xt::load_npy<T>(path);  // throws if the file's dtype is not T
}

shape_t shape_of(const xt::xarray<float>& a) { return shape_t(a.shape().begin(), a.shape().end()); }

struct Tolerance {
  double rtol = 1e-4;
  double atol = 1e-5;
};

/// Whether `got` matches `want` element by element, and a sentence naming the worst element.
struct Comparison {
  bool ok = true;
  std::string message;
};

Comparison compare(const xt::xarray<float>& got, const xt::xarray<float>& want, const std::string& what,
                   Tolerance tol = {}) {
  Comparison c;
  std::ostringstream msg;
  if (shape_of(got) != shape_of(want)) {
    c.ok = false;
    msg << what << ": shape " << shape_str(shape_of(got)) << ", expected " << shape_str(shape_of(want));
    c.message = msg.str();
    return c;
  }
  // ratio = |got - want| / (atol + rtol |want|): <= 1 passes. NaN anywhere fails.
  double worst = -1;
  std::size_t at = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = got.data()[i], w = want.data()[i];
    double ratio = std::abs(g - w) / (tol.atol + tol.rtol * std::abs(w));
    if (std::isnan(ratio)) ratio = INFINITY;
    if (ratio > worst) worst = ratio, at = i;
  }
  c.ok = worst <= 1.0;
  msg << what << " " << shape_str(shape_of(want)) << ": worst element " << at;
  if (want.size() > 0)
    msg << " got " << got.data()[at] << ", expected " << want.data()[at]
        << ", |diff| = " << std::abs(static_cast<double>(got.data()[at]) - want.data()[at]) << " = " << worst
        << " x (atol + rtol |expected|)";
  c.message = msg.str();
  return c;
}

/// `got` matches `want` within the tolerance; on failure the report names the worst element.
#define CHECK_MATCHES(...)                        \
  do {                                            \
    const Comparison cmp_ = compare(__VA_ARGS__); \
    INFO(cmp_.message);                           \
    CHECK(cmp_.ok);                               \
  } while (false)

// ---- ops ------------------------------------------------------------------------------------------------------

/// One op fixture directory: ops/<name>/{<input>.npy, out.npy, W.npy, grad_<input>.npy}.
class OpCase {
 public:
  explicit OpCase(std::string name) : name_(std::move(name)), dir_(fixture_dir + "ops/" + name_ + "/") {}
  /// A float input as a leaf that requires a gradient.
  Tensor input(const std::string& k) const { return Tensor(load<float>(dir_ + k + ".npy"), true); }
  /// An int64 input (indices, class targets).
  index_array indices(const std::string& k) const { return load<std::int64_t>(dir_ + k + ".npy"); }

  /// Checks `out` against out.npy, backpropagates W (the gradient of sum(out * W)), and checks each input's
  /// gradient against grad_<input>.npy.
  void check(const Tensor& out, const std::vector<std::pair<std::string, Tensor>>& inputs) const {
    CHECK_MATCHES(out.value(), load<float>(dir_ + "out.npy"), name_ + " out");
    out.backward(load<float>(dir_ + "W.npy"));
    for (const auto& k_t_entry : inputs) {
      const auto& k = std::get<0>(k_t_entry);
      const auto& t = std::get<1>(k_t_entry);
      REQUIRE_MESSAGE(t.has_grad(), name_ << ": no gradient reached input " << k);
      CHECK_MATCHES(t.grad(), load<float>(dir_ + "grad_" + k + ".npy"), name_ + " grad_" + k);
    }
  }

 private:
  std::string name_, dir_;
};

/// A fixture case: its float inputs, in order, and the xgrad computation (which may read int inputs from the case).
struct GoldenOp {
  std::string name;
  std::vector<std::string> inputs;
  std::function<Tensor(const std::vector<Tensor>&, const OpCase&)> f;
};

// causal scaled dot-product attention as the model uses it: scale 1/sqrt(d_k), [T, T] mask.
Tensor attention_causal(const Tensor& q, const Tensor& k, const Tensor& v) {
  const xt::xarray<bool> mask = nn::causal_mask(q.size(2));
  return nn::scaled_dot_product_attention(q, k, v, &mask, 1.0 / std::sqrt(static_cast<double>(q.size(3))));
}

using In = std::vector<Tensor>;
const std::vector<GoldenOp>& golden_ops() {
  static const std::vector<GoldenOp> ops{
      {"add_broadcast", {"a", "b"}, [](const In& x, const OpCase&) { return x[0] + x[1]; }},
      {"sub_broadcast", {"a", "b"}, [](const In& x, const OpCase&) { return x[0] - x[1]; }},
      {"mul_broadcast", {"a", "b"}, [](const In& x, const OpCase&) { return x[0] * x[1]; }},
      {"div_broadcast", {"a", "b"}, [](const In& x, const OpCase&) { return x[0] / x[1]; }},
      {"matmul_batched_broadcast", {"a", "b"}, [](const In& x, const OpCase&) { return matmul(x[0], x[1]); }},
      {"matmul_2d", {"a", "b"}, [](const In& x, const OpCase&) { return matmul(x[0], x[1]); }},
      {"softmax_last", {"x"}, [](const In& x, const OpCase&) { return softmax(x[0], -1); }},
      {"softmax_axis1", {"x"}, [](const In& x, const OpCase&) { return softmax(x[0], 1); }},
      {"log_softmax_last", {"x"}, [](const In& x, const OpCase&) { return log_softmax(x[0], -1); }},
      {"layer_norm",
       {"x", "weight", "bias"},
       [](const In& x, const OpCase&) { return layer_norm(x[0], x[1], x[2], 1e-5); }},
      {"rms_norm", {"x", "weight"}, [](const In& x, const OpCase&) { return rms_norm(x[0], x[1], 1e-6); }},
      {"gelu_tanh", {"x"}, [](const In& x, const OpCase&) { return gelu(x[0]); }},
      {"gelu_erf", {"x"}, [](const In& x, const OpCase&) { return gelu_erf(x[0]); }},
      {"relu", {"x"}, [](const In& x, const OpCase&) { return relu(x[0]); }},
      {"exp", {"x"}, [](const In& x, const OpCase&) { return exp(x[0]); }},
      {"log", {"x"}, [](const In& x, const OpCase&) { return log(x[0]); }},
      {"tanh", {"x"}, [](const In& x, const OpCase&) { return tanh(x[0]); }},
      {"sigmoid", {"x"}, [](const In& x, const OpCase&) { return sigmoid(x[0]); }},
      {"sum_axes_0_2",
       {"x"},
       [](const In& x, const OpCase&) {
         return sum(x[0], {0, 2});
       }},
      {"sum_all", {"x"}, [](const In& x, const OpCase&) { return sum(x[0]); }},
      {"mean_last_keepdim", {"x"}, [](const In& x, const OpCase&) { return mean(x[0], {-1}, true); }},
      {"mean_all", {"x"}, [](const In& x, const OpCase&) { return mean(x[0]); }},
      {"logsumexp_last", {"x"}, [](const In& x, const OpCase&) { return logsumexp(x[0], {-1}); }},
      {"cross_entropy_ignore",
       {"logits"},
       [](const In& x, const OpCase& c) { return cross_entropy(x[0], c.indices("targets"), -1); }},
      {"embedding", {"weight"}, [](const In& x, const OpCase& c) { return embedding(x[0], c.indices("indices")); }},
      {"attention_causal",
       {"q", "k", "v"},
       [](const In& x, const OpCase&) { return attention_causal(x[0], x[1], x[2]); }},
  };
  return ops;
}

// ---- the reference model --------------------------------------------------------------------------------------

const std::string model_dir = fixture_dir + "model/";

/// The model of make_golden.py: these sizes, every other field at its default (pre-LN, causal, sqrt_dk, GELU MLP
/// with d_ff = 4 d_model).
nn::ModelConfig golden_config() {
  return xgrad::testing::model_config(/*vocab_size=*/20, /*max_seq_len=*/6, /*d_model=*/16, /*n_heads=*/2,
                                      /*n_layers=*/2);
}

std::vector<std::string> fixture_param_names() {
  std::ifstream in(model_dir + "param_names.txt");
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) names.push_back(line);
  return names;
}

/// A model whose parameters are the fixture's: same names in the same order, same shapes, values copied in.
std::unique_ptr<nn::AttentionModel> golden_model() {
  auto model = std::make_unique<nn::AttentionModel>(golden_config(), /*seed=*/0);
  const auto params = model->named_parameters();
  std::vector<std::string> names;
  for (const auto& [name, p] : params) names.push_back(name);
  // A renamed, added or reordered parameter must fail here rather than silently skip a comparison.
  REQUIRE(names == fixture_param_names());
  for (const auto& name_p_entry : params) {
    const auto& name = std::get<0>(name_p_entry);
    const auto& p = std::get<1>(name_p_entry);
    xt::xarray<float> value = load<float>(model_dir + "params/" + name + ".npy");
    REQUIRE_MESSAGE(shape_of(value) == p.shape(),
                    name << ": fixture " << shape_str(shape_of(value)) << ", model " << shape_str(p.shape()));
    Tensor(p).mutable_value() = std::move(value);
  }
  return model;
}

}  // namespace

TEST_CASE("golden: ops against PyTorch (values and gradients of sum(out * W))") {
  for (const GoldenOp& op : golden_ops()) {
    CAPTURE(op.name);
    const OpCase c(op.name);
    std::vector<Tensor> inputs;
    std::vector<std::pair<std::string, Tensor>> named;
    for (const auto& k : op.inputs) {
      inputs.push_back(c.input(k));
      named.emplace_back(k, inputs.back());
    }
    c.check(op.f(inputs, c), named);
  }
}

TEST_CASE("golden: every op fixture has a case here") {
  std::set<std::string> fixtures, cases;
  for (const auto& entry : std::filesystem::directory_iterator(fixture_dir + "ops"))
    if (entry.is_directory()) fixtures.insert(entry.path().filename().string());
  for (const GoldenOp& op : golden_ops()) cases.insert(op.name);
  CHECK(fixtures == cases);
  CHECK(cases.size() == golden_ops().size());  // no name twice
}

TEST_CASE("golden: AttentionModel logits, loss and every parameter's gradient") {
  auto model = golden_model();
  const index_array tokens = load<std::int64_t>(model_dir + "tokens.npy");
  const index_array targets = load<std::int64_t>(model_dir + "targets.npy");
  REQUIRE(std::count(targets.begin(), targets.end(), -1) > 0);  // the fixture exercises ignore_index

  const Tensor logits = model->forward(tokens);
  CHECK_MATCHES(logits.value(), load<float>(model_dir + "logits.npy"), "logits");
  const Tensor loss = cross_entropy(logits, targets, -1);
  CHECK_MATCHES(loss.value(), load<float>(model_dir + "loss.npy"), "loss");

  loss.backward();
  for (const auto& name_p_entry : model->named_parameters()) {
    const auto& name = std::get<0>(name_p_entry);
    const auto& p = std::get<1>(name_p_entry);
    REQUIRE_MESSAGE(p.has_grad(), name << " received no gradient");
    CHECK_MATCHES(p.grad(), load<float>(model_dir + "grads/" + name + ".npy"), "grad " + name);
  }
}

TEST_CASE("golden: 10 AdamW steps on one batch (losses and final parameters)") {
  auto model = golden_model();
  const index_array tokens = load<std::int64_t>(model_dir + "tokens.npy");
  const index_array targets = load<std::int64_t>(model_dir + "targets.npy");
  nn::AdamW opt(model->parameters(), /*lr=*/1e-2, /*beta1=*/0.9, /*beta2=*/0.999, /*eps=*/1e-8,
                /*weight_decay=*/0.01);

  // As make_golden.py (and llm.c): the loss is recorded before each step's update.
  const xt::xarray<float> want_losses = load<float>(model_dir + "adamw_losses.npy");
  REQUIRE(want_losses.size() == 10);
  xt::xarray<float> losses = xt::zeros<float>({want_losses.size()});
  for (std::size_t step = 0; step < want_losses.size(); ++step) {
    opt.zero_grad();
    const Tensor loss = cross_entropy(model->forward(tokens), targets, -1);
    loss.backward();
    opt.step();
    losses(step) = loss.item();
  }
  CHECK(losses(9) < 0.5f * losses(0));  // the batch is being memorised: the steps did something
  CHECK_MATCHES(losses, want_losses, "AdamW losses");
  for (const auto& [name, p] : model->named_parameters())
    CHECK_MATCHES(p.value(), load<float>(model_dir + "params_after_adamw/" + name + ".npy"),
                  "after 10 AdamW steps: " + name);
}
