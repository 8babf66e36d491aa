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

/// The figures, one panel per d_k in each: loss by step (each run thin, the mean over seeds thick), W_q and W_k
/// gradient norm (log y; W_k dashed in a lighter shade), first-layer attention entropy and score std (log y), in the
/// picture's colours, dashes and smoothing (report/picture.h), as report.html. Each title gives the smoothing window,
/// and, for a quantity measured every k > 1 steps (--log-every), how many measurements it holds, or that it is not
/// smoothed. Every run is drawn, incomplete ones included; non-finite values leave gaps. The mean leaves out diverged
/// runs (as every statistic of an arm does), and the legend says how many. Long runs are thinned to at most ~1500
/// points per line. A drawn loss figure's caption names each scaling's colour and dash.
const std::vector<PlotFigure>& plot_figures();

/// `s` as one gnuplot string expression that gnuplot prints exactly as given and never interprets: single-quoted
/// (no backtick command substitution, no backslash escapes); a string holding quotes becomes
/// ('part'."\047".'part'). Control characters (newlines included) are written out visibly by escape_control.
/// Every name, label, key and title in a script goes through it.
std::string gnuplot_string(const std::string& s);

/// `v` as a number in a gnuplot data file or script: 9 significant digits (a float reads back exactly), "NaN" when
/// not finite (gnuplot leaves a gap).
std::string gnuplot_number(double v);

/// True when a `gnuplot` executable is on PATH (platform::find_program; no shell is asked).
bool gnuplot_available();

/// Writes `text` into the file `path` (a figure's data or script). Throws std::runtime_error naming the file and the
/// system's reason, also when only closing it fails (a full disk).
void write_plot_file(const std::string& path, const std::string& text);

/// Runs `gnuplot <name>.gp` in plots_dir as an argument vector, no shell (platform::run_program), its output appended
/// to plots_dir/gnuplot.log; true when it drew <name>.png and <name>.svg (an earlier pair is removed first). False,
/// with nothing run, for a name that is not a safe file stem (is_safe_file_stem, common/file_name.h): figure names
/// made from the data go through safe_file_stem first.
bool draw_figure(const std::string& plots_dir, const std::string& name);

/// Writes data files (plots_dir/data/) and scripts (plots_dir/<figure>.gp) and, if gnuplot is available, runs them
/// in plots_dir (output in plots_dir/gnuplot.log). Never throws for a gnuplot failure (it is reported in the
/// note); throws std::runtime_error when plots_dir cannot be written.
PlotOutcome write_plots(const Comparison& c, const std::string& plots_dir);

/// Draws each summary figure (summary_figures) like write_plots' figures, each line in its summary_styles style
/// with the point of its dash (theory lines without): plots_dir/data/<name>_<line>.dat (x, y, error bar low, high,
/// and the x it is drawn at, spread a few percent along a log x axis so error bars do not hide each other),
/// <name>.gp, and with gnuplot <name>.png and .svg. A figure whose name is not a safe file stem is not written. Appends
/// the drawn ones to outcome.summary_drawn and what failed to outcome.note; throws as write_plots.
void write_summary_plots(const std::vector<SummaryFigure>& figures, const std::string& plots_dir, PlotOutcome& outcome);

}  // namespace xgrad::report
