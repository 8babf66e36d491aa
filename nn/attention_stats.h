// Saturation statistics of attention, measured beside the graph from what an attention layer recorded
// (AttentionRecord): how large the scores are, how peaked the weights are, and how much gradient the softmax
// passes back to the scores.
#pragma once

#include <cstddef>
#include <vector>

#include <xtensor/xarray.hpp>

#include "nn/attention_stats_fields.h"

namespace xgrad::nn {

/// Per-head statistics. scores: [B, H, T, T] scaled scores, -inf where masked (the softmax input); probs: the
/// softmax of scores, same shape; score_grad: the loss gradient with respect to scores, same shape, or null (the
/// gradient fields are then NaN); query_mask: [B, T], true for the query positions to include, or null for all.
/// query_positions: null when row i is position i; otherwise the arrays are [B, H, Tq, T] (a record of forward_at,
/// AttentionRecord::query_positions) and row i is position query_positions[i] (query_mask still indexes positions).
/// A query with fewer than 2 keys it may attend to (the first position under a causal mask) is skipped: its
/// softmax is 1 by construction and would read as saturated. Percentiles interpolate linearly between ranks (as
/// numpy.percentile). Returns one entry per head. Throws std::invalid_argument on mismatched shapes.
std::vector<AttentionStats> attention_stats(const xt::xarray<float>& scores, const xt::xarray<float>& probs,
                                            const xt::xarray<float>* score_grad, const xt::xarray<bool>* query_mask,
                                            const std::vector<std::size_t>* query_positions = nullptr);

/// The largest singular value of one head's score matrix M = W_q,h W_k,h^T ([d_model, d_model]; the head's
/// unscaled score of inputs x_i, x_j is x_i^T M x_j), by power iteration on M^T M in double: v <- M^T M v / |.|
/// from a fixed start vector, with sigma = |M v| for unit v, until sigma changes by less than `tolerance` relative
/// to itself or after `max_iterations`. The estimate approaches the norm from below; it is a deterministic function
/// of the weights (no state carried between calls), so a resumed run logs what an uninterrupted one logs.
/// w_q, w_k: [d_model, n_heads * d_k] (the layout of MultiHeadAttention's W_q, W_k); head in [0, n_heads). Products
/// are formed as W_q (W_k^T v), never M itself: O(d_model d_k) per iteration. Throws std::invalid_argument on
/// mismatched shapes, n_heads not dividing the columns, or head >= n_heads.
template <class T>
double qk_spectral_norm(const xt::xarray<T>& w_q, const xt::xarray<T>& w_k, std::size_t n_heads, std::size_t head,
                        std::size_t max_iterations = 100, double tolerance = 1e-7);

/// Linear-interpolation percentile (q in [0, 1]) of `values` (reordered in place); NaN for an empty vector.
double percentile(std::vector<double>& values, double q);

}  // namespace xgrad::nn
