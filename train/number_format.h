// How xgrad prints a number to people: the trainer's progress lines, the sweep's, and the report's tables.
#pragma once

#include <string>

namespace xgrad::train {

/// `decimals` fixed digits ("0.123"); "—" for NaN, "inf"/"-inf", and %.4g from 1e6 up ("1.477e+23").
std::string format_number(double v, int decimals = 3);

}  // namespace xgrad::train
