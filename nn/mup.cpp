#include "nn/mup.h"

#include <cmath>

namespace xgrad::nn {

namespace {

// A parameter's (fan_in, fan_out) in xgrad's layouts: Linear weight [in, out], Embedding [num, dim] (one-hot in,
// dim out), a vector [n] has fan_in 1 and fan_out n, a scalar 1 and 1.
std::pair<double, double> fans(const shape_t& shape) {
  if (shape.empty()) return {1, 1};
  if (shape.size() == 1) return {1, static_cast<double>(shape[0])};
  double out = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) out *= static_cast<double>(shape[i]);
  return {static_cast<double>(shape[0]), out};
}

}  // namespace

const char* mup_class_name(MupClass c) {
  switch (c) {
    case MupClass::finite:
      return "finite";
    case MupClass::vector:
      return "vector";
    case MupClass::output:
      return "output";
    case MupClass::hidden:
      return "hidden";
  }
  return "?";
}

std::vector<double> MupPlan::lr_multipliers(MupLearningRates rule) const {
  if (rule == MupLearningRates::none) throw Error("muP: no learning-rate factors without a column of Table 3");
  std::vector<double> out;
  for (const MupParameter& p : parameters) out.push_back(rule == MupLearningRates::sgd ? p.sgd_lr : p.adam_lr);
  return out;
}

std::vector<double> MupPlan::lr_multipliers(const std::string& optimizer) const {
  const OptimizerEntry* entry = OptimizerRegistry::instance().find(optimizer);
  const MupLearningRates rule = entry ? entry->mup_lr : MupLearningRates::none;
  if (rule == MupLearningRates::none)
    throw Error(
        "muP: learning-rate factors are defined for adamw and sgd (Tensor Programs V, Table 3) and for "
        "optimizers whose entry declares which of the two columns they follow (mup_lr), not '" +
        optimizer + "'");
  return lr_multipliers(rule);
}

MupPlan mup_plan(const ModelConfig& config, std::size_t base_width) {
  if (base_width == 0) throw Error("muP: base_width must be > 0");
  ModelConfig sp = config;
  sp.parametrization = Parametrization::sp;
  ModelConfig base_config = sp;
  base_config.d_model = base_width;
  // d_k and d_ff scale with d_model: at the base width they are d_k · base_width / d_model (d_ff likewise).
  auto at_base = [&](std::size_t size, const char* what) -> std::size_t {
    if (size == 0) return 0;  // resolved from d_model by the model itself
    if (size * base_width % config.d_model != 0)
      throw Error(std::string("muP: ") + what + " scales with d_model, so " + what +
                  " x base_width / d_model must be "
                  "whole; got " +
                  std::to_string(size) + " x " + std::to_string(base_width) + " / " + std::to_string(config.d_model));
    return size * base_width / config.d_model;
  };
  base_config.d_k = at_base(config.d_k, "d_k");
  base_config.d_ff = at_base(config.d_ff, "d_ff");
  const AttentionModel model(sp, 0), base(base_config, 0);
  const auto named = model.named_parameters(), base_named = base.named_parameters();
  if (named.size() != base_named.size())
    throw Error("muP: the model at base width " + std::to_string(base_width) + " has other parameters");
  MupPlan plan;
  plan.width_ratio = static_cast<double>(config.d_model) / static_cast<double>(base_width);
  for (std::size_t i = 0; i < named.size(); ++i) {
    const auto [fan_in, fan_out] = fans(named[i].second.shape());
    const auto [base_in, base_out] = fans(base_named[i].second.shape());
    MupParameter p;
    p.name = named[i].first;
    p.fan_in_ratio = fan_in / base_in;
    p.fan_out_ratio = fan_out / base_out;
    const bool in_width = fan_in != base_in, out_width = fan_out != base_out;
    // At the base width nothing differs: every parameter reads as finite, and every factor is 1 (muP = SP there).
    p.cls = in_width && out_width ? MupClass::hidden
            : in_width            ? MupClass::output
            : out_width           ? MupClass::vector
                                  : MupClass::finite;
    switch (p.cls) {
      case MupClass::finite:
        break;
      case MupClass::vector:
        p.sgd_lr = p.fan_out_ratio;
        break;
      case MupClass::output:
        if (p.name != "head.weight")
          throw Error("muP: " + p.name + " has a width-sized fan_in only, like the readout, but no output multiplier");
        p.init_std = std::sqrt(p.fan_in_ratio);
        p.sgd_lr = p.fan_in_ratio;
        plan.readout_multiplier = 1 / p.fan_in_ratio;
        break;
      case MupClass::hidden:
        p.adam_lr = 1 / p.fan_in_ratio;
        p.sgd_lr = p.fan_out_ratio / p.fan_in_ratio;
        break;
    }
    plan.parameters.push_back(p);
  }
  return plan;
}

}  // namespace xgrad::nn
