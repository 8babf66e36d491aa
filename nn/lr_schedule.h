// Learning-rate schedules: the learning rate of each step as a function of the step alone, so a resumed run takes
// the same rates as an uninterrupted one without any schedule state in the checkpoint.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "common/registry.h"
#include "common/setting.h"

namespace xgrad::nn {

/// The schedule registry (common/registry.h): each schedule registers itself from its own file with its settings,
/// so --lr-schedule, its flags (--warmup-steps, --min-lr), config.json, sweeps and compare take them from here.
/// Add one with a `Registration<LRScheduleEntry>` in a .cpp file of your own, linked into your executable as
/// examples/downstream links its scalings (README "Extending xgrad"); lr_schedule.cpp registers the built-in ones.
struct LRScheduleEntry {
  static constexpr const char* kind = "lr_schedule";
  std::string name;               ///< what --lr-schedule takes
  std::string description;        ///< one line with its source
  int order = 0;                  ///< place in listings
  std::vector<Setting> settings;  ///< its own settings (every declared key is in the SettingValues below)
  /// True when a step's rate depends on the run's length (a decay over the run): a resume may then not change
  /// --steps, which would change the rates of steps already taken.
  bool depends_on_steps = false;
  /// The settings' error for a run of `steps` steps at peak learning rate `lr`, or "" when they fit (e.g. a minimum
  /// above the peak). Optional.
  std::function<std::string(double lr, std::size_t steps, const SettingValues& settings)> check;
  /// The learning rate of step `step` (0-based) of a run of `steps` steps whose peak learning rate is `lr`. Must be
  /// a finite number > 0 for every step (the optimizer refuses 0 mid-run); check() should refuse settings that
  /// would give anything else.
  std::function<double(double lr, std::size_t step, std::size_t steps, const SettingValues& settings)> lr_at;
};
using LRScheduleRegistry = Registry<LRScheduleEntry>;

/// Linear warmup (Goyal et al. 2017, "Accurate, Large Minibatch SGD", section 2.2, without the constant start):
/// step s < warmup_steps takes lr * (s + 1) / warmup_steps, so the first step is not 0 and step warmup_steps - 1
/// reaches lr; later steps take `after`. Shared by the registered schedules through their `warmup_steps` setting.
double linear_warmup(double lr, std::size_t step, std::size_t warmup_steps, double after);

/// The `warmup_steps` setting (--warmup-steps) the built-in schedules declare; a schedule of your own that warms up
/// declares this one, so that one flag means one thing.
Setting warmup_steps_setting();

/// Cosine decay (Loshchilov & Hutter 2017, "SGDR", eq. 5, one cycle, no restart) from lr to min_lr over steps
/// [warmup_steps, steps): lr_t = min_lr + (lr - min_lr) (1 + cos(pi t / T)) / 2 with t = step - warmup_steps and
/// T = steps - warmup_steps, after a linear warmup over the first warmup_steps steps.
double cosine_lr(double lr, double min_lr, std::size_t step, std::size_t warmup_steps, std::size_t steps);

}  // namespace xgrad::nn
