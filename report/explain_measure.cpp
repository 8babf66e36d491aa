#include "report/explain_measure.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <xtensor/xmath.hpp>

#include "autograd/kernels/softmax.h"
#include "autograd/random.h"
#include "nn/attention_stats.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "train/run_files.h"
#include "train/settings.h"
#include "train/trainer.h"

namespace xgrad::report {
using train::ConfigError;
using train::TrainConfig;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double theory_score_std(std::size_t d_k, double q_std, double k_std, double multiplier) {
  return std::sqrt(static_cast<double>(d_k)) * q_std * k_std * std::abs(multiplier);
}

SoftmaxRow softmax_row(const double* p, std::size_t n) {
  SoftmaxRow r;
  double sum2 = 0, sum3 = 0;
  for (std::size_t j = 0; j < n; ++j) {
    if (p[j] > 0) r.entropy -= p[j] * std::log(p[j]);
    r.max_prob = std::max(r.max_prob, p[j]);
    sum2 += p[j] * p[j];
    sum3 += p[j] * p[j] * p[j];
  }
  r.jacobian_norm = std::sqrt(std::max(0.0, sum2 - 2 * sum3 + sum2 * sum2));
  return r;
}

SoftmaxCurves softmax_curves(const std::vector<std::size_t>& key_counts, const std::vector<double>& stds,
                             std::uint64_t seed, std::size_t max_rows) {
  if (key_counts.empty()) throw std::invalid_argument("softmax_curves: no key counts");
  if (*std::min_element(key_counts.begin(), key_counts.end()) < 1)
    throw std::invalid_argument("softmax_curves: a key count below 1");
  // Every k-th count when there are more counts than rows; then whole passes over the counts kept.
  const std::size_t stride = std::max<std::size_t>(1, key_counts.size() / std::max<std::size_t>(1, max_rows));
  std::vector<std::size_t> counts;
  for (std::size_t i = 0; i < key_counts.size(); i += stride) counts.push_back(key_counts[i]);
  const std::size_t passes = std::max<std::size_t>(1, max_rows / counts.size());
  Generator rng(seed, 0x736d /* "sm" */);
  std::vector<std::vector<double>> z;  // the rows' standard normal scores, the same at every sigma
  for (std::size_t m = 0; m < passes * counts.size(); ++m) {
    z.emplace_back(counts[m % counts.size()]);
    for (auto& v : z.back()) v = rng.normal();
  }
  SoftmaxCurves out;
  out.std = stds;
  std::vector<double> s, p;
  for (const double sigma : stds) {
    SoftmaxRow mean;
    for (const auto& row : z) {
      s.resize(row.size());
      p.resize(row.size());
      for (std::size_t j = 0; j < row.size(); ++j) s[j] = sigma * row[j];
      simd::softmax_row(s.data(), p.data(), s.size());
      mean += softmax_row(p.data(), p.size());
    }
    const double n = static_cast<double>(z.size());
    out.entropy.push_back(mean.entropy / n);
    out.max_prob.push_back(mean.max_prob / n);
    out.jacobian_norm.push_back(mean.jacobian_norm / n);
  }
  return out;
}

namespace {

// Throws ConfigError naming `flag` when `values` is empty ("give at least one <what>") or holds one twice.
template <class T>
void check_once_each(const std::string& flag, const std::vector<T>& values, const std::string& what) {
  if (values.empty()) throw ConfigError(flag + ": give at least one " + what);
  for (auto it = values.begin(); it != values.end(); ++it)
    if (std::find(values.begin(), it, *it) != it) throw ConfigError(fmt::format("{}: {} is given twice", flag, *it));
}

double population_std(const xt::xarray<float>& x) { return xt::stddev(xt::cast<double>(x))(); }

// A model of `config` at initialisation (validated: throws ConfigError), its task and one batch (data_seed, index 0);
// the first attention layer records (not its spectral norms: not shown, and most of a record's cost).
struct ArmModel {
  TrainConfig config;
  std::unique_ptr<data::Task> task;
  std::unique_ptr<nn::AttentionModel> model;
  data::Batch batch;
  std::shared_ptr<nn::AttentionLayer> layer;
  explicit ArmModel(const TrainConfig& c) : config(c), task(config.validate()) {
    model = std::make_unique<nn::AttentionModel>(train::model_config(config, *task), config.seed);
    batch = task->batch(config.data_seed, 0, config.batch_size);
    layer = model->attention_layers().front();
    layer->record_spectral_norms = false;
  }
};

// The run configuration of one arm with only the component settings it reads (--softcap-cap with --scale
// none,softcap goes to the softcap arms, as in a sweep). Validated (throws ConfigError).
TrainConfig arm_config(const TrainConfig& base, std::size_t d_k, const std::string& scale) {
  TrainConfig c = base;
  c.model.d_k = d_k;
  c.model.scale = scale;
  nlohmann::json kept = nlohmann::json::object();
  for (const auto& [key, value] : c.settings.json().items())
    if (train::unread_setting_error(c, key).empty()) kept[key] = value;
  c.settings = SettingValues(kept);
  c.validate();
  return c;
}

// Every arm's configuration, checked before any is measured (a refusal after minutes of work helps no one); a
// component setting no arm reads is refused as train refuses it.
std::vector<TrainConfig> arm_configs(const TrainConfig& base, const std::vector<std::size_t>& d_ks,
                                     const std::vector<std::string>& scales) {
  const auto error_at = [&base](const std::string& scale, const std::string& key) {
    TrainConfig c = base;
    c.model.scale = scale;
    return train::unread_setting_error(c, key);
  };
  for (const auto& item : base.settings.json().items())
    if (std::none_of(scales.begin(), scales.end(), [&](const auto& s) { return error_at(s, item.key()).empty(); }))
      throw ConfigError(error_at(scales.front(), item.key()));
  std::vector<TrainConfig> out;
  for (const auto d_k : d_ks)
    for (const auto& scale : scales) out.push_back(arm_config(base, d_k, scale));
  return out;
}

// The rows of a [B, H, Tq, T] record with at least 2 visible (finite) scores: row r is sequence b, head h, query
// position `position` (query_positions[i], or i).
struct QueryRow {
  std::size_t b = 0, h = 0, i = 0, position = 0;
  std::vector<std::size_t> keys;  // visible key positions
};

std::vector<QueryRow> query_rows(const xt::xarray<float>& scores, const std::vector<std::size_t>& query_positions) {
  std::vector<QueryRow> rows;
  const std::size_t B = scores.shape(0), H = scores.shape(1), Tq = scores.shape(2), T = scores.shape(3);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t i = 0; i < Tq; ++i) {
        QueryRow r{b, h, i, query_positions.empty() ? i : query_positions[i], {}};
        for (std::size_t j = 0; j < T; ++j)
          if (std::isfinite(scores(b, h, i, j))) r.keys.push_back(j);
        if (r.keys.size() >= 2) rows.push_back(std::move(r));
      }
  return rows;
}

// Row r of x at its visible keys.
std::vector<double> row_values(const xt::xarray<float>& x, const QueryRow& r) {
  std::vector<double> p;
  for (const auto j : r.keys) p.push_back(x(r.b, r.h, r.i, j));
  return p;
}

// The token at a query's position (the first of its tokens for inputs [B, T, S]): what fixes its q at initialisation.
std::int64_t query_token(const xt::xarray<std::int64_t>& inputs, const QueryRow& r) {
  return inputs.dimension() == 3 ? inputs(r.b, r.position, 0) : inputs(r.b, r.position);
}

// Entropy, largest weight, Jacobian norm and saturation over the queries; the median-entropy query's sorted weights;
// whether a saturated query's peak sits on the key its answer needs, against the share chance gives. Queries of one
// head and one token share their q, so their outcomes are not independent: the standard error of the difference
// from chance is the cluster-robust one over (head, token) groups, sqrt(sum_c (hits_c - expected_c)^2) / N.
void measure_weights(const xt::xarray<float>& probs, const std::vector<QueryRow>& rows, const data::Batch& batch,
                     const xt::xarray<std::int64_t>& answers, ArmMeasurement& m) {
  std::vector<std::pair<double, std::size_t>> entropies;
  SoftmaxRow sum;
  double saturated = 0, hits = 0, chance_saturated = 0, chance_all = 0;
  std::map<std::pair<std::size_t, std::int64_t>, double> excess;  // per (head, token): hits - expected hits
  for (std::size_t q = 0; q < rows.size(); ++q) {
    const QueryRow& row = rows[q];
    const auto p = row_values(probs, row);
    const SoftmaxRow r = softmax_row(p.data(), p.size());
    sum += r;
    saturated += r.max_prob > 0.99;
    entropies.emplace_back(r.entropy, q);
    m.key_counts.push_back(p.size());
    const std::int64_t answer = answers.dimension() == 2 ? answers(row.b, row.position) : -1;
    if (answer < 0) continue;
    ++m.n_answerable;
    const double expected = 1.0 / static_cast<double>(row.keys.size());
    chance_all += expected;
    if (r.max_prob <= 0.99) continue;
    ++m.n_answerable_saturated;
    const double hit = row.keys[std::max_element(p.begin(), p.end()) - p.begin()] == static_cast<std::size_t>(answer);
    chance_saturated += expected;
    hits += hit;
    excess[{row.h, query_token(batch.inputs, row)}] += hit - expected;
  }
  const double n = static_cast<double>(rows.size());
  m.n_queries = rows.size();
  m.entropy_mean = sum.entropy / n;
  m.max_prob_mean = sum.max_prob / n;
  m.jacobian_norm_mean = sum.jacobian_norm / n;
  m.saturated_share = saturated / n;
  const auto middle = entropies.begin() + static_cast<std::ptrdiff_t>(entropies.size() / 2);
  std::nth_element(entropies.begin(), middle, entropies.end());
  m.sorted_weights = row_values(probs, rows[middle->second]);
  std::sort(m.sorted_weights.rbegin(), m.sorted_weights.rend());
  if (m.sorted_weights.size() > kMaxSortedWeights) m.sorted_weights.resize(kMaxSortedWeights);
  const double n_saturated = static_cast<double>(m.n_answerable_saturated);
  m.earned_share = m.n_answerable_saturated ? hits / n_saturated : kNaN;
  m.chance_share = m.n_answerable_saturated ? chance_saturated / n_saturated
                   : m.n_answerable         ? chance_all / static_cast<double>(m.n_answerable)
                                            : kNaN;
  double sum2 = 0;
  for (const auto& [cluster, e] : excess) sum2 += e * e;
  m.earned_se = m.n_answerable_saturated ? std::sqrt(sum2) / n_saturated : kNaN;
  m.n_earned_clusters = excess.size();
}

// Mean and std over every visible score; the histogram keeps at most kMaxKeptScores of them, the heatmap the first
// kMaxHeatmapPositions queries and keys: a long sequence must not make a page of hundreds of megabytes.
constexpr std::size_t kMaxKeptScores = 200000;

void measure_scores(const nn::AttentionRecord& last, const std::vector<QueryRow>& rows, ArmMeasurement& m) {
  const auto& scores = last.scores.value();
  std::size_t visible = 0;
  for (const auto& r : rows) visible += r.keys.size();
  const std::size_t stride = (visible + kMaxKeptScores - 1) / kMaxKeptScores;
  double sum = 0, sum2 = 0;
  std::size_t n = 0;
  for (const auto& r : rows)
    for (const auto j : r.keys) {
      const double v = scores(r.b, r.h, r.i, j);
      sum += v;
      sum2 += v * v;
      if (n++ % stride == 0) m.scores.push_back(v);
    }
  m.score_mean = sum / static_cast<double>(n);
  m.score_std = std::sqrt(std::max(0.0, sum2 / static_cast<double>(n) - m.score_mean * m.score_mean));
  m.seq_len = scores.shape(3);
  const std::size_t Tq = std::min(scores.shape(2), kMaxHeatmapPositions), T = std::min(m.seq_len, kMaxHeatmapPositions);
  m.heatmap.assign(Tq, std::vector<double>(T, kNaN));
  for (std::size_t i = 0; i < Tq; ++i)
    for (std::size_t j = 0; j < T; ++j)
      if (std::isfinite(scores(0, 0, i, j))) m.heatmap[i][j] = last.probs(0, 0, i, j);
}

// Scores that overflowed (NaN or +inf; -inf marks a masked key) would read as masked keys.
void check_finite_scores(const xt::xarray<float>& scores, const ArmModel& a, std::size_t d_k) {
  for (std::size_t i = 0; i < scores.size(); ++i)
    if (std::isnan(scores.data()[i]) || scores.data()[i] == INFINITY)
      throw ConfigError(
          fmt::format("the attention scores at d_k {} with --scale {} are not finite (they overflow float at "
                      "initialisation); lower --proj-init-gain or --emb-init-std",
                      d_k, a.config.model.scale));
}

// Scores, weights, q and k of the first layer, without gradients; overflowing scores refused when `finite`; `who`
// starts the error of a batch without a query that may attend to two keys.
void weights_pass(ArmModel& a, ArmMeasurement& m, bool finite, const std::string& who) {
  a.layer->record_attention = true;
  {
    NoGradGuard no_grad;
    a.model->forward(a.batch.inputs);
  }
  const nn::AttentionRecord& last = a.layer->last;
  m.q_std = population_std(last.q);
  m.k_std = population_std(last.k);
  m.multiplier = a.layer->effective_multiplier(train::model_config(a.config, *a.task).max_seq_len);
  m.theory_std = theory_score_std(m.d_k, m.q_std, m.k_std, m.multiplier);
  if (finite) check_finite_scores(last.scores.value(), a, m.d_k);
  const auto rows = query_rows(last.scores.value(), last.query_positions);
  const std::size_t T = a.batch.inputs.shape(1);
  if (rows.empty())
    throw ConfigError(
        fmt::format("{}no query may attend to two keys (task {}: sequences of {} token{}), so every attention weight "
                    "is 1 by construction and there is nothing to measure; give sequences of at least 2 tokens",
                    who, a.config.task, T, T == 1 ? "" : "s"));
  measure_scores(last, rows, m);
  measure_weights(last.probs, rows, a.batch, a.task->answer_positions(a.batch), m);
  a.layer->record_attention = false;
  a.layer->last = nn::AttentionRecord();
}

// The loss at the task's targets and its backward: per-query score gradients and the W_q, W_k gradient norms.
void gradient_pass(ArmModel& a, ArmMeasurement& m) {
  a.layer->record_attention = true;
  const nn::TargetLoss out = nn::loss_at_targets(*a.model, a.batch.inputs, a.batch.targets);
  out.loss.backward();
  m.loss = out.loss.item();
  const nn::AttentionRecord& last = a.layer->last;
  std::vector<double> norms;
  if (last.scores.has_grad())
    for (const auto& r : query_rows(last.scores.value(), last.query_positions)) {
      double s2 = 0;
      for (const double g : row_values(last.scores.grad(), r)) s2 += g * g;
      norms.push_back(std::sqrt(s2));
    }
  m.score_grad_p10 = nn::percentile(norms, 0.1);
  m.score_grad_median = nn::percentile(norms, 0.5);
  m.score_grad_p90 = nn::percentile(norms, 0.9);
  double wq2 = 0, wk2 = 0;
  for (const auto& [name, p] : a.model->named_parameters()) {
    const double g = nn::grad_norm(p);
    if (train::metrics_columns::is_query_weight(name)) wq2 += g * g;
    if (train::metrics_columns::is_key_weight(name)) wk2 += g * g;
  }
  m.grad_norm_w_q = std::sqrt(wq2);
  m.grad_norm_w_k = std::sqrt(wk2);
  a.layer->last = nn::AttentionRecord();
}

// The arm of `config`: the forward's measurements, and the backward's with `gradients`.
ArmMeasurement measure_arm(const TrainConfig& config, bool gradients, const std::string& who) {
  ArmModel a(config);
  ArmMeasurement m;
  m.d_k = config.model.d_k;
  m.scale = config.model.scale;
  weights_pass(a, m, gradients, who);
  if (gradients) gradient_pass(a, m);
  return m;
}

}  // namespace

