// dk_power through xgrad's registry, as the trainer builds it: its setting and multiplier, a float64 gradient check
// of attention through its hooks, the fused attention equal to the composed reference, and sqrt_dk at p = 0.5.
#include <doctest/doctest.h>

#include <cmath>

#include <xtensor/xmath.hpp>

#include "autograd/gradcheck.h"
#include "autograd/random.h"
#include "nn/attention.h"
#include "nn/scaling.h"

using namespace xgrad;

namespace {

Tensor normal_input(const shape_t& shape, std::uint64_t seed) {
  Generator gen(seed);
  xt::xarray<float> x = xt::xarray<float>::from_shape(shape);
  for (auto& v : x) v = static_cast<float>(gen.normal());
  return Tensor(x);
}

DTensor to_double(const Tensor& t) { return DTensor(xt::xarray<double>(xt::cast<double>(t.value())), true); }

}  // namespace

TEST_CASE("dk_power is registered with its exponent setting") {
  const nn::ScalingEntry* entry = Registry<nn::ScalingEntry>::instance().find("dk_power");
  REQUIRE(entry != nullptr);
  REQUIRE(entry->settings.size() == 1);
  CHECK(entry->settings[0].key == "dk_power_exponent");
  CHECK(entry->settings[0].default_value.get<double>() == 0.75);
}

TEST_CASE("dk_power multiplies q·k by d_k^-p") {
  CHECK(nn::make_scaling("dk_power", 1, 64, 16, true)->multiplier() == doctest::Approx(std::pow(64.0, -0.75)));
  const SettingValues p1(nlohmann::json{{"dk_power_exponent", 1.0}});
  CHECK(nn::make_scaling("dk_power", 2, 16, 16, true, p1)->multiplier() == doctest::Approx(1.0 / 16));
}

TEST_CASE("dk_power: float64 gradient check of attention through its hooks; fused equals composed") {
  Generator gen(3);
  nn::MultiHeadAttention attn(6, 2, "dk_power", true, gen, /*max_seq_len=*/5, /*init_gain=*/1.0, /*d_k=*/3);
  const Tensor x = normal_input({2, 5, 6}, 4);
  const std::vector<DTensor> inputs{to_double(x), to_double(attn.w_q->weight), to_double(attn.w_k->weight),
                                    to_double(attn.w_v->weight), to_double(attn.w_o->weight)};
  const GradcheckResult result = gradcheck(
      [&](const std::vector<DTensor>& in) {
        return nn::multi_head_attention_reference(in[0], in[1], in[2], in[3], in[4], *attn.scaling, {}, 2, true);
      },
      inputs);
  INFO(result.message);
  CHECK(result.ok);
  CHECK(xt::allclose(attn.forward(x).value(), attn.forward_reference(x).value(), 1e-5, 1e-6));
}

TEST_CASE("dk_power at exponent 0.5 is sqrt_dk") {
  const SettingValues half(nlohmann::json{{"dk_power_exponent", 0.5}});
  Generator gen_a(7), gen_b(7);
  nn::MultiHeadAttention mine(16, 2, "dk_power", true, gen_a, 8, 1.0, 0, half);
  nn::MultiHeadAttention reference(16, 2, "sqrt_dk", true, gen_b, 8);
  const Tensor x = normal_input({2, 8, 16}, 8);
  CHECK(xt::allclose(mine.forward(x).value(), reference.forward(x).value(), 1e-6, 1e-6));
}
