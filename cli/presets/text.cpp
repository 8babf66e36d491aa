// Preset `text`: the question on text instead of a synthetic task. Scaled (sqrt_dk) against unscaled attention in a
// byte-level GPT (char_lm: next-byte prediction, the last 10% of the file held out) at head sizes 16 to 256, reached
// two ways: n_heads 16, 4, 1 at d_model 256 (the head size grows, the width stays), and d_model 16, 64, 256 with one
// head (the width grows with it). Training as nanoGPT's CPU run (Karpathy, nanoGPT README: AdamW with betas 0.9/0.99,
// weight decay 0.1 on the matrices, gradient clipping 1.0, warmup then cosine decay to a tenth of the lr, context 64,
// batch 12, tied token embedding and readout, no biases), two layers and fewer steps so the full grid fits in 20
// minutes on 2 cores. Any registered scaling can be added with --scale. `./run.sh experiment --preset text` passes the
// King James Bible (run.sh corpus) as --text. Report (report/presets/text.cpp): held-out loss, saturation and a sample
// of text per arm.
#include "cli/presets/preset.h"

namespace xgrad::cli::presets::text {
namespace {

constexpr std::size_t kWide = 256;      // d_model of the n_heads family
constexpr std::size_t kQuickWide = 64;  // its --quick value

void set_training(cli::SweepConfig& c, bool quick) {
  c.base.task = "char_lm";
  train::set_setting(c.base, "seq_len", 64);
  c.base.batch_size = 12;
  c.base.model.n_layers = quick ? 1 : 2;
  c.base.steps = quick ? 300 : 1000;
  c.base.lr_schedule = "cosine";
  train::set_setting(c.base, "warmup_steps", quick ? 30 : 100);
  train::set_setting(c.base, "min_lr", 1e-4);
  train::set_setting(c.base, "beta2", 0.99);
  train::set_setting(c.base, "weight_decay", 0.1);
  train::set_setting(c.base, "weight_decay_params", "matrices");
  c.base.model.tie_word_embeddings = true;
  c.base.model.bias = false;
  c.base.clip_grad_norm = 1.0;
  c.base.model.emb_init_std = 0.02;  // nanoGPT's: a byte embedding of std 1 would dominate the LayerNorm'd residual sum
  c.base.eval_every = quick ? 100 : 200;
  c.base.eval_batches = quick ? 4 : 16;
  c.base.log_every = quick ? 10 : 25;
  c.arms = {{"adamw", 1e-3}};
}

cli::SweepConfig grid(bool quick) {
  cli::SweepConfig c = preset_defaults();
  set_training(c, quick);
  c.scales = {"none", "sqrt_dk"};
  const std::size_t wide = quick ? kQuickWide : kWide;
  c.d_ks = quick ? std::vector<std::size_t>{16, 64} : std::vector<std::size_t>{16, 64, 256};
  std::vector<nlohmann::json> d_models, n_heads;
  for (std::size_t d_k : c.d_ks) {
    d_models.push_back(d_k);
    n_heads.push_back(wide / d_k);
  }
  c.grid = {{"d_model", d_models}, {"n_heads", n_heads}};
  c.seeds = quick ? std::vector<std::uint64_t>{0} : std::vector<std::uint64_t>{0, 1};
  // Two families through the (d_model, n_heads, d_k) cube: n_heads x d_k = d_model at d_model = wide, and one head.
  c.keep = [wide](const train::TrainConfig& r) {
    return r.model.n_heads * r.model.d_k == r.model.d_model && (r.model.d_model == wide || r.model.n_heads == 1);
  };
  return c;
}

const PresetRegistration text_registration{
    {"text", 50,
     "scaled vs unscaled attention on text (char_lm, --text; run.sh passes the King James Bible): d_k 16, 64, 256 "
     "as n_heads 16, 4, 1 at d_model 256 and as d_model 16, 64, 256 at one head; nanoGPT's CPU training; 2 seeds",
     grid}};

}  // namespace
}  // namespace xgrad::cli::presets::text
