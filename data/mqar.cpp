#include "data/mqar.h"

#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "autograd/random.h"
#include "data/registry.h"
#include "data/settings.h"

namespace xgrad::data {

namespace {
TaskEntry mqar_entry() {
  TaskEntry e =
      task_entry("mqar",
                 "multi-query associative recall: key-value pairs as alternating tokens, then a query for every key; "
                 "answer each with its value (Arora et al. 2023, Zoology; needs --n-layers 2)",
                 65);
  e.settings = {n_keys_setting(),
                n_values_setting(),
                n_pairs_setting(4),
                seq_len_setting(),
                number_setting("power_a", 0.01, 0.0, 1.0,
                               "mqar: query gaps g drawn with probability ~ (g+1)^(power_a-1) (Zoology's power_a; "
                               "1 = uniform)")
                    .excluding_min(),
                boolean_setting("random_non_queries", true,
                                "mqar: filler between queries is random value tokens (true) or a blank token "
                                "(false) (Zoology's random_non_queries)")};
  e.vocab_size_from = "--n-keys and --n-values";
  e.build = [](const SettingValues& v) -> std::unique_ptr<Task> {
    return std::make_unique<MultiQueryRecall>(MultiQueryRecallConfig{
        v.get<std::size_t>("n_keys"), v.get<std::size_t>("n_values"), v.get<std::size_t>("n_pairs"),
        v.get<std::size_t>("seq_len"), v.get<double>("power_a"), v.get<bool>("random_non_queries")});
  };
  return e;
}
const Registration<TaskEntry> mqar_registration{mqar_entry()};

std::string text(std::size_t v) { return std::to_string(v); }
}  // namespace

MultiQueryRecall::MultiQueryRecall(MultiQueryRecallConfig config) : config_(config) {
  check_setting("mqar", "n_keys", config_.n_keys, 1, kMaxSymbols);
  check_setting("mqar", "n_values", config_.n_values, 2, kMaxSymbols);
  check_setting("mqar", "n_pairs", config_.n_pairs, 1, kMaxSymbols);
  check_setting("mqar", "seq_len", config_.seq_len, 4, kMaxSeqLen);
  const std::size_t P = config_.n_pairs;
  if (config_.n_keys < P)
    throw TaskError("mqar: --n-keys (" + text(config_.n_keys) + ") must be >= --n-pairs (" + text(P) +
                    "): keys are distinct within a sequence");
  if (config_.n_values < P)
    throw TaskError("mqar: --n-values (" + text(config_.n_values) + ") must be >= --n-pairs (" + text(P) +
                    "): values are distinct within a sequence");
  if (config_.seq_len < 4 * P)
    throw TaskError("mqar: --seq-len (" + text(config_.seq_len) + ") must be >= 4 x --n-pairs = " + text(4 * P) +
                    " (the pairs take 2 x --n-pairs tokens and the queries every other position after them): give "
                    "--seq-len >= " +
                    text(4 * P) + ", or --n-pairs <= " + text(config_.seq_len / 4));
  if (!(config_.power_a > 0.0 && config_.power_a <= 1.0))
    throw TaskError("mqar: --power-a must be in (0, 1], got " + std::to_string(config_.power_a));
  const std::size_t slots = (config_.seq_len - 2 * P) / 2;
  gap_weights_.resize(slots);
  for (std::size_t g = 0; g < slots; ++g) gap_weights_[g] = std::pow(static_cast<double>(g + 1), config_.power_a - 1.0);
}

double MultiQueryRecall::chance_loss() const { return std::log(static_cast<double>(config_.n_values)); }

std::vector<std::size_t> MultiQueryRecall::trained_positions(const Task& trained) const {
  const auto* other = dynamic_cast<const MultiQueryRecall*>(&trained);
  if (!other) throw std::invalid_argument("mqar: trained_positions of another task (" + trained.name() + ")");
  const std::size_t pairs = 2 * other->config_.n_pairs;
  // An even length (>= 2, as seq_len >= 4 n_pairs), so that an offset keeps its parity when it repeats.
  const std::size_t region = (other->config_.seq_len - pairs) / 2 * 2;
  std::vector<std::size_t> out(config_.seq_len);
  for (std::size_t t = 0; t < out.size(); ++t)
    out[t] = t < 2 * config_.n_pairs ? t % pairs : pairs + (t - 2 * config_.n_pairs) % region;
  return out;
}

Batch MultiQueryRecall::make_batch(std::uint64_t seed, std::uint64_t index, std::size_t batch_size, Split split) const {
  const std::size_t T = config_.seq_len, P = config_.n_pairs, K = config_.n_keys, V = config_.n_values;
  const auto value_token = [K](std::size_t value) { return static_cast<std::int64_t>(K + value); };
  const auto blank = static_cast<std::int64_t>(K + V);
  Batch b = blank_batch(batch_size, T);
  Generator rng(seed, split_stream(0x6d71 /* "mq" */, split), index);
  std::vector<std::size_t> keys(K), values(V);
  std::vector<double> weights;
  for (std::size_t s = 0; s < batch_size; ++s) {
    // Partial Fisher-Yates: the first P keys and the first P values are uniform draws without replacement.
    std::iota(keys.begin(), keys.end(), std::size_t(0));
    std::iota(values.begin(), values.end(), std::size_t(0));
    for (std::size_t i = 0; i < P; ++i) std::swap(keys[i], keys[i + rng.uniform(K - i)]);
    for (std::size_t i = 0; i < P; ++i) std::swap(values[i], values[i + rng.uniform(V - i)]);
    std::int64_t* in = &b.inputs(s, 0);
    std::int64_t* target = &b.targets(s, 0);
    for (std::size_t i = 0; i < P; ++i) {
      in[2 * i] = static_cast<std::int64_t>(keys[i]);
      in[2 * i + 1] = value_token(values[i]);
    }
    for (std::size_t t = 2 * P; t < T; ++t) in[t] = config_.random_non_queries ? value_token(rng.uniform(V)) : blank;
    // Gap slots without replacement, each draw proportional to the weights of the slots still free (as
    // numpy.random.choice(replace=False, p=...), which Zoology calls).
    weights = gap_weights_;
    for (std::size_t i = 0; i < P; ++i) {
      double total = 0;
      for (double w : weights) total += w;
      double u = rng.uniform01() * total;
      std::size_t g = 0;
      while (g + 1 < weights.size() && (weights[g] == 0.0 || u >= weights[g])) {
        u -= weights[g];
        ++g;
      }
      while (weights[g] == 0.0) --g;  // rounding at the end of the walk: the last free slot
      weights[g] = 0.0;
      const std::size_t query = 2 * P + 2 * g;
      in[query] = static_cast<std::int64_t>(keys[i]);
      target[query] = value_token(values[i]);
    }
  }
  return b;
}

}  // namespace xgrad::data
