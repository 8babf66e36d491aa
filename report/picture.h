// One picture of a comparison: how every figure draws a line (a colour and a dash per scaling, from its registry
// entry), smooths a curve, and how report.html groups and facets the runs at first. The PNG/SVG figures
// (report/plots.h) draw with it, and report.html gets it in its JSON (picture_json), so that its script draws the same
// colours, dashes and smoothing.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/stats.h"
#include "report/summary.h"

namespace xgrad::report {

/// How a line is drawn: colour "#RRGGBB" and a dash, an index into line_dashes().
struct LineStyle {
  std::string colour;
  std::size_t dash = 0;
};

/// One dash pattern per nn::scaling_dash_styles() entry, in its order: lengths of dash, gap, dash, ... (empty: solid)
/// in half line widths, as gnuplot's SVG terminal draws `dt (...)`; report.html draws them so too.
const std::vector<std::vector<double>>& line_dashes();

/// The registered entry's colour and dash. A scaling this build does not know is drawn solid in a colour of a fixed
/// palette (Okabe & Ito's colour-blind-safe hues) chosen by a hash of its name, so it keeps its colour across
/// comparisons, and a warning naming it joins `warnings` (once).
LineStyle scaling_style(const std::string& scale, std::vector<std::string>& warnings);

/// scaling_style's colour: the colour every figure, report.html and explain.html draw `scale` in.
std::string scaling_colour(const std::string& scale);

/// `colour` ("#RRGGBB") mixed with `white` (0 to 1) parts of white: the lighter shade of W_k and of theory lines.
std::string lighter(const std::string& colour, double white);

/// A style per line of a summary figure: its scaling's, the next dashes for further lines of one scaling (other
/// optimizers, widths); a theory line dashed, in a lighter shade.
std::vector<LineStyle> summary_styles(const SummaryFigure& figure, std::vector<std::string>& warnings);

/// The half-width in steps of every curve's smoothing: the longest run's rows / 150, rounded down (0: none).
double smoothing_half_width(const Comparison& c);

/// The smoothing of every curve, in the figures and report.html alike: a centred moving average. At a finite point
/// at step s, the mean of the finite points within s ± h, h = min(half_width, s - first, last - s), first and last
/// being the steps of the first and last finite points: the window shrinks at the ends, which keep their measured
/// values. A non-finite point stays (a gap) and counts in no mean. `x` ascending, as long as `y`. Centred, not
/// exponential: it does not shift a falling curve to later steps, and its window is in steps, so it means the same
/// on a series logged every k steps or downsampled for the page.
std::vector<double> smooth(const std::vector<double>& x, const std::vector<double>& y, double half_width);

/// The picture as report.html reads it: {"smoothing": {"method": "centred_mean", "half_width"}, "dashes":
/// line_dashes(), "scalings": {scale: {"colour", "dash"}}} for the scalings of c's arms, and its default view of the
/// runs: "group_by", the settings in which runs differ as report.md names arms (settings_differing: an optimizer's own
/// setting, beta1 or momentum, only where runs of one optimizer disagree on it; never the seeds), and "facet_by", the
/// sweep's main axis, one chart per value: of group_by but the scaling (the colour), the setting with the most
/// values, 2 to 12, the first of them in group_by's order (d_k first); "" when none has.
nlohmann::json picture_json(const Comparison& c);

}  // namespace xgrad::report
