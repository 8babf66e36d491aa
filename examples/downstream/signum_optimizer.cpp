// signum: the sign of the momentum for hidden matrices (Bernstein et al. 2018, "signSGD", Algorithm 3), SGD with
// momentum for embeddings, the readout, gains and biases: an optimizer that treats parameters apart by their role,
// as Muon (Jordan et al. 2024) keeps its update for hidden matrices and leaves the rest to AdamW.
#include <memory>

#include "nn/optim.h"

namespace nn = xgrad::nn;

namespace {

class Signum : public nn::Optimizer {
 public:
  Signum(std::vector<nn::OptimizerParameter> params, double lr, double momentum, double weight_decay,
         bool decay_matrices_only)
      : Optimizer(std::move(params), lr, decay_matrices_only), momentum_(momentum), weight_decay_(weight_decay) {
    for (const xgrad::Tensor& p : params_) buffers_.emplace_back(xt::zeros<float>(p.value().shape()));
  }

  // m = momentum m + (1 - momentum) g; p -= lr_i (u + weight_decay_i p), u = sign(m) for a hidden matrix, else m.
  // lr_of and weight_decay_of carry muP's factors and --weight-decay-params to each parameter.
  void step() override {
    const auto beta = static_cast<float>(momentum_);
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (!params_[i].has_grad()) continue;
      const bool hidden = roles_[i] == nn::ParameterRole::hidden_matrix;
      const auto lr = static_cast<float>(lr_of(i)), decay = static_cast<float>(weight_decay_of(i, weight_decay_));
      float* w = params_[i].mutable_value().data();
      const float* g = params_[i].grad().data();
      float* m = buffers_[i].data();
      for (std::size_t j = 0; j < params_[i].numel(); ++j) {
        m[j] = beta * m[j] + (1 - beta) * g[j];
        const float update = hidden ? static_cast<float>((m[j] > 0) - (m[j] < 0)) : m[j];
        w[j] -= lr * (update + decay * w[j]);
      }
    }
  }

  nn::OptimizerState state() const override { return {{{"momentum_buffer", buffers_}}, 0}; }
  void load_state(const nn::OptimizerState& state) override {
    check_state("signum", state, {"momentum_buffer"});
    buffers_ = state.buffers.at("momentum_buffer");
  }
  std::vector<std::string> state_kinds() const override { return {"momentum_buffer"}; }

 private:
  double momentum_, weight_decay_;
  std::vector<xt::xarray<float>> buffers_;
};

nn::OptimizerEntry signum_entry() {
  nn::OptimizerEntry e;
  e.name = "signum";
  e.description =
      "sign of the momentum for hidden matrices (Bernstein et al. 2018, signSGD, Algorithm 3), SGD elsewhere";
  e.order = 1000;  // after the built-in optimizers in listings
  e.settings = {xgrad::number_setting("signum_momentum", 0.9, 0.0, 0.99, "decay rate of signum's momentum"),
                nn::weight_decay_setting(), nn::weight_decay_params_setting()};
  // mup_lr stays none: its two updates follow different columns of muP's table, so --parametrization mup is refused.
  e.build = [](std::vector<nn::OptimizerParameter> params, double lr,
               const xgrad::SettingValues& v) -> std::unique_ptr<nn::Optimizer> {
    return std::make_unique<Signum>(std::move(params), lr, v.get<double>("signum_momentum"),
                                    v.get<double>("weight_decay"), nn::decays_matrices_only(v));
  };
  return e;
}

const xgrad::Registration<nn::OptimizerEntry> registration{signum_entry()};

}  // namespace
