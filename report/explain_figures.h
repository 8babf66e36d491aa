// The figures of `xgrad explain`: ids, titles and captions, the score histogram, and gnuplot PNG + SVG of each.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "report/explain.h"
#include "report/tables.h"
#include "report/text.h"

namespace xgrad::report {

struct ExplainFigure {
  std::string id;  // the file stem in figures/ and the page's figure id
  std::string title;
  std::string caption;  // what to look at
};

/// Every figure a section may name, in a fixed order (their words: report/text/explain.md).
const std::vector<ExplainFigure>& explain_figures();

/// The figure `id`, or null.
const ExplainFigure* find_explain_figure(const std::string& id);

/// A per-arm number by name, for explain.json's points, the tables of explain.md and probe and the verdicts' fields.
struct ArmNumber {
  const char* name;  // the JSON key and template field: "score_std"
  double ArmMeasurement::*field;
  const char* header;    // its table column, or null
  const char* format;    // "{:.3f}"; "%" for a share
  bool forward = false;  // measured by the forward pass alone: a column of probe's table
};
const std::vector<ArmNumber>& arm_numbers();

/// One row per arm: d_k, scale and each arm_numbers() column (`forward_only`: only the forward pass's).
Table arm_table(const std::vector<ArmMeasurement>& arms, bool forward_only);

/// A share as a template shows it: "12.5%", "n/a" for NaN.
std::string percent_text(double share);

/// Every arm_numbers() value of `a`, its d_k and counts as template fields named prefix + name.
void add_arm_fields(Fields& fields, const std::string& prefix, const ArmMeasurement& a);

/// "unscaled" for the reference scaling, "1/sqrt(d_k)" for sqrt_dk, the name otherwise.
std::string scale_label_of(const std::string& scale);

/// A density histogram of an arm's scores over score_mean ± 4.5 times the larger of its measured and theory std.
struct Histogram {
  double x0 = 0, width = 0;
  std::vector<double> density;
};
inline constexpr std::size_t kHistogramBins = 60;
Histogram score_histogram(const ArmMeasurement& a);

/// Writes dir/<id>.gp and dir/data/ of every figure, drawn with gnuplot if on PATH. Returns the ids drawn; `note` says
/// why some are missing. Throws std::runtime_error naming a path that cannot be written.
std::vector<std::string> write_explain_figures(const Explanation& e, const std::string& dir, std::string& note);

/// explain.md: the verdicts in a table, then each section with its figures (those drawn as images) and the numbers.
std::string explain_markdown(const Explanation& e, const std::vector<std::string>& figures_drawn,
                             const std::string& plot_note);

}  // namespace xgrad::report
