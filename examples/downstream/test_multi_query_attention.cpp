// multi_query through xgrad's attention-layer registry: its parameter shapes, its record for the saturation
// statistics, and the same function as the built-in multi-head attention whose W_k and W_v repeat one head's
// weights n_heads times (values, and gradients summed over the repeats), for the built-in attention is
// gradient-checked in float64 in xgrad's own tests.
#include <doctest/doctest.h>

#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "autograd/ops.h"
#include "autograd/random.h"
#include "nn/attention.h"
#include "nn/attention_layer.h"

using namespace xgrad;

namespace {

constexpr std::size_t kDModel = 8, kHeads = 2, kDk = 3, kT = 5;

nn::AttentionLayerContext context(const std::string& scale) {
  nn::AttentionLayerContext c;
  c.d_model = kDModel;
  c.n_heads = kHeads;
  c.d_k = kDk;
  c.max_seq_len = kT;
  c.scale = scale;
  return c;
}

Tensor parameter(nn::Module& m, const std::string& name) {
  for (const auto& [n, p] : m.named_parameters())
    if (n == name) return p;
  FAIL("no parameter " << name);
  return Tensor();
}

Tensor normal_input(std::uint64_t seed) {
  Generator gen(seed);
  xt::xarray<float> x = xt::xarray<float>::from_shape({2, kT, kDModel});
  for (auto& v : x) v = static_cast<float>(gen.normal());
  return Tensor(x, true);
}

// [d_model, d_k] repeated n_heads times along the columns: the multi-head W_k whose every head is this one.
xt::xarray<float> repeat_heads(const xt::xarray<float>& w) {
  xt::xarray<float> out = xt::xarray<float>::from_shape({kDModel, kHeads * kDk});
  for (std::size_t h = 0; h < kHeads; ++h) xt::view(out, xt::all(), xt::range(h * kDk, (h + 1) * kDk)) = w;
  return out;
}

xt::xarray<float> sum_heads(const xt::xarray<float>& g) {
  xt::xarray<float> out = xt::zeros<float>({kDModel, kDk});
  for (std::size_t h = 0; h < kHeads; ++h) out += xt::view(g, xt::all(), xt::range(h * kDk, (h + 1) * kDk));
  return out;
}

}  // namespace

TEST_CASE("multi_query: one key and one value head shared by the query heads") {
  Generator gen(1);
  auto layer = nn::make_attention_layer("multi_query", context("sqrt_dk"), gen);
  CHECK(layer->n_heads() == kHeads);
  CHECK(parameter(*layer, "w_q.weight").shape() == shape_t{kDModel, kHeads * kDk});
  CHECK(parameter(*layer, "w_k.weight").shape() == shape_t{kDModel, kDk});
  CHECK(parameter(*layer, "w_v.weight").shape() == shape_t{kDModel, kDk});
  layer->record_attention = true;
  layer->forward(normal_input(2));
  CHECK(layer->last.probs.shape() == shape_t{2, kHeads, kT, kT});
  CHECK(layer->last.scores.shape() == shape_t{2, kHeads, kT, kT});
  CHECK(layer->last.q.shape() == shape_t{2, kHeads, kT, kDk});
  CHECK(layer->last.k.shape() == shape_t{2, kHeads, kT, kDk});
}

TEST_CASE("multi_query equals multi-head attention with every key and value head the same, values and gradients") {
  for (const std::string scale : {"sqrt_dk", "qk_layernorm"}) {
    INFO("scale " << scale);
    Generator gen_a(3), gen_b(4);
    auto mine = nn::make_attention_layer("multi_query", context(scale), gen_a);
    auto reference = nn::make_attention_layer("multi_head", context(scale), gen_b);
    for (const char* name : {"w_q.weight", "w_o.weight"})
      parameter(*reference, name).mutable_value() = parameter(*mine, name).value();
    for (const char* name : {"w_k.weight", "w_v.weight"})
      parameter(*reference, name).mutable_value() = repeat_heads(parameter(*mine, name).value());

    const Tensor x = normal_input(5);
    const Tensor y_mine = mine->forward(x);
    sum(mul(y_mine, y_mine)).backward();
    const xt::xarray<float> x_grad = x.grad();
    x.zero_grad();
    const Tensor y_reference = reference->forward(x);
    CHECK(xt::allclose(y_reference.value(), y_mine.value(), 1e-5, 1e-6));
    sum(mul(y_reference, y_reference)).backward();
    CHECK(xt::allclose(x.grad(), x_grad, 1e-4, 1e-5));
    for (const char* name : {"w_q.weight", "w_o.weight"})
      CHECK(xt::allclose(parameter(*reference, name).grad(), parameter(*mine, name).grad(), 1e-4, 1e-5));
    for (const char* name : {"w_k.weight", "w_v.weight"})
      CHECK(xt::allclose(sum_heads(parameter(*reference, name).grad()), parameter(*mine, name).grad(), 1e-4, 1e-5));
  }
}
