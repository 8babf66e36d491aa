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

/// Min-max bucket downsampling of a series, for drawing. With x.size() <= max_points every point is kept as given.
/// Otherwise the points are cut into buckets of w = ceil(n / (max_points / 2)) consecutive points, and each bucket
/// becomes two points, at the x of its first and its last point, holding its smallest and its largest finite y in the
/// order they occur: a one-step spike keeps its height, and every series of the same length gets the same x (curves of
/// runs stay aligned, and the mean over runs is taken at common steps). A bucket without a finite y gives two NaN
/// points (a gap); a last bucket of one point gives one. The result has at most max_points points. max_points < 4 is
/// taken as 4. x and y of equal length (throws std::invalid_argument otherwise).
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
  std::size_t max_points = 0;  // the per-series point limit of the columns other than the headline ones (loss,
                               // accuracy, gradient norms of W_q, W_k and all: those keep options.max_points unless
                               // the budget needs them too), lowered from options.max_points by the budget
  bool downsampled = false;    // some series was downsampled
  std::vector<Note> notes;     // what the page leaves out or changes, one line each (also shown in it)
};

/// The page's JSON (the contents of its <script type="application/json" id="xgrad-data"> block): the runs of `c`
/// with every metrics.csv column downsampled (re-read from each run directory; of a run whose metrics.csv can no
/// longer be read, the loss, accuracy and eval_loss `c` holds, with a note), settings that vary between runs, the
/// picture (picture_json), the arms table, each run's final metrics, report.md's findings and checks, the summary
/// figures of `context.summary`, and the notes ({"kind", "count", "text", "items"}). Non-finite values are null (JSON
/// has no NaN). `outcome` receives max_points, downsampled and notes.
std::string report_json(const Comparison& c, const ReportContext& context, const HtmlOptions& options,
                        HtmlOutcome& outcome);

/// Writes report.html into `file` and finishes it (the caller commits it): report_json embedded with uPlot, the
/// page's script and style, all inline. Throws std::runtime_error naming the file when it cannot be written.
HtmlOutcome write_report_html(const Comparison& c, const ReportContext& context, platform::StagedFile& file,
                              const HtmlOptions& options = {});

}  // namespace xgrad::report
