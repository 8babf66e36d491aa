// The lower bound on attention entropy of Zhai et al. 2023 ("Stabilizing Transformer Training by Preventing Attention
// Entropy Collapse", section 3), which the collapse preset draws against the logged spectral norm.
#pragma once

#include <cmath>

namespace xgrad::nn {

/// The least entropy (nats) of softmax(a) over T >= 2 logits whose vector a has L2 norm at most sigma >= 0:
///   log(1 + (T-1) b) + sigma sqrt(T (T-1)) b / (1 + (T-1) b),  b = exp(-sigma sqrt(T / (T-1))),
/// attained by a centred vector with one logit above T - 1 equal others (the largest gap between the top logit and
/// the rest that the norm allows, sigma sqrt(T / (T-1))). Zhai et al. state it with sigma the spectral norm of
/// W_K W_Q^T, for inputs whose scale makes that norm bound the logits' (their bound decreases exponentially in
/// sigma). ln T at sigma = 0; 0 for T < 2.
inline double entropy_lower_bound(double sigma, double T) {
  if (T < 2) return 0;
  const double b = std::exp(-sigma * std::sqrt(T / (T - 1)));
  return std::log1p((T - 1) * b) + sigma * std::sqrt(T * (T - 1)) * b / (1 + (T - 1) * b);
}

}  // namespace xgrad::nn
