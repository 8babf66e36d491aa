// Preset `logits`: the largest attention logit under AdamW and under Muon, and what bounds it. Kimi K2 (Kimi Team
// 2025, arXiv 2507.20534, "MuonClip") saw the largest logit of some heads pass 1000 under Muon and clipped it with
// QK-Clip (W_q, W_k of a head rescaled after each step its logit passes tau = 100); Gemma 4 normalises q and k and
// scales the scores by 1 instead of 1/sqrt(d_k), which at d_k 256 makes attention near one-hot at initialisation
// (huggingface/transformers#45676). Here: AdamW and Muon at one lr x {none, sqrt_dk, qk_clip, qk_norm at scale 1,
// qk_norm at 1/sqrt(d_k)} x d_k 16, 64, 256 x 2 seeds, on key-value recall (--kv-encoding sum) and on next-byte
// prediction (char_lm, the text of --text: `./run.sh experiment --preset logits` passes preset text's King James
// Bible). Report (report/presets/logits.cpp): the largest logit against step, final loss and entropy against d_k, and
// four verdicts.
#include "cli/presets/preset.h"

namespace xgrad::cli::presets::logits {
namespace {

cli::SweepConfig grid(bool quick) {
  cli::SweepConfig c = preset_defaults();
  train::set_setting(c.base, "kv_encoding", "sum");
  c.base.model.n_heads = 2;
  c.base.batch_size = 32;
  c.base.steps = quick ? 60 : 400;
  c.base.log_every = quick ? 5 : 10;
  c.base.eval_every = 0;
  // The scalings the four questions contrast; qk_norm appears twice, at each of its two multipliers (the
  // only_readers axis below).
  c.scales = {"none", "sqrt_dk", "qk_clip", "qk_norm"};
  // Under 1/sqrt(d_k) the largest logit of these models peaks at 10 to 30 (Kimi K2's unclipped heads passed 1000):
  // at its default tau of 100 QK-Clip would never act, and the question of what it costs where it acts would have no
  // answer. A tau of 10 sits below these logits as 100 sits below Kimi's; whether 1/sqrt(d_k) alone stays under 100
  // is question (b).
  train::set_setting(c.base, "qk_clip_tau", 10.0);
  c.d_ks = quick ? std::vector<std::size_t>{16, 256} : std::vector<std::size_t>{16, 64, 256};
  c.arms = {{"adamw", 3e-3}, {"muon", 3e-3}};
  // Axes of one task's or one scaling's own setting vary only the runs that read it: the context of 64 bytes is
  // char_lm's alone, and the two multipliers of qk_norm make two qk_norm arms without doubling the others.
  c.grid = {{"task", {"kv_recall", "char_lm"}}, {"seq_len", {64}, true}, {"qk_norm_scale", {"1", "inv_sqrt_dk"}, true}};
  c.seeds = quick ? std::vector<std::uint64_t>{0} : std::vector<std::uint64_t>{0, 1};
  return c;
}

const PresetRegistration logits_registration{
    {"logits", 60,
     "the largest attention logit under AdamW and Muon: none, sqrt_dk, qk_clip, qk_norm at scale 1 and 1/sqrt(d_k) x "
     "d_k 16, 64, 256 x 2 seeds on kv_recall and text (--text; run.sh passes the King James Bible) (Kimi Team 2025, "
     "MuonClip; Gemma 4)",
     grid}};

}  // namespace
}  // namespace xgrad::cli::presets::logits
