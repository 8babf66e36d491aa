// The figures of `xgrad compare`: data files and a gnuplot script per figure (a reader can edit and re-run it),
// drawn as PNG and SVG.
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

/// The figures of quantities by step (loss, W_q and W_k gradient norm, attention entropy and score std), a panel
/// per group of arms that differ in scale only.
const std::vector<PlotFigure>& plot_figures();

/// `s` as one gnuplot string expression printed as given, never interpreted. Every text in a script goes through it.
std::string gnuplot_string(const std::string& s);

/// `v` for gnuplot: 9 significant digits (a float reads back exactly), "NaN" (a gap) when not finite.
std::string gnuplot_number(double v);

/// True when a `gnuplot` executable is on PATH (platform::find_program; no shell is asked).
bool gnuplot_available();

/// Writes `text` into `path`. Throws std::runtime_error naming it, also when only closing fails (a full disk).
void write_plot_file(const std::string& path, const std::string& text);

/// Runs `gnuplot <name>.gp` in plots_dir (no shell; output to gnuplot.log); true when it drew <name>.png and .svg.
/// False, with nothing run, for a name that is not is_safe_file_stem.
bool draw_figure(const std::string& plots_dir, const std::string& name);

/// Writes plot_figures()' data and scripts into plots_dir and draws them with gnuplot if on PATH (a failure is said
/// in the note). Throws std::runtime_error when plots_dir cannot be written.
PlotOutcome write_plots(const Comparison& c, const std::string& plots_dir);

/// Draws each summary figure like write_plots (not one whose name is not a safe file stem), appending the drawn ones
/// to outcome.summary_drawn and what failed to outcome.note; throws as write_plots.
void write_summary_plots(const std::vector<SummaryFigure>& figures, const std::string& plots_dir, PlotOutcome& outcome);

}  // namespace xgrad::report
