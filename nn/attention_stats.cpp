#include "nn/attention_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace xgrad::nn {

double percentile(std::vector<double>& values, double q) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (pos - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

template <class T>
double qk_spectral_norm(const xt::xarray<T>& w_q, const xt::xarray<T>& w_k, std::size_t n_heads, std::size_t head,
                        std::size_t max_iterations, double tolerance) {
  if (w_q.dimension() != 2 || w_q.shape() != w_k.shape() || n_heads == 0 || w_q.shape(1) % n_heads != 0 ||
      head >= n_heads)
    throw std::invalid_argument(
        "qk_spectral_norm: W_q and W_k must share one [d_model, n_heads * d_k] shape, with "
        "head < n_heads");
  const std::size_t d = w_q.shape(0), cols = w_q.shape(1), d_k = cols / n_heads, c0 = head * d_k;
  // Head h's columns of row i: w[i * cols + c0 + c].
  auto at = [cols, c0](const xt::xarray<T>& w, std::size_t i, std::size_t c) {
    return static_cast<double>(w.data()[i * cols + c0 + c]);
  };
  // A fixed start vector that no weight matrix is likely to be orthogonal to: a sequence of the golden ratio's
  // fractional parts, centred.
  std::vector<double> v(d), a(d_k), u(d), b(d_k);
  for (std::size_t i = 0; i < d; ++i) v[i] = std::fmod(0.6180339887498949 * static_cast<double>(i + 1), 1.0) - 0.5;
  auto normalise = [](std::vector<double>& x) {
    double n2 = 0;
    for (double e : x) n2 += e * e;
    const double n = std::sqrt(n2);
    if (n > 0)
      for (double& e : x) e /= n;
    return n;
  };
  // out = outer (inner^T in), through the d_k-vector mid.
  auto multiply = [&](const xt::xarray<T>& outer, const xt::xarray<T>& inner, const std::vector<double>& in,
                      std::vector<double>& mid, std::vector<double>& out) {
    std::fill(mid.begin(), mid.end(), 0.0);
    for (std::size_t i = 0; i < d; ++i)
      for (std::size_t c = 0; c < d_k; ++c) mid[c] += at(inner, i, c) * in[i];
    for (std::size_t i = 0; i < d; ++i) {
      double s = 0;
      for (std::size_t c = 0; c < d_k; ++c) s += at(outer, i, c) * mid[c];
      out[i] = s;
    }
  };
  normalise(v);
  double sigma = 0;
  for (std::size_t it = 0; it < std::max<std::size_t>(max_iterations, 1); ++it) {
    multiply(w_q, w_k, v, a, u);  // u = M v = W_q (W_k^T v)
    const double next = normalise(u);
    if (next == 0) return 0.0;  // v in M's null space: M is zero (the start vector is generic)
    const bool converged = it > 0 && next - sigma <= tolerance * next;
    sigma = next;
    if (converged) break;
    multiply(w_k, w_q, u, b, v);  // v = M^T u = W_k (W_q^T u), normalised
    if (normalise(v) == 0) return sigma;
  }
  return sigma;
}

template double qk_spectral_norm<float>(const xt::xarray<float>&, const xt::xarray<float>&, std::size_t, std::size_t,
                                        std::size_t, double);
template double qk_spectral_norm<double>(const xt::xarray<double>&, const xt::xarray<double>&, std::size_t, std::size_t,
                                         std::size_t, double);

std::vector<AttentionStats> attention_stats(const xt::xarray<float>& scores, const xt::xarray<float>& probs,
                                            const xt::xarray<float>* score_grad, const xt::xarray<bool>* query_mask,
                                            const std::vector<std::size_t>* query_positions) {
  if (scores.dimension() != 4 || scores.shape(2) != (query_positions ? query_positions->size() : scores.shape(3)) ||
      probs.shape() != scores.shape() || (score_grad && score_grad->shape() != scores.shape()))
    throw std::invalid_argument(
        "attention_stats: scores, probs and score_grad must share one [B, H, Tq, T] shape, "
        "Tq = T or the number of query positions");
  const std::size_t B = scores.shape(0), H = scores.shape(1), Tq = scores.shape(2), T = scores.shape(3);
  if (query_positions)
    for (std::size_t p : *query_positions)
      if (p >= T) throw std::invalid_argument("attention_stats: query position " + std::to_string(p) + " >= T");
  if (query_mask && (query_mask->dimension() != 2 || query_mask->shape(0) != B || query_mask->shape(1) != T))
    throw std::invalid_argument("attention_stats: query_mask must be [B, T] = [" + std::to_string(B) + ", " +
                                std::to_string(T) + "]");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<AttentionStats> out(H);
  for (std::size_t h = 0; h < H; ++h) {
    AttentionStats& s = out[h];
    double sum = 0, sum2 = 0, max_abs = 0, entropy_sum = 0, entropy_min = INFINITY, max_prob_sum = 0;
    std::size_t n_entries = 0, saturated = 0;
    std::vector<double> grad_norms;
    s.max_logit = -INFINITY;
    for (std::size_t b = 0; b < B; ++b) {
      for (std::size_t i = 0; i < Tq; ++i) {
        const float* row_scores = scores.data() + ((b * H + h) * Tq + i) * T;
        s.max_logit = std::max(s.max_logit, static_cast<double>(*std::max_element(row_scores, row_scores + T)));
        if (query_mask && !(*query_mask)(b, query_positions ? (*query_positions)[i] : i)) continue;
        const std::size_t row = ((b * H + h) * Tq + i) * T;
        const float* sc = scores.data() + row;
        const float* p = probs.data() + row;
        std::size_t keys = 0;
        for (std::size_t j = 0; j < T; ++j) keys += std::isfinite(sc[j]) ? 1 : 0;
        if (keys < 2) continue;
        ++s.n_queries;
        double entropy = 0, max_p = 0;
        for (std::size_t j = 0; j < T; ++j) {
          if (!std::isfinite(sc[j])) continue;
          sum += sc[j];
          sum2 += static_cast<double>(sc[j]) * sc[j];
          max_abs = std::max(max_abs, std::abs(static_cast<double>(sc[j])));
          ++n_entries;
          if (p[j] > 0) entropy -= p[j] * std::log(static_cast<double>(p[j]));
          max_p = std::max(max_p, static_cast<double>(p[j]));
        }
        entropy_sum += entropy;
        entropy_min = std::min(entropy_min, entropy);
        max_prob_sum += max_p;
        saturated += max_p > 0.99 ? 1 : 0;
        if (score_grad) {
          const float* g = score_grad->data() + row;
          double g2 = 0;
          for (std::size_t j = 0; j < T; ++j) g2 += static_cast<double>(g[j]) * g[j];
          grad_norms.push_back(std::sqrt(g2));
        }
      }
    }
    if (s.max_logit == -INFINITY) s.max_logit = nan;  // no query recorded
    if (s.n_queries == 0) {
      s.score_std = s.score_max_abs = s.qk_spectral_norm = s.entropy_mean = s.entropy_min = s.max_prob_mean = nan;
      s.frac_max_prob_above_099 = s.score_grad_p10 = s.score_grad_median = s.score_grad_p90 = nan;
      continue;
    }
    const double n = static_cast<double>(n_entries), q = static_cast<double>(s.n_queries);
    const double mean = sum / n;
    s.score_std = std::sqrt(std::max(0.0, sum2 / n - mean * mean));
    s.score_max_abs = max_abs;
    s.qk_spectral_norm = nan;
    s.entropy_mean = entropy_sum / q;
    s.entropy_min = entropy_min;
    s.max_prob_mean = max_prob_sum / q;
    s.frac_max_prob_above_099 = static_cast<double>(saturated) / q;
    s.score_grad_p10 = score_grad ? percentile(grad_norms, 0.1) : nan;
    s.score_grad_median = score_grad ? percentile(grad_norms, 0.5) : nan;
    s.score_grad_p90 = score_grad ? percentile(grad_norms, 0.9) : nan;
  }
  return out;
}

}  // namespace xgrad::nn
