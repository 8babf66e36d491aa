// The measurements of `xgrad explain`: the first layer's attention at initialisation on one batch of the task, per
// head size and scaling; and the softmax of normal scores of a given spread (Monte Carlo), the points' curve.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "train/config.h"

namespace xgrad::report {

/// Of softmax weights p over n >= 1 keys: entropy (nats), the largest weight, and the Frobenius norm of the Jacobian
/// diag(p) - p p^T, sqrt(sum p^2 - 2 sum p^3 + (sum p^2)^2) (its squared entries summed).
struct SoftmaxRow {
  double entropy = 0, max_prob = 0, jacobian_norm = 0;
  SoftmaxRow& operator+=(const SoftmaxRow& r) {
    entropy += r.entropy;
    max_prob += r.max_prob;
    jacobian_norm += r.jacobian_norm;
    return *this;
  }
};
SoftmaxRow softmax_row(const double* p, std::size_t n);

/// The std of multiplier·q·k for d_k independent zero-mean components (Vaswani et al. 2017, footnote 4).
double theory_score_std(std::size_t d_k, double q_std, double k_std, double multiplier);

/// E[softmax_row(softmax(sigma z))], z ~ N(0, I_n), at each sigma of `stds` over about max_rows rows whose n cycle
/// through key_counts; the same z at every sigma. Throws std::invalid_argument for no count or a count below 1.
struct SoftmaxCurves {
  std::vector<double> std;  // sigma, as given
  std::vector<double> entropy, max_prob, jacobian_norm;
};
SoftmaxCurves softmax_curves(const std::vector<std::size_t>& key_counts, const std::vector<double>& stds,
                             std::uint64_t seed, std::size_t max_rows = 4000);

inline constexpr std::size_t kMaxHeatmapPositions = 64, kMaxSortedWeights = 256;

/// The first attention layer of one (d_k, scale) at initialisation, over the queries with >= 2 visible keys (a lone
/// key's weight is 1 by construction); scores as softmax takes them, masked keys excluded.
struct ArmMeasurement {
  std::size_t d_k = 0;
  std::string scale;
  double q_std = 0, k_std = 0;           // std of the q and k components as they enter q·k
  double multiplier = 1;                 // the scaling's factor on q·k (AttentionLayer::effective_multiplier)
  double theory_std = 0;                 // sqrt(d_k) q_std k_std multiplier (Vaswani et al. 2017, footnote 4)
  double score_mean = 0, score_std = 0;  // over every visible score of every query
  double entropy_mean = 0, max_prob_mean = 0, jacobian_norm_mean = 0;    // means over queries (softmax_row)
  double saturated_share = 0;                                            // queries whose largest weight exceeds 0.99
  double loss = 0;                                                       // the batch's loss at initialisation, nats
  double score_grad_p10 = 0, score_grad_median = 0, score_grad_p90 = 0;  // over queries of ‖dLoss/d(score row)‖
  double grad_norm_w_q = 0, grad_norm_w_k = 0;  // ‖dLoss/dW‖ over every layer's attn.w_q.weight (w_k), L2
  std::size_t n_queries = 0;
  // Whether a peak is earned: of the saturated queries whose answer is a key, the share peaked on it, and chance's.
  std::size_t n_answerable = 0, n_answerable_saturated = 0;
  double earned_share = 0, chance_share = 0;  // NaN when no such query (or the task names no key)
  // The standard error of earned_share - chance_share, cluster-robust over (head, query token): those share q.
  double earned_se = 0;
  std::size_t n_earned_clusters = 0;         // the groups
  std::size_t seq_len = 0;                   // keys per sequence, T
  std::vector<double> scores;                // visible scores for the histogram (every k-th of more than 200,000)
  std::vector<std::size_t> key_counts;       // per query, the keys it may attend to
  std::vector<double> sorted_weights;        // the median-entropy query's weights, largest first (kMaxSortedWeights)
  std::vector<std::vector<double>> heatmap;  // weights of sequence 0, head 0, the first min(T, kMaxHeatmapPositions)
                                             // queries and keys; NaN where masked
};

/// Measures each (d_k, scale) (d_k outer) on one batch (data_seed, index 0): forward, then the loss and backward.
/// Throws ConfigError for bad settings, an empty or repeated list, overflowing scores, no query with two keys.
std::vector<ArmMeasurement> measure_arms(const train::TrainConfig& base, const std::vector<std::size_t>& d_ks,
                                         const std::vector<std::string>& scales);

/// `xgrad probe` and compare's theory line: the same measurement without the loss and backward (their fields stay 0)
/// and without arm_configs' sorting of component settings: `base` at each d_k (outer) and scale as given. Scores that
/// overflow are measured, not refused. Throws ConfigError on bad settings, a d_k outside [1, 8192] or given twice.
std::vector<ArmMeasurement> probe(const train::TrainConfig& base, const std::vector<std::size_t>& d_ks,
                                  const std::vector<std::string>& scales);

/// probe's table: arm_table's forward columns (report/explain_figures.h) as text, and what they mean.
std::string format_probe_table(const std::vector<ArmMeasurement>& arms);

}  // namespace xgrad::report
