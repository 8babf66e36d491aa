// Seeded random initialisation. Every draw comes from an explicit Generator (autograd/random.h), so equal seeds
// give equal weights on every platform.
#pragma once

#include "autograd/random.h"
#include "autograd/tensor.h"

namespace xgrad::nn {

/// Fills `t` with N(0, std^2) draws.
void normal_(Tensor& t, double std, Generator& gen);
/// LeCun normal: N(0, 1/fan_in) (LeCun et al. 1998, "Efficient BackProp", sec. 4.6). For a Linear weight
/// [in_features, out_features], fan_in = in_features, so each output has unit variance for unit-variance inputs.
void lecun_normal_(Tensor& t, std::size_t fan_in, Generator& gen);

}  // namespace xgrad::nn
