// metrics.csv as an earlier release wrote it: the same table without the columns added since, for the tests that a
// run begun by that release resumes with the columns it began with.
#pragma once

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace xgrad::testing {

/// The comma-separated cells of one CSV line (no quoting: metrics.csv has none).
inline std::vector<std::string> csv_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream in(line);
  for (std::string cell; std::getline(in, cell, ',');) cells.push_back(cell);
  return cells;
}

/// Rewrites `csv` without the columns whose name `added_later` accepts; returns the new header and how many columns
/// were dropped.
inline std::pair<std::string, std::size_t> drop_columns(const std::filesystem::path& csv,
                                                        const std::function<bool(const std::string&)>& added_later) {
  std::vector<std::string> lines;
  {
    std::ifstream in(csv);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  std::vector<bool> keep;
  std::size_t dropped = 0;
  for (const auto& name : csv_cells(lines.at(0))) {
    keep.push_back(!added_later(name));
    dropped += !keep.back();
  }
  std::ofstream out(csv);
  std::string header;
  for (std::size_t row = 0; row < lines.size(); ++row) {
    const auto cells = csv_cells(lines[row]);
    std::string written;
    for (std::size_t i = 0; i < cells.size(); ++i)
      if (keep[i]) written += (written.empty() ? "" : ",") + cells[i];
    if (row == 0) header = written;
    out << written << "\n";
  }
  return {header, dropped};
}

/// The shape of a CSV file: its header line, its rows after the header, and how many of them have as many cells as
/// the header.
struct TableShape {
  std::string header;
  std::size_t rows = 0, rows_of_header_width = 0;
};

inline TableShape table_shape(const std::filesystem::path& csv) {
  TableShape t;
  std::ifstream in(csv);
  std::getline(in, t.header);
  const std::size_t width = csv_cells(t.header).size();
  for (std::string line; std::getline(in, line);) {
    ++t.rows;
    t.rows_of_header_width += csv_cells(line).size() == width;
  }
  return t;
}

}  // namespace xgrad::testing
