#include "train/metrics_log.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace xgrad::train {

MetricsLog::MetricsLog(const std::string& path, std::vector<std::string> columns)
    : file_(std::fopen(path.c_str(), "w")), path_(path), columns_(std::move(columns)) {
  if (!file_) throw std::runtime_error("cannot open " + path + " for writing");
  for (std::size_t i = 0; i < columns_.size(); ++i) std::fprintf(file_, "%s%s", i ? "," : "", columns_[i].c_str());
  std::fprintf(file_, "\n");
  std::fflush(file_);
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::write(const std::vector<double>& row) {
  if (row.size() != columns_.size())
    throw std::runtime_error("metrics row has " + std::to_string(row.size()) + " values for " +
                             std::to_string(columns_.size()) + " columns");
  for (std::size_t i = 0; i < row.size(); ++i) std::fprintf(file_, "%s%.9g", i ? "," : "", row[i]);
  std::fprintf(file_, "\n");
  if (std::fflush(file_) != 0) throw std::runtime_error("writing " + path_ + " failed");
}

std::size_t MetricsTable::column(const std::string& name) const {
  for (std::size_t i = 0; i < columns.size(); ++i)
    if (columns[i] == name) return i;
  throw std::runtime_error("metrics table has no column '" + name + "'");
}

MetricsTable read_metrics(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  MetricsTable t;
  std::string line, cell;
  if (!std::getline(in, line)) throw std::runtime_error(path + " is empty (no header row)");
  std::stringstream header(line);
  while (std::getline(header, cell, ',')) t.columns.push_back(cell);
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<double> row;
    std::stringstream ss(line);
    while (std::getline(ss, cell, ',')) row.push_back(std::strtod(cell.c_str(), nullptr));
    if (row.size() != t.columns.size()) break;  // a row cut short by a crash ends the table
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace xgrad::train
