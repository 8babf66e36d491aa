// Preset `dk` (the default of `xgrad experiment`): scaled (sqrt_dk) against unscaled attention across head sizes,
// the seed's textbook argument — "as models use larger embedding dimensions ... the scaling keeps attention
// well-behaved" (Vaswani et al. 2017, sec. 3.2.1) — tested at d_k 16 to 1024 on key-value recall. Its report is the
// usual one (final loss, attention at step 0 and score gradient against d_k, the usual story checked).
#include "cli/presets/preset.h"

namespace xgrad::cli::presets::dk {
namespace {

cli::SweepConfig grid(bool quick) {
  cli::SweepConfig c = preset_defaults();
  c.d_ks = {16, 64, 256, 1024};
  if (quick) {  // two head sizes, one learning rate per optimizer, two seeds, a sixth of the steps
    c.d_ks = {16, 256};
    c.arms = {{"sgd", 0.03}, {"adamw", 1e-3}};
    c.seeds = {0, 1};
    c.base.steps = 100;
  }
  return c;
}

const PresetRegistration dk_registration{
    {"dk", 0,
     "scaled (sqrt_dk) vs unscaled attention at d_k 16, 64, 256, 1024; SGD at two lrs and AdamW; 3 seeds "
     "(Vaswani et al. 2017, sec. 3.2.1)",
     grid}};

}  // namespace
}  // namespace xgrad::cli::presets::dk
