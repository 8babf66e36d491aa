// The tables of `xgrad compare` as aligned text and as markdown, and the cell formats the sentences share.
#pragma once

#include <functional>
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
  bool plain_cells = false;  // cells and header are data: markdown() escapes their markup (no link or image of theirs)
  /// Columns padded to their widest cell up to kMaxPaddedWidth, numbers right-aligned; cells through escape_name.
  std::string text() const;
  /// A GitHub-flavoured markdown table; every cell through markdown_escape.
  std::string markdown() const;
};

/// `text` safe as one line of report.md (a table cell, a list item): an unescaped '|' as "\|", CR and LF as spaces,
/// '<' as "&lt;". Idempotent.
std::string markdown_escape(const std::string& text);

/// `text` as markdown shown literally: markup escaped (< and | too outside a table cell), line breaks as spaces,
/// bytes that are not UTF-8 as \xHH. A table_cell then needs markdown_escape.
std::string markdown_text(const std::string& text, bool table_cell = false);

/// A name (run directory, setting value) for a table cell or list item: escape_name, then markdown_text's cell form.
std::string markdown_name(const std::string& name);

/// A term's glossary anchor: "LR sensitivity" -> "g-lr-sensitivity", "mean_grad_norm_{w}" -> "g-mean_grad_norm_w".
std::string glossary_anchor(const std::string& term);

/// A table's column: its header, the glossary term its header links to ("": no link), its cell of a row.
template <class Row>
struct Column {
  std::string header, term;
  std::function<std::string(const Row&)> cell;
};

/// A row per item of `rows`, a cell per column; the cells are data (plain_cells).
template <class Row>
Table column_table(const std::vector<Row>& rows, const std::vector<Column<Row>>& columns) {
  Table t;
  t.plain_cells = true;
  for (const Column<Row>& column : columns) {
    t.header.push_back(column.header);
    t.header_links.push_back(column.term.empty() ? "" : glossary_anchor(column.term));
  }
  for (const Row& row : rows) {
    t.rows.emplace_back();
    for (const Column<Row>& column : columns) t.rows.back().push_back(column.cell(row));
  }
  return t;
}

/// One row per arm: its settings and statistics over its kept runs, each header linking to its glossary entry.
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
/// `omit` with each of "optimizer" and "lr" that every arm of `arms` holds alike: the parts labels need not repeat.
std::vector<std::string> shared_label_parts(const std::vector<ArmStats>& arms, std::vector<std::string> omit);

}  // namespace xgrad::report
