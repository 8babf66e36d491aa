// One picture of a comparison: each scaling's colour and dash, the smoothing of curves, report.html's first grouping.
// The gnuplot figures and report.html (picture_json) both draw with it, so they look the same.
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

/// The registered colour and dash; for an unknown scaling, an Okabe & Ito colour by its name's hash and a warning.
LineStyle scaling_style(const std::string& scale, std::vector<std::string>& warnings);

/// scaling_style's colour: the colour every figure, report.html and explain.html draw `scale` in.
std::string scaling_colour(const std::string& scale);

/// `colour` ("#RRGGBB") mixed with `white` (0 to 1) parts of white: the lighter shade of W_k and of theory lines.
std::string lighter(const std::string& colour, double white);

/// A style per line of a summary figure: its scaling's (the next dash for each further line of it); theory lighter.
std::vector<LineStyle> summary_styles(const SummaryFigure& figure, std::vector<std::string>& warnings);

/// The half-width in steps of every curve's smoothing: the longest run's rows / 150, rounded down (0: none).
double smoothing_half_width(const Comparison& c);

/// At a finite point at step s, the mean of the finite points within s ± min(half_width, s - first, last - s):
/// centred, not exponential, so a falling curve is not shifted to later steps. `x` ascending. page.js does the same.
std::vector<double> smooth(const std::vector<double>& x, const std::vector<double>& y, double half_width);

/// The picture for report.html: smoothing, dashes, scalings, "group_by" (settings_differing) and "facet_by" (the
/// non-scale one of those with the most values, 2 to 12; "" if none).
nlohmann::json picture_json(const Comparison& c);

}  // namespace xgrad::report
