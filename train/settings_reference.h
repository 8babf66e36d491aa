// The settings reference (docs/settings.md): every setting a run takes, generated from the declarations, so the
// documentation cannot drift from the flags.
#pragma once

#include <ostream>

namespace xgrad::train {

/// Writes the Markdown reference of every core setting and every registered entry's settings (tasks, scalings,
/// attention layers, optimizers, schedules, ...): flag, config.json key, type, default, allowed values, what it is,
/// and which entries read it. Lists, not tables, so that a long description stays readable in a terminal.
void write_settings_reference(std::ostream& out);

}  // namespace xgrad::train
