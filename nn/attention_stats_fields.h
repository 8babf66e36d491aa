// The saturation statistics of one attention head (AttentionStats), as a plain struct: what run files, reports and
// metrics columns hold. nn/attention_stats.h measures them from a recorded attention.
#pragma once

#include <cstddef>

namespace xgrad::nn {

/// Statistics of one head over the selected queries of a batch. Every field but max_logit is NaN when no query was
/// selected; max_logit is NaN when no query was recorded.
struct AttentionStats {
  std::size_t n_queries = 0;  // queries included (selected, with at least 2 keys they may attend to)
  double score_std = 0;       // population std of the scaled scores over the keys they may attend to
  double score_max_abs = 0;   // max |scaled score| over the same entries
  double max_logit = 0;  // max scaled score (signed) over every recorded query, selected or not, and the keys it may
                         // attend to: Kimi K2's S_max, what the scaling qk_clip compares with its tau
  double qk_spectral_norm = 0;         // spectral norm of the head's score matrix from its weights (see
                                       // AttentionLayer::qk_spectral_norms); NaN from attention_stats(), which sees
                                       // only the recorded scores: the trainer fills it from the layer
  double entropy_mean = 0;             // mean over queries of -sum_j p_j ln p_j, in nats
  double entropy_min = 0;              // min over queries of the same
  double max_prob_mean = 0;            // mean over queries of max_j p_j
  double frac_max_prob_above_099 = 0;  // fraction of queries with max_j p_j > 0.99 (saturated)
  double score_grad_p10 = 0;           // 10th percentile over queries of |dL/d scores_row| (L2 norm of the row)
  double score_grad_median = 0;        // 50th percentile of the same
  double score_grad_p90 = 0;           // 90th percentile of the same
};

}  // namespace xgrad::nn
