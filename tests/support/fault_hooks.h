// Faults injected into a training run through train()'s StepHooks, to exercise the non-finite handling and the
// data-parallel parameter check without a flag or setting that production runs would carry.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <vector>

#include "platform/distributed.h"
#include "train/run_files.h"
#include "train/trainer.h"

namespace xgrad::testing {

inline bool at_one_of(const std::vector<std::size_t>& steps, std::size_t step) {
  return std::find(steps.begin(), steps.end(), step) != steps.end();
}

/// At these steps, on rank 0, one gradient element of the first attn.w_q.weight is set to NaN after backward.
inline train::StepHooks nan_gradient_at(std::vector<std::size_t> steps) {
  train::StepHooks hooks;
  hooks.after_backward = [steps](std::size_t step, const train::NamedParameters& named) {
    if (platform::rank() != 0 || !at_one_of(steps, step)) return;
    for (auto [param, p] : named)  // a copy of the handle: the tensor itself is shared
      if (train::metrics_columns::is_query_weight(param) && p.has_grad()) {
        p.mutable_grad().data()[0] = std::numeric_limits<float>::quiet_NaN();
        return;
      }
  };
  return hooks;
}

/// In a data-parallel run, the last rank adds 1 to its first parameter element at the start of these steps, so that
/// the ranks' parameters differ.
inline train::StepHooks desync_at(std::vector<std::size_t> steps) {
  train::StepHooks hooks;
  hooks.on_step_start = [steps](std::size_t step, const train::NamedParameters& named) {
    const int world = platform::world_size();
    if (world < 2 || platform::rank() + 1 != world || !at_one_of(steps, step)) return;
    Tensor first = named.front().second;  // a handle: the tensor itself is shared
    first.mutable_value().data()[0] += 1.0f;
  };
  return hooks;
}

}  // namespace xgrad::testing
