// dk_power through xgrad's registry, as the trainer builds it: its multiplier, its setting, and attention that equals
// the built-in sqrt_dk at exponent 0.5. The scaling only multiplies q·k, a case the fused attention of
// nn::MultiHeadAttention is gradient-checked for in xgrad's own tests, so no new derivative needs checking here.
#include <doctest/doctest.h>

#include <cmath>

#include <xtensor/xmath.hpp>

#include "autograd/random.h"
#include "nn/attention.h"
#include "nn/scaling.h"

using namespace xgrad;

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

TEST_CASE("dk_power at exponent 0.5 is sqrt_dk") {
  const SettingValues half(nlohmann::json{{"dk_power_exponent", 0.5}});
  Generator gen_a(7), gen_b(7), gen_x(8);
  nn::MultiHeadAttention mine(16, 2, "dk_power", true, gen_a, 8, 1.0, 0, half);
  nn::MultiHeadAttention reference(16, 2, "sqrt_dk", true, gen_b, 8);
  xt::xarray<float> x = xt::xarray<float>::from_shape({2, 8, 16});
  for (auto& v : x) v = static_cast<float>(gen_x.normal());
  const Tensor input(x);
  CHECK(xt::allclose(mine.forward(input).value(), reference.forward(input).value(), 1e-6, 1e-6));
}
