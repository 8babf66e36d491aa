// A training run small enough for a test: the configuration tests start from and vary.
#pragma once

#include <cstddef>
#include <string>

#include "train/config.h"

namespace xgrad::testing {

/// kv_recall with d_model 16 (every other setting at its default), `steps` steps, no console progress, written to
/// `out`. Trains in well under a second.
inline train::TrainConfig tiny_run(const std::string& out, std::size_t steps = 12) {
  train::TrainConfig c;
  c.d_model = 16;
  c.steps = steps;
  c.print_every = 1000;
  c.out = out;
  return c;
}

}  // namespace xgrad::testing