std::vector<ArmMeasurement> measure_arms(const TrainConfig& base, const std::vector<std::size_t>& d_ks,
                                         const std::vector<std::string>& scales) {
  check_once_each("--d-k", d_ks, "head size");
  check_once_each("--scale", scales, "scaling");
  const std::vector<TrainConfig> configs = arm_configs(base, d_ks, scales);
  std::vector<ArmMeasurement> out;
  for (const auto& config : configs) {
    spdlog::info("explain: d_k {}, --scale {} ({} of {})", config.model.d_k, config.model.scale, out.size() + 1,
                 configs.size());
    out.push_back(measure_arm(config, true, ""));
  }
  return out;
}

std::vector<ArmMeasurement> probe(const TrainConfig& base, const std::vector<std::size_t>& d_ks,
                                  const std::vector<std::string>& scales) {
  check_once_each("--d-k", d_ks, "head size");
  std::vector<ArmMeasurement> out;
  for (const auto d_k : d_ks) {
    if (d_k == 0 || d_k > 8192) throw ConfigError("--d-k: head sizes must be in [1, 8192], got " + std::to_string(d_k));
    for (const auto& scale : scales) {
      TrainConfig c = base;
      c.model.d_k = d_k;
      c.model.scale = scale;
      out.push_back(measure_arm(c, false, "probe: "));
    }
  }
  return out;
}

}  // namespace xgrad::report
