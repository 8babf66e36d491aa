// The tiny run the checkpoint-restore fuzz target and the seed generator share: its checkpoints are the seeds.
#pragma once

#include "train/config.h"

namespace xgrad::fuzz {

inline train::TrainConfig tiny_run() {
  train::TrainConfig c;
  c.settings.set("n_keys", 2);
  c.settings.set("n_values", 2);
  c.settings.set("n_pairs", 2);
  c.model.d_model = 4;
  c.model.d_ff = 8;
  c.out = "fuzz";
  return c;
}

}  // namespace xgrad::fuzz
