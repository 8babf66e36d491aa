// Preset `collapse`: which attention scalings let the attention entropy collapse at high learning rates, and does a
// warmup prevent it? Zhai et al. 2023 ("Stabilizing Transformer Training by Preventing Attention Entropy Collapse")
// observe training instability together with a pathologically low attention entropy, and bound the entropy from
// below by a function of the spectral norm of the attention logits (section 3; nn/entropy_bound.h). Here: eight
// scalings x high AdamW learning rates x {no warmup, linear warmup}, key-value recall with summed key and
// value embeddings, two heads; per-head entropy against step, and entropy against c · ||W_q,h W_k,h^T||_2 with their
// bound drawn.
#include "cli/presets/preset.h"

namespace xgrad::cli::presets::collapse {
namespace {

cli::SweepConfig grid(bool quick) {
  cli::SweepConfig c = preset_defaults();
  train::set_setting(c.base, "kv_encoding", "sum");
  c.base.model.d_model = 64;
  c.base.model.n_heads = 2;
  c.d_ks = {32};
  c.base.steps = quick ? 80 : 400;
  c.base.log_every = quick ? 4 : 10;
  // The scalings registered when this preset was made: each new one would grow its grid (and time) by a ninth.
  c.scales = {"none", "sqrt_dk", "dk", "qk_layernorm", "learned", "softcap", "ssmax", "sigma_reparam"};
  c.arms.clear();
  for (double lr : quick ? std::vector<double>{1e-2, 3e-2} : std::vector<double>{3e-3, 1e-2, 3e-2})
    c.arms.push_back({"adamw", lr});
  c.grid = {{"warmup_steps", {0, quick ? 20 : 100}}};
  c.seeds = quick ? std::vector<std::uint64_t>{0, 1} : std::vector<std::uint64_t>{0, 1, 2};
  return c;
}

const PresetRegistration collapse_registration{
    {"collapse", 30,
     "attention entropy collapse: 8 scalings x high AdamW lrs x {no warmup, warmup}; entropy against step and "
     "against the spectral norm with Zhai et al. 2023's lower bound",
     grid}};

}  // namespace
}  // namespace xgrad::cli::presets::collapse
