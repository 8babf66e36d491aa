#include "report/probe.h"

#include <sstream>

#include <fmt/format.h>

#include "nn/attention_stats.h"
#include "report/explain_measure.h"
#include "report/text.h"

namespace xgrad::report {
using train::ConfigError;

std::vector<ProbeRow> probe(const train::TrainConfig& base, const std::vector<std::size_t>& d_ks,
                            const std::vector<std::string>& scales) {
  check_once_each("--d-k", d_ks, "head size");
  std::vector<ProbeRow> rows;
  for (auto d_k : d_ks) {
    if (d_k == 0 || d_k > 8192) throw ConfigError("--d-k: head sizes must be in [1, 8192], got " + std::to_string(d_k));
    for (const auto& scale : scales) {
      train::TrainConfig c = base;
      c.model.d_k = d_k;
      c.model.scale = scale;
      ArmModel a(c);  // the task it builds to check the settings: its files are read once
      ArmMeasurement m;
      const nn::AttentionRecord& last = a.forward(m);
      const auto stats = nn::attention_stats(last.scores.value(), last.probs, nullptr, nullptr);
      // With one visible key per query every softmax is 1 by construction: a table of nan would say nothing.
      std::size_t n_queries = 0;
      for (const auto& s : stats) n_queries += s.n_queries;
      a.check_queries(n_queries > 0, "probe: ");
      const auto head_mean = [&](double nn::AttentionStats::*field) {  // mean over heads: per-head score stds
        double sum = 0;
        for (const auto& s : stats) sum += s.*field;
        return sum / static_cast<double>(stats.size());
      };
      using S = nn::AttentionStats;
      rows.push_back({d_k, scale, m.q_std, m.k_std, m.theory_std, head_mean(&S::score_std), head_mean(&S::entropy_mean),
                      head_mean(&S::max_prob_mean), head_mean(&S::frac_max_prob_above_099)});
    }
  }
  return rows;
}

std::string format_probe_table(const std::vector<ProbeRow>& rows) {
  std::ostringstream out;
  out << fmt::format("{:>6}  {:<12}  {:>7}  {:>7}  {:>11}  {:>10}  {:>12}  {:>9}  {:>10}\n", "d_k", "scale", "std(q)",
                     "std(k)", "theory std", "score std", "entropy(nat)", "max prob", "saturated");
  for (const auto& r : rows)
    out << fmt::format("{:>6}  {:<12}  {:>7.3f}  {:>7.3f}  {:>11.3f}  {:>10.3f}  {:>12.3f}  {:>9.3f}  {:>9.1f}%\n",
                       r.d_k, r.scale, r.q_std, r.k_std, r.theory_std, r.score_std, r.entropy_mean, r.max_prob_mean,
                       100.0 * r.frac_saturated);
  for (const char* key : {"probe.theory", "probe.queries", "probe.saturated"}) out << text("explain", key) << "\n";
  return out.str();
}

}  // namespace xgrad::report
