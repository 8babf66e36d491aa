#include "nn/constant_scaling.h"

#include <cmath>
#include <memory>
#include <stdexcept>

namespace xgrad::nn {

ScalingEntry constant_scaling(std::string name, std::string description, int order,
                              std::function<double(const ScalingContext&)> multiplier, PlotStyle style,
                              std::vector<Setting> settings) {
  auto build = [name,
                multiplier = std::move(multiplier)](const ScalingContext& c) -> std::shared_ptr<AttentionScaling> {
    const double m = multiplier(c);
    if (!(std::isfinite(m) && m > 0))
      throw std::invalid_argument("scaling " + name + ": its multiplier for d_k = " + std::to_string(c.d_k) + " is " +
                                  std::to_string(m) + ", not a finite number > 0");
    return std::make_shared<ConstantScaling>(m);
  };
  return scaling_entry(std::move(name), std::move(description), order, std::move(build), std::move(style),
                       std::move(settings));
}

}  // namespace xgrad::nn
