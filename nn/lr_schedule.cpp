#include "nn/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include <sstream>

namespace xgrad::nn {

double linear_warmup(double lr, std::size_t step, std::size_t warmup_steps, double after) {
  if (step >= warmup_steps) return after;
  return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
}

double cosine_lr(double lr, double min_lr, std::size_t step, std::size_t warmup_steps, std::size_t steps) {
  if (step < warmup_steps) return linear_warmup(lr, step, warmup_steps, lr);
  const double t = static_cast<double>(step - warmup_steps);
  const double span = static_cast<double>(std::max<std::size_t>(steps - std::min(steps, warmup_steps), 1));
  return min_lr + (lr - min_lr) * 0.5 * (1.0 + std::cos(M_PI * std::min(t, span) / span));
}

// warmup_steps means the same in every schedule: one declaration, shared (one flag, --warmup-steps).
Setting warmup_steps_setting() {
  return whole_setting("warmup_steps", 0, 0, 1000000000,
                       "linear learning-rate warmup over the first N steps (0 = off)");
}

namespace {

std::string check_warmup(std::size_t steps, const SettingValues& v) {
  const auto warmup = v.get<std::size_t>("warmup_steps");
  if (warmup > steps)
    return "--warmup-steps: " + std::to_string(warmup) + " is more than the run's " + std::to_string(steps) +
           " steps (allowed: 0 to " + std::to_string(steps) + ")";
  return "";
}

LRScheduleEntry constant_entry() {
  LRScheduleEntry e;
  e.name = "constant";
  e.description = "the learning rate --lr at every step (after an optional linear warmup)";
  e.order = 10;
  e.settings = {warmup_steps_setting()};
  e.check = [](double, std::size_t steps, const SettingValues& v) { return check_warmup(steps, v); };
  e.lr_at = [](double lr, std::size_t step, std::size_t, const SettingValues& v) {
    return linear_warmup(lr, step, v.get<std::size_t>("warmup_steps"), lr);
  };
  return e;
}

LRScheduleEntry cosine_entry() {
  LRScheduleEntry e;
  e.name = "cosine";
  e.description =
      "cosine decay from --lr to --min-lr over the run (Loshchilov & Hutter 2017, SGDR, eq. 5), after "
      "an optional linear warmup";
  e.order = 20;
  e.depends_on_steps = true;
  e.settings = {warmup_steps_setting(),
                number_setting("min_lr", 0.0, 0.0, 1e30, "learning rate the cosine decay ends at")};
  e.check = [](double lr, std::size_t steps, const SettingValues& v) {
    const auto min_lr = v.get<double>("min_lr");
    if (min_lr > lr) {
      std::ostringstream out;
      out << "--min-lr: " << min_lr << " is above --lr " << lr << " (allowed: 0 to " << lr << ")";
      return out.str();
    }
    return check_warmup(steps, v);
  };
  e.lr_at = [](double lr, std::size_t step, std::size_t steps, const SettingValues& v) {
    return cosine_lr(lr, v.get<double>("min_lr"), step, v.get<std::size_t>("warmup_steps"), steps);
  };
  return e;
}

const Registration<LRScheduleEntry> constant_registration{constant_entry()};
const Registration<LRScheduleEntry> cosine_registration{cosine_entry()};

}  // namespace
}  // namespace xgrad::nn
