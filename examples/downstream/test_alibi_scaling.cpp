// alibi through xgrad's registry: the bias it adds (per head, linear in the distance), a float64 gradient check of
// attention through its hooks, and the fused attention equal to the composed reference, values and gradients.
#include <doctest/doctest.h>

#include <cmath>

#include <xtensor/xmath.hpp>

#include "autograd/gradcheck.h"
#include "autograd/random.h"
#include "nn/attention.h"
#include "nn/scaling.h"

using namespace xgrad;

namespace {

Tensor normal_tensor(const shape_t& shape, std::uint64_t seed, bool requires_grad = false) {
  Generator gen(seed);
  xt::xarray<float> x = xt::xarray<float>::from_shape(shape);
  for (auto& v : x) v = static_cast<float>(gen.normal());
  return Tensor(x, requires_grad);
}

DTensor as_double(const Tensor& t) { return DTensor(xt::xarray<double>(xt::cast<double>(t.value())), true); }

}  // namespace

TEST_CASE("alibi: b[h, i, j] = -m_h |i - j| with slopes 2^(-8(h+1)/n_heads), on top of 1/sqrt(d_k)") {
  const auto scaling = nn::make_scaling("alibi", 4, 16, 8, true);
  CHECK(scaling->multiplier() == doctest::Approx(0.25));
  REQUIRE(scaling->adds_score_bias());
  const xt::xarray<float> b = scaling->score_bias(3);
  REQUIRE(b.shape() == xt::xarray<float>::shape_type{4, 3, 3});
  CHECK(b(0, 2, 0) == doctest::Approx(-2 * std::exp2(-2.0)));  // head 0: slope 2^-2, distance 2
  CHECK(b(3, 1, 0) == doctest::Approx(-std::exp2(-8.0)));      // head 3: slope 2^-8, distance 1
  CHECK(b(1, 1, 1) == 0.0f);                                   // a query's own key is not penalised
  CHECK(b(2, 0, 2) == b(2, 2, 0));                             // without the mask, |i - j|
}

TEST_CASE("alibi: float64 gradient check of attention through its hooks; fused equals composed") {
  for (const bool causal : {true, false}) {
    const char* masking = causal ? "causal" : "not causal";
    INFO(masking);
    Generator gen(3);
    nn::MultiHeadAttention attn(6, 2, "alibi", causal, gen, /*max_seq_len=*/5, /*init_gain=*/1.0, /*d_k=*/3);
    const Tensor x = normal_tensor({2, 5, 6}, 4, true);
    const std::vector<DTensor> inputs{as_double(x), as_double(attn.w_q->weight), as_double(attn.w_k->weight),
                                      as_double(attn.w_v->weight), as_double(attn.w_o->weight)};
    // The reference attention from autograd ops, differentiated in float64 against finite differences.
    const auto reference_attention = [&](const std::vector<DTensor>& in) {
      return nn::multi_head_attention_reference(in[0], in[1], in[2], in[3], in[4], *attn.scaling, {}, 2, causal);
    };
    const GradcheckResult checked = gradcheck(reference_attention, inputs);
    CHECK_MESSAGE(checked.ok, checked.message);
    const Tensor fused = attn.forward(x);
    sum(fused * fused).backward();
    const xt::xarray<float> fused_grad = x.grad();
    x.zero_grad();
    const Tensor reference = attn.forward_reference(x);
    sum(reference * reference).backward();
    // Float rounding of the same function computed in two orders (values O(1)).
    CHECK(xt::allclose(fused.value(), reference.value(), 1e-5, 1e-6));
    CHECK(xt::allclose(fused_grad, x.grad(), 1e-4, 1e-5));
  }
}
