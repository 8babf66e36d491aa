// `xgrad probe`: attention at initialisation, no training: Vaswani et al.'s footnote 4 (std(q·k) = sqrt(d_k) s_q s_k
// for independent zero-mean components) checked on the actual model.
#pragma once

#include <string>
#include <vector>

#include "train/config.h"

namespace xgrad::report {

struct ProbeRow {
  std::size_t d_k = 0;
  std::string scale;            // a registered scaling
  double q_std = 0, k_std = 0;  // std of the q and k components as they enter q·k
  double theory_std = 0;        // sqrt(d_k) q_std k_std times the mode's constant scale factor
  double score_std = 0;         // measured std of the scaled scores (keys a query may attend to)
  double entropy_mean = 0;      // mean attention entropy (nats) over queries with >= 2 keys
  double max_prob_mean = 0;     // mean max attention probability over the same queries
  double frac_saturated = 0;    // share of those queries with max probability > 0.99
};

/// The first layer's attention of `base` at each d_k and scale on one batch. Throws ConfigError on bad settings, an
/// empty d_ks or a d_k given twice.
std::vector<ProbeRow> probe(const train::TrainConfig& base, const std::vector<std::size_t>& d_ks,
                            const std::vector<std::string>& scales);

/// The probe table, one line per (d_k, scale), with the uniform-attention entropy for reference.
std::string format_probe_table(const std::vector<ProbeRow>& rows);

}  // namespace xgrad::report
