// metrics.csv: a header row, then one row per step, flushed as it is written so a crash loses nothing.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace xgrad::train {

class MetricsLog {
 public:
  /// Creates (truncates) `path` and writes the header. Throws std::runtime_error naming the path on failure.
  MetricsLog(const std::string& path, std::vector<std::string> columns);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  /// Writes one row (one value per column, %.9g) and flushes. Throws std::runtime_error on a column count mismatch.
  void write(const std::vector<double>& row);
  const std::vector<std::string>& columns() const { return columns_; }

 private:
  std::FILE* file_;
  std::string path_;
  std::vector<std::string> columns_;
};

/// Reads a metrics.csv back: column names and rows of numbers (nan/inf allowed).
struct MetricsTable {
  std::vector<std::string> columns;
  std::vector<std::vector<double>> rows;
  /// Index of a column; throws std::runtime_error naming the column if absent.
  std::size_t column(const std::string& name) const;
};
MetricsTable read_metrics(const std::string& path);

}  // namespace xgrad::train
