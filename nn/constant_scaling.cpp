#include "nn/constant_scaling.h"

#include <cmath>
#include <memory>
#include <stdexcept>

namespace xgrad::nn {

ScalingEntry constant_scaling(std::string name, std::string description, int order,
                              std::function<double(const ScalingContext&)> multiplier, PlotStyle style,
                              std::vector<Setting> settings) {
  ScalingEntry e;
  e.name = std::move(name);
  e.description = std::move(description);
  e.order = order;
  e.settings = std::move(settings);
  e.colour = std::move(style.colour);
  e.dash = std::move(style.dash);
  e.build = [name = e.name, multiplier = std::move(multiplier)](const ScalingContext& c) {
    const double m = multiplier(c);
    if (!(std::isfinite(m) && m > 0))
      throw std::invalid_argument("scaling " + name + ": its multiplier for d_k = " + std::to_string(c.d_k) + " is " +
                                  std::to_string(m) + ", not a finite number > 0");
    return std::make_shared<ConstantScaling>(m);
  };
  return e;
}

}  // namespace xgrad::nn
