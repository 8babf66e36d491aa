// report.md of `xgrad compare`: the tables, the plots, and sentences generated from the numbers.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "report/claims.h"
#include "report/plots.h"
#include "report/preset_report.h"
#include "report/stats.h"
#include "report/summary.h"

namespace xgrad::report {

/// Why arms are not compared (unpaired_arms): one line naming the settings they also differ in, or one per arm.
std::vector<std::string> no_comparison_notes(const Comparison& c);

/// The verdicts as sentences, a line per pair of arms.
struct StoryChecks {
  std::vector<std::string> holds;      // the data agrees
  std::vector<std::string> fails;      // the data disagrees (said plainly in the report)
  std::vector<std::string> undecided;  // the numbers cannot decide (missing, or both sides equal)
};
StoryChecks story_checks(const Comparison& c, const std::vector<Verdict>& verdicts);
inline StoryChecks story_checks(const Comparison& c) { return story_checks(c, judge(c, c.axis, baseline_of(c))); }

/// One line per arm and (seed, data_seed) that several of its runs share, naming their directories (relative to
/// `relative_to` if given) through escape_name.
std::vector<std::string> duplicate_seed_warnings(const Comparison& c, const std::string& relative_to = "");

/// One line of report.md's Findings: at most 40 words from report/text/findings.md, its details' and rule's anchors.
struct FindingLine {
  std::string text;      // plain text, no markdown
  std::string anchor;    // id of the report.md section with the details: "story", "results", "runs-read", ...
  std::string glossary;  // id of its glossary entry (glossary_anchor): "g-tolerance-loss", "g-entropy_first"
};

/// At most ten lines counted from the verdicts (judge(c, c.axis, baseline_of(c))) and the numbers: per pair of
/// compared values how the claims came out, step-0 attention per scaling and d_k, LR sensitivity, runs diverged.
std::vector<FindingLine> findings(const Comparison& c, const std::vector<Verdict>& verdicts);
inline std::vector<FindingLine> findings(const Comparison& c) { return findings(c, judge(c, c.axis, baseline_of(c))); }

/// A note standing for many alike cases (runs left out, ...): a line with count and reason, and the cases listed.
struct Note {
  std::string text;
  std::vector<std::string> items = {};
  /// The terminal's line: the text, then the first five items and how many more.
  std::string line() const;
};

struct ReportContext {
  std::string out_dir;  // report.md's directory (run paths are shown relative to it)
  bool plots_requested = true;
  PlotOutcome plots;                   // figures drawn (paths relative to out_dir/plots)
  std::vector<SummaryFigure> summary;  // summary_figures(c): tabulated in report.md, drawn if in plots.summary_drawn
  std::vector<std::string> skipped;    // run directories that could not be read, with the reason
  double loss_threshold_option = -1;   // as given (< 0: half the chance loss)
  PresetRecord preset;                 // the preset whose sweep this is (name "" for none)
  std::vector<PresetSection> preset_sections;  // its sections, written after the Findings
  std::string preset_note;                     // why its sections are missing ("" when written)
  std::vector<Note> sweep_notes;               // unfinished sweeps, runs they do not list, leftover partial writes
  std::string explain_page;  // explain.html of `xgrad explain` in the report directory, relative to it ("" if none)
  std::optional<std::vector<Verdict>> verdicts;  // judge(c, c.axis, baseline_of(c)), computed once (report_verdicts)
};

/// context.verdicts, or judge(c, c.axis, baseline_of(c)) when it holds none.
std::vector<Verdict> report_verdicts(const Comparison& c, const ReportContext& context);

/// The whole report.md text: the findings, then details, then a glossary of every term, statistic and tolerance.
std::string report_markdown(const Comparison& c, const ReportContext& context);

}  // namespace xgrad::report
