// Preset `lr`: how wide a range of learning rates each attention scaling tolerates (Wortsman et al. 2023,
// "Small-scale proxies for large-scale Transformer training instabilities": LR sensitivity, sec. 3.2, and the
// attention logit growth that precedes divergence, sec. 3.1). Eight scalings x 7 log-spaced learning rates
// of AdamW and of SGD (momentum 0.9) x 3 seeds x d_k 64 and 256, on key-value recall with the compositional encoding
// (--kv-encoding sum). Report: final loss against lr per scaling, the LR-sensitivity table (the lrs whose objective is
// within a margin of the best), and the largest attention logit against step at the highest lr each scaling
// survives.
#include "cli/presets/preset.h"

namespace xgrad::cli::presets::lr {
namespace {

cli::SweepConfig grid(bool quick) {
  cli::SweepConfig c = preset_defaults();
  train::set_setting(c.base, "kv_encoding", "sum");
  c.base.steps = 300;
  c.base.batch_size = 32;
  c.base.log_every = 10;
  // The scalings registered when this preset was made: each new one would grow its grid (and time) by a ninth.
  c.scales = {"none", "sqrt_dk", "dk", "qk_layernorm", "learned", "softcap", "ssmax", "sigma_reparam"};
  c.d_ks = {64, 256};
  c.seeds = {0, 1, 2};
  std::vector<double> adamw = log_spaced(1e-4, 1e-1, 7), sgd = log_spaced(1e-3, 1.0, 7);
  if (quick) {  // the same scalings, 4 lrs per optimizer a decade apart, 2 seeds, d_k 64, a third of the steps
    adamw = {1e-4, 1e-3, 1e-2, 1e-1};
    sgd = {1e-3, 1e-2, 1e-1, 1.0};
    c.d_ks = {64};
    c.seeds = {0, 1};
    c.base.steps = 100;
  }
  c.arms.clear();
  for (double lr : adamw) c.arms.push_back({"adamw", lr});
  for (double lr : sgd) c.arms.push_back({"sgd", lr});
  return c;
}

const PresetRegistration lr_registration{
    {"lr", 10,
     "LR sensitivity per scaling: 8 scalings x 7 lrs of AdamW and SGD x 3 seeds x d_k 64, 256 (Wortsman et al. "
     "2023, sec. 3.1-3.2)",
     grid}};

}  // namespace
}  // namespace xgrad::cli::presets::lr
