// Preset `length`: does attention fade when a query sees more keys than in training, and does Scalable-Softmax keep
// it sharp? (Nakanishi 2025, "Scalable-Softmax Is Superior for Attention": softmax over n scores flattens as n grows,
// so the largest weight falls; multiplying the scores by s·log n keeps it.) One attention layer, no MLP, learns
// key-value recall with the compositional encoding (--kv-encoding sum) at 8 pairs, and is evaluated at the end on 8,
// 16, 32 and 64 pairs (1x, 2x, 4x, 8x the keys; --eval-n-pairs: the trained positions are reused, so only the number
// of keys changes) with eight scalings, ssmax among them. Report: accuracy and the largest attention
// weight against the number of keys per scaling, and which scalings fade, from each run's summary.json.
#include <fmt/format.h>

#include "cli/presets/preset.h"

namespace xgrad::cli::presets::length {
namespace {

// The scaling the question is about.
constexpr const char* kScalable = "ssmax";

constexpr std::size_t kTrainedPairs = 8;

cli::SweepConfig grid(bool quick) {
  cli::SweepConfig c = preset_defaults();
  train::set_setting(c.base, "kv_encoding", "sum");
  train::set_setting(c.base, "n_keys", 8 * kTrainedPairs);  // distinct keys for 8x the pairs
  train::set_setting(c.base, "n_values", 16);
  train::set_setting(c.base, "n_pairs", kTrainedPairs);
  c.base.eval_n_pairs =
      fmt::format("{},{},{},{}", kTrainedPairs, 2 * kTrainedPairs, 4 * kTrainedPairs, 8 * kTrainedPairs);
  c.base.eval_batches = 16;  // 1024 queries per length
  c.base.model.mlp = false;
  c.base.steps = 1000;
  c.base.log_every = 50;
  // The scalings registered when this preset was made: each new one would grow its grid (and time) by a ninth.
  c.scales = {"none", "sqrt_dk", "dk", "qk_layernorm", "learned", "softcap", "ssmax", "sigma_reparam"};
  c.d_ks = {16, 64, 256};
  c.seeds = {0, 1, 2};
  c.arms = {{"adamw", 3e-3}};
  if (quick) {  // the scalings the question contrasts, d_k 64, 2 seeds, 400 steps
    c.scales = {"none", "sqrt_dk", "dk", kScalable};
    c.d_ks = {64};
    c.seeds = {0, 1};
    c.base.steps = 400;
    c.base.eval_batches = 4;
  }
  return c;
}

const PresetRegistration length_registration{
    {"length", 40,
     "attention fading with more keys: trained at 8 key-value pairs, evaluated at 8, 16, 32, 64; 8 scalings "
     "(ssmax among them) x d_k 16, 64, 256 x 3 seeds (Nakanishi 2025, Scalable-Softmax)",
     grid}};

}  // namespace
}  // namespace xgrad::cli::presets::length
