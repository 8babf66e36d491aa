// metrics.csv as a file: a header row of column names, then one row per step of numbers (%.9g, nan/inf as printf
// spells them), comma-separated, each row flushed as it is written so a crash loses at most the row in progress.
// MetricsLog writes it; MetricsReader reads it back for compare, resume and tests. The columns themselves are
// train/run_files.h's.
#pragma once

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace xgrad::train {

/// fopen(path, "w") that refuses a symbolic link (ELOOP) instead of creating or truncating what it points to: the
/// files a run writes row by row (metrics.csv, the TensorBoard event file). Null with errno set on failure.
std::FILE* open_for_writing(const std::string& path);

class MetricsLog {
 public:
  /// Creates (truncates) `path` and writes the header. Throws std::runtime_error naming the path and the system's
  /// reason on failure ("writing r/metrics.csv failed: No space left on device").
  MetricsLog(const std::string& path, std::vector<std::string> columns);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  /// Writes one row (one value per column, %.9g) and flushes; a column `unmeasured` marks (when given, one flag per
  /// column) is left empty: not computed this step, which keeps the rows between measured steps short (a model of
  /// 64 layers of 64 heads has 43,200 such cells). Throws std::runtime_error on a column count mismatch, and naming
  /// the path and the system's reason when the row cannot be written.
  void write(const std::vector<double>& row, const std::vector<bool>& unmeasured = {});
  const std::vector<std::string>& columns() const { return columns_; }

 private:
  void flush();  // throws as write() does
  std::FILE* file_;
  std::string path_;
  std::vector<std::string> columns_;
};

/// The longest line MetricsReader reads (16 MiB). The widest row xgrad writes, a model of 64 layers of 64 heads
/// (43,290 columns of at most 16 characters and a comma), is under 1 MiB; a longer line is refused, naming the file and
/// line.
inline constexpr std::size_t kMaxMetricsLineBytes = std::size_t{16} << 20;

/// Reads a metrics.csv row by row, so a long run's file is never held whole.
class MetricsReader {
 public:
  /// Opens `path` and reads the header row. A UTF-8 byte-order mark before it and a CR before any newline are
  /// dropped (not part of a column name or cell). Throws std::runtime_error naming the path if it cannot be opened or
  /// has no header row, or a header line longer than kMaxMetricsLineBytes.
  explicit MetricsReader(const std::string& path);
  const std::vector<std::string>& columns() const { return columns_; }
  /// The header row as it is in the file, without its newline.
  const std::string& header() const { return header_; }
  /// Reads the next data row (empty lines are skipped). False at the end of the file or at a row cut short: one
  /// without its newline (the writer stopped mid-row) or with a cell count other than the number of columns.
  /// Throws std::runtime_error naming the path and line for a line longer than kMaxMetricsLineBytes.
  bool next();
  /// The last row read: its text without the newline, and one value per column. An empty cell (not measured that
  /// step) reads as NaN; a cell that is not a number reads as NaN and is counted in malformed_cells().
  const std::string& line() const { return line_; }
  const std::vector<double>& cells() const { return cells_; }
  std::size_t malformed_cells() const { return malformed_; }
  /// Whether cell `i` of the last row read was not a number (it reads as NaN). `i` < columns().size().
  bool malformed(std::size_t i) const { return malformed_flags_[i] == kMalformed; }
  /// Whether cell `i` of the last row read was empty (not measured that step; it reads as NaN). `i` <
  /// columns().size().
  bool empty(std::size_t i) const { return malformed_flags_[i] == kEmpty; }
  /// What is wrong with the last row read, or "": "<path>: row R (line L), column C (<name>): '<text>' is not a
  /// number" for the first cell holding text that is not a number (an empty cell is a value not recorded, not an
  /// error), or "<path>: row R (line L) has N fields, the header M columns" for a row with too many.
  const std::string& row_error() const { return row_error_; }
  /// Data rows read so far (the cut row, if any, included).
  std::size_t rows() const { return rows_; }
  /// next() returned false at a row cut short rather than at the end of the file.
  bool cut() const { return cut_; }

 private:
  std::ifstream in_;
  std::string path_;
  std::string header_, line_, row_error_;
  std::vector<std::string> columns_;
  std::vector<double> cells_;
  static constexpr char kMalformed = 1, kEmpty = 2;
  std::vector<char> malformed_flags_;                 // per cell of the last row: 0 (a number), kMalformed or kEmpty
  std::size_t malformed_ = 0, rows_ = 0, lines_ = 1;  // lines_: lines read, the header included
  bool cut_ = false;
  std::string where() const;  // "<path>: row R (line L)" of the last row read
};

/// A whole metrics.csv in memory: column names and its complete rows (a row cut short ends the table).
struct MetricsTable {
  std::vector<std::string> columns;
  std::vector<std::vector<double>> rows;
  /// Index of a column; throws std::runtime_error naming the column if absent.
  std::size_t column(const std::string& name) const;
};
/// Reads `path` with MetricsReader. Throws std::runtime_error naming the path (see MetricsReader).
MetricsTable read_metrics(const std::string& path);

}  // namespace xgrad::train
