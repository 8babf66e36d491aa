// The report half of an experiment preset (`xgrad experiment --preset NAME`): the sections and figures a preset adds
// to report.md. It lives in the report library, so that `xgrad compare DIR` on a preset's sweep directory (whose
// sweep.json records the preset) writes the same sections again; the grid half is train/cli/presets/preset.h, and
// a preset's one file registers both with xgrad::cli::PresetRegistration.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "train/report/stats.h"
#include "train/report/summary.h"

namespace xgrad::train {

/// One section of report.md written by a preset: a level-2 heading with an anchor, its figures (each drawn with
/// gnuplot like the summary figures — PNG, SVG and an editable .gp in plots/ — and tabulated under its image unless
/// tabulate is false), then its markdown body. Every sentence of the body is computed from the numbers, and says
/// "not decided" where the seeds disagree (see report_markdown's rule in markdown.h).
struct PresetSection {
  std::string anchor;    // id for links, e.g. "lr-final-loss"; unique within the report
  std::string title;     // the heading's text
  std::string markdown;  // the body: sentences, tables (Table::markdown()), lists
  std::vector<SummaryFigure> figures;  // drawn before the body; names must be unique within the report
};

/// What a preset's sections are computed from.
struct PresetInput {
  const Comparison& comparison;  // every run read (runs, per-run stats, arms over seeds, lr groups)
  bool quick = false;            // the sweep ran the preset's --quick grid
  std::string out_dir;           // the report's directory
};

/// A preset's report: its name (as recorded in sweep.json) and the function computing its sections. Never throws
/// for missing or bad data: what cannot be computed is said in the section.
struct PresetReport {
  static constexpr const char* kind = "preset";
  std::string name;
  int order = 0;
  std::function<std::vector<PresetSection>(const PresetInput&)> sections;
};

/// The preset a sweep directory ran: sweep.json's "preset" {"name", "quick"}; name "" when the directory has no
/// sweep.json or it records no preset (a plain `xgrad sweep`).
struct PresetRecord {
  std::string name;
  bool quick = false;
};
PresetRecord read_preset_record(const std::string& sweep_dir);

/// One value per row of run_dir/metrics.csv: the maximum over every column whose name starts with `prefix` and ends
/// with `suffix` (e.g. "attn/l" and "/score_max_abs": the largest attention logit over layers and heads), NaN values
/// skipped (NaN where the row has none: a step without attention statistics). `steps`, if given, gets the step
/// column. Empty when no column matches. Throws std::runtime_error naming the file when it cannot be read.
std::vector<double> metrics_column_max(const std::string& run_dir, const std::string& prefix,
                                       const std::string& suffix, std::vector<double>* steps = nullptr);

}  // namespace xgrad::train
