#include "nn/init.h"

#include <cmath>

namespace xgrad::nn {

void normal_(Tensor& t, double std, Generator& gen) {
  auto& v = t.mutable_value();
  for (std::size_t i = 0; i < v.size(); ++i) v.data()[i] = static_cast<float>(std * gen.normal());
}

void lecun_normal_(Tensor& t, std::size_t fan_in, Generator& gen) {
  if (fan_in == 0) throw Error("lecun_normal_: fan_in must be > 0");
  normal_(t, 1.0 / std::sqrt(static_cast<double>(fan_in)), gen);
}

}  // namespace xgrad::nn
