// signum through xgrad's registry, as the trainer builds it: hidden matrices step by the sign of the momentum, the
// other roles by the momentum itself, and --weight-decay-params matrices spares gains and biases.
#include <doctest/doctest.h>

#include "nn/optim.h"

using namespace xgrad;

namespace {

// Ones with gradient `g` everywhere, named as a model names them (their roles follow from the names).
std::vector<nn::OptimizerParameter> parameters_with_gradient(float g) {
  std::vector<std::pair<std::string, Tensor>> named;
  for (const char* name : {"blocks.0.attn.w_q.weight", "tok_emb.weight", "ln_f.weight"}) {
    Tensor p(xt::ones<float>(std::string(name) == "ln_f.weight" ? shape_t{3} : shape_t{3, 3}), true);
    p.node()->grad = xt::xarray<float>(xt::ones<float>(p.value().shape()) * g);
    p.node()->has_grad = true;
    named.emplace_back(name, p);
  }
  return nn::optimizer_parameters(named);
}

}  // namespace

TEST_CASE("signum: a hidden matrix moves by lr (the sign), an embedding and a gain by lr x gradient") {
  const auto params = parameters_with_gradient(0.25f);
  auto opt = nn::make_optimizer("signum", params, 0.1, SettingValues(nlohmann::json{{"signum_momentum", 0.0}}));
  CHECK(opt->roles() == std::vector<nn::ParameterRole>{nn::ParameterRole::hidden_matrix, nn::ParameterRole::embedding,
                                                       nn::ParameterRole::gain});
  opt->step();
  CHECK(params[0].tensor.value()(0, 0) == doctest::Approx(1 - 0.1));
  CHECK(params[1].tensor.value()(0, 0) == doctest::Approx(1 - 0.1 * 0.25));
  CHECK(params[2].tensor.value()(0) == doctest::Approx(1 - 0.1 * 0.25));
}

TEST_CASE("signum: weight_decay_params matrices decays hidden matrices and embeddings, not gains") {
  const auto params = parameters_with_gradient(0.0f);  // a step changes them by their weight decay alone
  auto opt = nn::make_optimizer(
      "signum", params, 0.1, SettingValues(nlohmann::json{{"weight_decay", 0.5}, {"weight_decay_params", "matrices"}}));
  opt->step();
  CHECK(params[0].tensor.value()(0, 0) == doctest::Approx(1 - 0.1 * 0.5));
  CHECK(params[1].tensor.value()(0, 0) == doctest::Approx(1 - 0.1 * 0.5));
  CHECK(params[2].tensor.value()(0) == 1.0f);
}
