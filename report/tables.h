// The tables of `xgrad compare` (per arm, and LR sensitivity per group of arms differing only in lr), as aligned
// text for the terminal and as markdown for report.md, and the cell formats the generated sentences share.
#pragma once

#include <string>
#include <vector>

#include "report/stats.h"
#include "train/number_format.h"

namespace xgrad::report {

/// The widest a text table pads a column to, in characters.
inline constexpr std::size_t kMaxPaddedWidth = 60;

struct Table {
  std::vector<std::string> header;
  std::vector<std::string> header_links;  // per column, the anchor its markdown header links to ("" or none: no link)
  std::vector<std::vector<std::string>> rows;
  bool plain_cells = false;  // the body's cells are plain text (names and values from the runs' data): markdown()
                             // escapes their markup, so a setting's value cannot form a link or an image
  /// Columns padded to their widest cell (UTF-8 aware) up to kMaxPaddedWidth, two spaces apart, text left- and
  /// numbers right-aligned; a longer cell is printed whole, unpadded. Cells through escape_name.
  std::string text() const;
  /// A GitHub-flavoured markdown table; every cell through markdown_escape.
  std::string markdown() const;
};

/// `text` safe as one line of report.md, in a table cell or a list item: a '|' not already escaped becomes "\|"
/// (a cell separator otherwise), CR and LF become spaces (they would end the row or item), '<' becomes "&lt;" (run
/// names and setting values are not HTML). Idempotent: escaping twice gives the same text.
std::string markdown_escape(const std::string& text);

/// `text` (labels, paths, setting values) as markdown that shows it literally: every character markdown could read
/// as markup (\ ` * _ [ ] > # ! ~, and outside a table cell < and |) escaped with a backslash, line breaks as
/// spaces, bytes that are not UTF-8 as \xHH. With table_cell, '<' and '|' are left to markdown_escape, which the
/// text must then pass through (Table::markdown does for every cell).
std::string markdown_text(const std::string& text, bool table_cell = false);

/// A name (run directory, setting value) inside report.md text that then passes through markdown_escape (a table
/// cell, a list item): escape_name's one line, with no live link, image, emphasis or code span.
std::string markdown_name(const std::string& name);

/// The anchor of a term's entry in report.md's glossary: "g-" and the term, lower case, spaces as dashes and braces
/// left out ("LR sensitivity" -> "g-lr-sensitivity", "mean_grad_norm_{w}" -> "g-mean_grad_norm_w").
std::string glossary_anchor(const std::string& term);

/// One row per arm (its markdown headers link to their glossary entries): settings, seeds, final loss mean ± sd, final
/// accuracy, steps to the loss and accuracy thresholds, mean loss over steps, fractions of steps with an exactly-zero
/// W_q / W_k gradient ("W_q grad =0") and with one below kNearZeroGradFraction of its step-0 norm ("W_q grad
/// <1e-06·step 0"), diverged runs. Every statistic is over the arm's kept runs (diverged ones left out); the diverged
/// column counts those.
Table arm_table(const Comparison& c);

/// One row per LR group: settings, the lr objective min(final, initial) per lr, the best lr, the sensitivity.
/// Empty (no rows) when no arms differ only in lr.
Table lr_table(const Comparison& c);

// Cell formats (also used in generated sentences).
std::string format_mean_sd(const MeanSd& m, int decimals = 3);  // "1.234 ± 0.056", "1.234" for one value
std::string format_percent(double fraction);                    // "0%", "12.5%", "100%"
std::string short_number(double v);                             // two significant digits: "0.05", "5e-10"; "—"
std::string format_steps(std::size_t reached, std::size_t n, double mean_step);  // "120", "120 (1/2)", "never"
std::string format_diverged(const ArmStats& arm);                                // "0/2", "1/2 (step 37)"
// Distinct seeds: "2", "2 (+1 incomplete)", "1 (incomplete)", "2 (3 runs)" when two runs share a seed.
std::string format_seeds(const ArmStats& arm);
/// "d_k=64 none adamw lr=0.003" plus the distinguishing extra settings; without the parts named in `omit`
/// (any of "d_k", "scale", "optimizer", "lr").
std::string arm_label(const ArmStats& arm, const std::vector<std::string>& extra_keys,
                      const std::vector<std::string>& omit = {});

}  // namespace xgrad::report
