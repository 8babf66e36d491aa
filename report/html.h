// report.html of `xgrad compare`: one self-contained page (no server, no network) that embeds every run's
// metrics.csv series as JSON, the vendored uPlot and the page's own script (report/web), and draws any column
// of any run, grouped by any settings, with bands, smoothing, log axes, zoom, the arms table and CSV downloads.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "report/markdown.h"
#include "report/stats.h"

namespace xgrad::platform {
class StagedFile;
}

namespace xgrad::report {

/// A series reduced for drawing: the points kept, in order.
struct DownsampledSeries {
  std::vector<double> x;
  std::vector<double> y;     // NaN where the bucket held no finite value (drawn as a gap)
  bool downsampled = false;  // false: x and y are the input, unchanged
};

/// Min-max bucket downsampling of a series to at most max_points (at least 4) points: buckets of w = ceil(n /
/// (max_points / 2)) points become two, at the x of their first and last point, holding their smallest and largest
/// finite y in order (a spike keeps its height; series of one length share their x); NaN for a bucket without a finite
/// y; a last bucket of one point stays. Throws std::invalid_argument for x and y of unequal length.
DownsampledSeries downsample_min_max(const std::vector<double>& x, const std::vector<double>& y,
                                     std::size_t max_points);

struct HtmlOptions {
  std::size_t max_points = 2000;         // per series, before the page's budget lowers it
  std::size_t max_data_bytes = 2850000;  // the embedded JSON's budget (the page stays under 3 MB with its scripts)
  int significant_digits = 4;            // of the series' values in the page (the final-metrics CSV is exact)
};

/// What the page holds, for the caller's console line and for tests.
struct HtmlOutcome {
  std::size_t bytes = 0;       // size of report.html
  std::size_t max_points = 0;  // the point limit the budget left the columns but the headline ones (loss, ...)
  bool downsampled = false;    // some series was downsampled
  std::vector<Note> notes;     // what the page leaves out or changes, one line each (also shown in it)
};

/// The page's JSON: the runs with every metrics.csv column downsampled (re-read; a run whose metrics.csv is gone with
/// what `c` holds, and a note), the settings that vary, the picture, the arms table, each run's final metrics, the
/// findings and checks, the summary figures and the notes. Non-finite values are null. Fills `outcome`.
std::string report_json(const Comparison& c, const ReportContext& context, const HtmlOptions& options,
                        HtmlOutcome& outcome);

/// Writes report.html (report_json with uPlot, the page's script and style inline) into `file` and finishes it (the
/// caller commits it). Throws std::runtime_error naming the file when it cannot be written.
HtmlOutcome write_report_html(const Comparison& c, const ReportContext& context, platform::StagedFile& file,
                              const HtmlOptions& options = {});

}  // namespace xgrad::report
