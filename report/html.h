// report.html of `xgrad compare`: one self-contained page embedding every run's metrics.csv series as JSON, uPlot
// and its own script (report/web); it draws any column of any run, grouped by any settings.
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

/// Min-max downsampling to at most max_points (at least 4): buckets of ceil(n / (max_points / 2)) points become two,
/// at their first and last x, holding their smallest and largest finite y in order (NaN: none finite), so a spike
/// keeps its height. Throws std::invalid_argument for x and y of unequal length.
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

/// The page's JSON: every run's metrics.csv columns downsampled (re-read), settings, picture, tables, findings,
/// summary figures and notes; non-finite values null. Fills `outcome`.
std::string report_json(const Comparison& c, const ReportContext& context, const HtmlOptions& options,
                        HtmlOutcome& outcome);

/// Writes report.html into `file` and finishes it (the caller commits it). Throws std::runtime_error when it cannot.
HtmlOutcome write_report_html(const Comparison& c, const ReportContext& context, platform::StagedFile& file,
                              const HtmlOptions& options = {});

}  // namespace xgrad::report
