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

/// One dash pattern per nn::scaling_dash_styles() entry: lengths of dash, gap, ... (empty: solid) in half line widths.
const std::vector<std::vector<double>>& line_dashes();

/// The registered entry's colour and dash; for a scaling this build does not know, solid in a colour of Okabe & Ito's
/// palette chosen by a hash of its name, with a warning naming it in `warnings` (once).
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

/// The smoothing of every curve, in the figures and report.html alike: at a finite point at step s, the mean of the
/// finite points within s ± min(half_width, s - first, last - s) steps (the ends keep their values; non-finite points
/// stay as gaps). Centred, not exponential: a falling curve is not shifted to later steps. `x` ascending.
std::vector<double> smooth(const std::vector<double>& x, const std::vector<double>& y, double half_width);

/// The picture as report.html reads it: the smoothing, line_dashes(), each scaling's colour and dash, "group_by" (the
/// settings in which runs differ, settings_differing) and "facet_by" (of those but the scaling, the first with the
/// most values, 2 to 12; "" when none has).
nlohmann::json picture_json(const Comparison& c);

}  // namespace xgrad::report
