#include "train/number_format.h"

#include <cmath>

#include <fmt/format.h>

namespace xgrad::train {

std::string format_number(double v, int decimals) {
  if (std::isnan(v)) return "—";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::fabs(v) >= 1e6) return fmt::format("{:.4g}", v);  // 1.477e+23, not 24 digits (or 300 for 1e300)
  return fmt::format("{:.{}f}", v, decimals);
}

}  // namespace xgrad::train
