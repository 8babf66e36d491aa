// The figures of `xgrad compare`, drawn by gnuplot: data files and one script per figure are written into a plots
// directory (so a reader can edit and re-run `gnuplot loss.gp` there), then gnuplot makes a PNG and an SVG of each.
#pragma once

#include <string>
#include <vector>

#include "report/picture.h"
#include "report/stats.h"
#include "report/summary.h"

namespace xgrad::report {

/// One figure: its file stem and what it shows (for report.md).
struct PlotFigure {
  std::string name;  // "loss" → loss.gp, loss.png, loss.svg
  std::string caption;
};

struct PlotOutcome {
  std::vector<PlotFigure> drawn;          // figures whose PNG and SVG gnuplot produced
  std::vector<PlotFigure> summary_drawn;  // the same for write_summary_plots' figures
  std::string note;                       // why plots were skipped or which failed ("" when all were drawn)
  std::vector<std::string> warnings;      // e.g. a scaling this build does not know, drawn in a palette colour
};

/// The figures of quantities by step, a panel per group of arms that differ in scale only: loss (each run thin, the
/// mean over kept runs thick), W_q and W_k gradient norm, first-layer attention entropy and score std, in the
/// picture's colours, dashes and smoothing (report/picture.h). Non-finite values leave gaps; long runs are thinned.
const std::vector<PlotFigure>& plot_figures();

/// `s` as one gnuplot string expression printed exactly as given, never interpreted: single-quoted, quotes as
/// ('part'."\047".'part'), control characters through escape_control. Every text in a script goes through it.
std::string gnuplot_string(const std::string& s);

/// `v` as a number in a gnuplot data file or script: 9 significant digits (a float reads back exactly), "NaN" when
/// not finite (gnuplot leaves a gap).
std::string gnuplot_number(double v);

/// True when a `gnuplot` executable is on PATH (platform::find_program; no shell is asked).
bool gnuplot_available();

/// Writes `text` into the file `path` (a figure's data or script). Throws std::runtime_error naming the file and the
/// system's reason, also when only closing it fails (a full disk).
void write_plot_file(const std::string& path, const std::string& text);

/// Runs `gnuplot <name>.gp` in plots_dir (no shell; output appended to gnuplot.log); true when it drew <name>.png
/// and <name>.svg. False, with nothing run, for a name that is not is_safe_file_stem (common/file_name.h).
bool draw_figure(const std::string& plots_dir, const std::string& name);

/// Writes plot_figures()' data files (plots_dir/data/) and scripts (<figure>.gp) and draws them when gnuplot is on
/// PATH. A gnuplot failure is said in the note; throws std::runtime_error when plots_dir cannot be written.
PlotOutcome write_plots(const Comparison& c, const std::string& plots_dir);

/// Draws each summary figure like write_plots' figures, each line in its summary_styles style: data/<name>_<line>.dat
/// (x, y, error bar low and high, the x drawn at), <name>.gp, .png and .svg; not one whose name is not a safe file
/// stem. Appends the drawn ones to outcome.summary_drawn and what failed to outcome.note; throws as write_plots.
void write_summary_plots(const std::vector<SummaryFigure>& figures, const std::string& plots_dir, PlotOutcome& outcome);

}  // namespace xgrad::report
