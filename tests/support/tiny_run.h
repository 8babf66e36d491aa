// A training run small enough for a test: the configuration tests start from and vary.
#pragma once

#include <cstddef>
#include <string>

#include "train/config.h"
#include "train/settings.h"

namespace xgrad::testing {

/// kv_recall with d_model 16 (every other setting at its default), `steps` steps, no console progress, written to
/// `out`. Trains in well under a second.
inline train::TrainConfig tiny_run(const std::string& out, std::size_t steps = 12) {
  train::TrainConfig c;
  c.model.d_model = 16;
  c.steps = steps;
  c.print_every = 1000;
  c.out = out;
  return c;
}

/// tiny_run on --task char_lm: the bytes of the file `text` (at least 170 bytes: each split holds a window of
/// seq_len 16 + 1), seq_len 16.
inline train::TrainConfig tiny_char_lm_run(const std::string& out, const std::string& text, std::size_t steps = 12) {
  train::TrainConfig c = tiny_run(out, steps);
  train::set_setting(c, "task", "char_lm");
  train::set_setting(c, "text", text);
  train::set_setting(c, "seq_len", 16);
  return c;
}

}  // namespace xgrad::testing
