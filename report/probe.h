// `xgrad probe`: explain's measurement of the first layer at initialisation without the backward pass
// (report/explain_measure.h: probe, format_probe_table), Vaswani et al.'s footnote 4 checked on the actual model.
#pragma once

#include "report/explain_measure.h"

namespace xgrad::report {

/// One line of probe's table: an arm as explain measures it.
using ProbeRow = ArmMeasurement;

/// probe's table: arm_table's forward columns (report/explain_figures.h) as text, and what they mean.
std::string format_probe_table(const std::vector<ArmMeasurement>& arms);

}  // namespace xgrad::report
