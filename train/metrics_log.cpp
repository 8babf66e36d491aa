#include "train/metrics_log.h"

#include <algorithm>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <istream>
#include <limits>
#include <stdexcept>

#include <fcntl.h>
#include <unistd.h>

namespace xgrad::train {

namespace {

// std::getline with a limit: a hostile file (one line of a GiB, sparse on disk) is refused after kMaxMetricsLineBytes
// rather than read whole into memory. At the end of a last line without a newline it sets eof, as getline does.
bool read_line(std::istream& in, std::string& line, const std::string& path, std::size_t line_number) {
  line.clear();
  std::streambuf* buf = in.rdbuf();
  for (;;) {
    const int ch = buf->sbumpc();
    if (ch == std::char_traits<char>::eof()) {
      in.setstate(line.empty() ? std::ios::eofbit | std::ios::failbit : std::ios::eofbit);
      return !line.empty();
    }
    if (ch == '\n') return true;
    line.push_back(static_cast<char>(ch));
    if (line.size() > kMaxMetricsLineBytes)
      throw std::runtime_error(path + ": line " + std::to_string(line_number) + " is longer than " +
                               std::to_string(kMaxMetricsLineBytes >> 20) +
                               " MiB, far wider than any row xgrad writes; not a metrics.csv xgrad can read");
  }
}

}  // namespace

std::FILE* open_for_writing(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return nullptr;
  std::FILE* file = ::fdopen(fd, "w");
  if (!file) ::close(fd);
  return file;
}

MetricsLog::MetricsLog(const std::string& path, std::vector<std::string> columns)
    : file_(open_for_writing(path)), path_(path), columns_(std::move(columns)) {
  if (!file_) throw std::runtime_error("cannot open " + path + " for writing: " + std::strerror(errno));
  for (std::size_t i = 0; i < columns_.size(); ++i) std::fprintf(file_, "%s%s", i ? "," : "", columns_[i].c_str());
  std::fprintf(file_, "\n");
  flush();
}

void MetricsLog::flush() {
  // A full disk or quota shows here first (stdio buffers the row): said with the system's reason.
  if (std::fflush(file_) != 0 || std::ferror(file_))
    throw std::runtime_error("writing " + path_ + " failed: " + std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::write(const std::vector<double>& row, const std::vector<bool>& unmeasured) {
  if (row.size() != columns_.size() || (!unmeasured.empty() && unmeasured.size() != columns_.size()))
    throw std::runtime_error("metrics row has " + std::to_string(row.size()) + " values for " +
                             std::to_string(columns_.size()) + " columns");
  for (std::size_t i = 0; i < row.size(); ++i) {
    if (i) std::fputc(',', file_);
    if (unmeasured.empty() || !unmeasured[i]) std::fprintf(file_, "%.9g", row[i]);
  }
  std::fprintf(file_, "\n");
  flush();
}

MetricsReader::MetricsReader(const std::string& path) : in_(path, std::ios::binary), path_(path) {
  if (!in_) throw std::runtime_error("cannot open " + path);
  // A file saved by a spreadsheet or editor may start with a UTF-8 byte-order mark and end lines with CRLF:
  // neither belongs to a column name or a cell.
  if (read_line(in_, header_, path_, 1)) {
    if (header_.compare(0, 3, "\xEF\xBB\xBF") == 0) header_.erase(0, 3);
    if (!header_.empty() && header_.back() == '\r') header_.pop_back();
  }
  if (header_.empty()) throw std::runtime_error(path + " has no header row");
  for (std::size_t start = 0;;) {
    const auto comma = header_.find(',', start);
    columns_.push_back(header_.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  cells_.resize(columns_.size());
  malformed_flags_.assign(columns_.size(), 0);
}

bool MetricsReader::next() {
  while (read_line(in_, line_, path_, ++lines_)) {
    // getline sets eof when the line had no newline: the writer stopped mid-row.
    const bool no_newline = in_.eof();
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    if (line_.empty()) continue;
    ++rows_;
    row_error_.clear();
    malformed_ = 0;
    std::fill(malformed_flags_.begin(), malformed_flags_.end(), 0);
    std::size_t n_cells = 0;
    for (std::size_t start = 0;;) {
      if (n_cells < cells_.size()) {
        const char* begin = line_.c_str() + start;
        char* end = nullptr;
        cells_[n_cells] = std::strtod(begin, &end);
        // strtod returns 0 for an empty or unparsable cell; it reads as NaN, not as a measured zero. An empty cell
        // is one the writer left out (not measured that step); anything else that is not a number is malformed.
        // The cell ends at the next comma or the line's end, not at a NUL byte inside it ("1\0garbage").
        const std::size_t cell_end = std::min(line_.find(',', start), line_.size());
        if (end == begin || end != line_.c_str() + cell_end) {
          cells_[n_cells] = std::numeric_limits<double>::quiet_NaN();
          const bool empty = cell_end == start;
          malformed_flags_[n_cells] = empty ? kEmpty : kMalformed;
          malformed_ += empty ? 0 : 1;
          const std::size_t comma = line_.find(',', start);
          const std::string text = line_.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
          // An empty cell is a value not recorded; text that is not a number is a file xgrad did not write.
          if (!text.empty() && row_error_.empty())
            row_error_ = where() + ", column " + std::to_string(n_cells + 1) + " (" + columns_[n_cells] + "): '" +
                         (text.size() > 40 ? text.substr(0, 40) + "..." : text) + "' is not a number";
        }
      }
      ++n_cells;
      const auto comma = line_.find(',', start);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    // A row without its newline is one the writer is still writing: "na" may be the start of "nan".
    if (no_newline) row_error_.clear();
    if (!no_newline && n_cells > columns_.size())
      row_error_ = where() + " has " + std::to_string(n_cells) + " fields, the header " +
                   std::to_string(columns_.size()) + " columns";
    cut_ = no_newline || n_cells != columns_.size();
    return !cut_;
  }
  return false;
}

std::string MetricsReader::where() const {
  return path_ + ": row " + std::to_string(rows_) + " (line " + std::to_string(lines_) + ")";
}

std::size_t MetricsTable::column(const std::string& name) const {
  for (std::size_t i = 0; i < columns.size(); ++i)
    if (columns[i] == name) return i;
  throw std::runtime_error("metrics table has no column '" + name + "'");
}

MetricsTable read_metrics(const std::string& path) {
  MetricsReader reader(path);
  MetricsTable t;
  t.columns = reader.columns();
  while (reader.next()) t.rows.push_back(reader.cells());
  return t;
}

}  // namespace xgrad::train
