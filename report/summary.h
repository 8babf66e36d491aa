// The summary figures of `xgrad compare` as data: drawn by plots.cpp and report.html, tabulated in report.md.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "report/stats.h"

namespace xgrad::report {

/// One point of a summary line: the value at one d_k (or learning rate) and its error bar.
struct SummaryPoint {
  double x = kNoValue;   // d_k, or the learning rate
  double y = kNoValue;   // the value drawn; NaN: nothing to draw here (e.g. every run diverged)
  double lo = kNoValue;  // the error bar's ends (NaN: none); what they are is in the figure's caption
  double hi = kNoValue;
  std::size_t n = 0;           // runs behind y
  std::size_t n_diverged = 0;  // runs at this x left out because they diverged
};

/// A point at `x`: `m`'s mean, ± sd bars for more than one value (or `bars_of_one`), and runs left out diverged.
SummaryPoint mean_point(double x, const MeanSd& m, std::size_t n_diverged = 0, bool bars_of_one = false);

/// One line of a summary figure: arms that differ only in the x quantity (d_k or lr).
struct SummaryLine {
  std::string label;                 // the settings the line holds fixed, e.g. "sqrt_dk adamw lr=0.001"
  std::string scale;                 // its scaling (the colour)
  bool theory = false;               // a theory line (no error bars)
  std::vector<SummaryPoint> points;  // by increasing x
};

struct SummaryFigure {
  std::string name;     // file stem: "final_loss_vs_d_k" → plots/final_loss_vs_d_k.png, .svg, .gp (is_safe_file_stem)
  std::string title;    // what it shows, one line
  std::string caption;  // how it was computed: what the points and error bars are, which runs are left out
  std::string x_label, y_label;
  bool log_x = false;  // x on a log axis (base 2 for d_k, base 10 for the learning rate)
  bool log_y = false;
  bool error_bar_sd = true;  // the error bars are mean ± sd (false: the min and max over runs)
  bool tabulate = true;      // points with error bars, tabulated in report.md; false: curves over many steps
  std::vector<SummaryLine> lines;
  std::vector<std::string> notes;  // what could not be drawn and why
};

/// How a figure's axis is scaled.
enum class Axis { linear, log };

/// A figure with its text and axes set (see SummaryFigure); error bars ± sd, tabulated, no lines yet.
SummaryFigure summary_figure(std::string name, std::string title, std::string caption, std::string x_label, Axis x,
                             std::string y_label, Axis y);

/// The figure `name` with its title, caption and axis labels from report/text/figures.md ("name.title", ...).
/// Throws std::out_of_range naming the key when the file lacks one.
SummaryFigure summary_figure(const std::string& name, Axis x, Axis y);

/// A line labelled `label` in `scale`'s colour and dash style, no points yet.
SummaryLine summary_line(std::string label, std::string scale);

/// The summary figures the runs of `c` support, in report order: against d_k (with two values or more) and against
/// lr (with an lr group). Never throws for bad data: what cannot be drawn is said in the figure's notes.
std::vector<SummaryFigure> summary_figures(const Comparison& c);

/// The settings of an arm that decide the model and batch at step 0 (but d_k), serialised for grouping.
std::string step0_key(const nlohmann::json& settings);

}  // namespace xgrad::report
