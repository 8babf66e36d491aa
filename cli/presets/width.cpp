// Preset `width`: does the best learning rate move with the width of the model, and does muP hold it in place?
// Yang et al. 2022 ("Tensor Programs V", figure 1) train transformers of growing d_model at many learning rates: under
// the standard parametrization the best lr shifts with width, under muP it stays. Here at toy scale: d_model = d_k
// from 16 to 512 (one head, attention only, key-value recall with summed key and value embeddings) x AdamW learning
// rates x {standard with sqrt_dk, standard with none, muP (1/d_k attention, --base-width 64)}.
#include "cli/presets/preset.h"

namespace xgrad::cli::presets::width {
namespace {

const std::vector<std::size_t> kWidths{16, 32, 64, 128, 256, 512};
const std::vector<std::size_t> kQuickWidths{16, 64};
constexpr std::size_t kBaseWidth = 64;

cli::SweepConfig grid(bool quick) {
  cli::SweepConfig c = preset_defaults();
  train::set_setting(c.base, "kv_encoding", "sum");
  c.base.model.n_heads = 1;
  c.base.model.mlp = false;  // attention only: the widest runs stay within the budget, and W_q, W_k, W_v, W_o are the
                             // hidden matrices muP rescales
  c.base.model.base_width = kBaseWidth;
  c.base.steps = quick ? 40 : 150;
  c.base.log_every = 50;
  const std::vector<std::size_t>& widths = quick ? kQuickWidths : kWidths;
  c.d_ks = widths;
  std::vector<nlohmann::json> d_models(widths.begin(), widths.end());
  c.grid = {{"d_model", d_models}, {"parametrization", {"sp", "mup"}}};
  c.scales = {"sqrt_dk", "none", "dk"};
  c.arms.clear();
  for (double lr : quick ? std::vector<double>{1e-3, 1e-2, 1e-1} : log_spaced(1e-4, 1e-1, 6))
    c.arms.push_back({"adamw", lr});
  c.seeds = {0, 1};
  // The diagonal d_model = d_k, and the three parametrizations: sp with sqrt_dk or none, mup with its 1/d_k.
  c.keep = [](const train::TrainConfig& r) {
    if (r.model.d_model != r.model.d_k) return false;
    return r.model.parametrization == nn::Parametrization::mup ? r.model.scale == "dk" : r.model.scale != "dk";
  };
  return c;
}

const PresetRegistration width_registration{
    {"width", 20,
     "best learning rate against width: d_model = d_k 16 to 512 x AdamW lrs x {SP sqrt_dk, SP none, muP} (Yang et "
     "al. 2022, Tensor Programs V, figure 1)",
     grid}};

}  // namespace
}  // namespace xgrad::cli::presets::width
