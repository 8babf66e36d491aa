#include "train/tensorboard.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>

#include <fcntl.h>
#include <unistd.h>

#include "platform/atomic_file.h"
#include "train/metrics_log.h"
#include "train/run_files.h"

namespace xgrad::train {

namespace fs = std::filesystem;

namespace {

// The byte-at-a-time table of the reflected Castagnoli polynomial.
std::array<std::uint32_t, 256> make_crc32c_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? 0x82F63B78u : 0u);
    table[i] = crc;
  }
  return table;
}

// Protocol buffer wire format (protobuf.dev/programming-guides/encoding): a field's key is its number << 3 | its
// wire type; varint 0, fixed64 1, length-delimited 2, fixed32 5.
void put_varint(std::string& out, std::uint64_t v) {
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>((v & 0x7F) | 0x80));
  out.push_back(static_cast<char>(v));
}

template <class T>
void put_little_endian(std::string& out, T bits) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
}

void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, static_cast<std::uint64_t>(field) << 3 | static_cast<std::uint64_t>(wire_type));
}

void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out.append(bytes.data(), bytes.size());
}

// Event.wall_time (field 1, double) and Event.step (field 2, int64; left out when 0, its default).
std::string event_header(double wall_time, std::int64_t step) {
  std::string out;
  std::uint64_t bits = 0;
  std::memcpy(&bits, &wall_time, sizeof bits);
  put_key(out, 1, 1);
  put_little_endian(out, bits);
  if (step != 0) {
    put_key(out, 2, 0);
    put_varint(out, static_cast<std::uint64_t>(step));
  }
  return out;
}

// Summary.Value: tag (field 1), simple_value (field 2, float).
std::string summary_value(const std::string& tag, float value) {
  std::string out;
  put_bytes(out, 1, tag);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, 2, 5);
  put_little_endian(out, bits);
  return out;
}

// A cell's number as metrics.csv would write it.
std::string as_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
}

// The float nearest to metrics.csv's cell for `value` (%.9g, MetricsLog::write), not to `value` itself: rounding
// twice can land one float apart, and the event file of a run then equals the one export writes from its metrics.csv.
float as_written(double value) { return static_cast<float>(std::strtod(as_text(value).c_str(), nullptr)); }

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  std::string host(name);
  for (char& c : host)
    if (c == '/') c = '_';
  return host;
}

// The wall time of each complete row of the metrics.csv at `path`, reconstructed from its step_ms column: the last
// row at `end_time`, each earlier one its successors' step_ms earlier (a cell without a number counts 0 ms).
std::vector<double> row_wall_times(const std::string& path, double end_time) {
  MetricsReader reader(path);
  std::size_t column = reader.columns().size();
  for (std::size_t i = 0; i < reader.columns().size(); ++i)
    if (reader.columns()[i] == metrics_columns::kStepMs) column = i;
  std::vector<double> ms;
  while (reader.next()) ms.push_back(column < reader.columns().size() ? reader.cells()[column] : 0.0);
  std::vector<double> wall_time(ms.size(), end_time);
  for (std::size_t r = ms.size(); r-- > 1;)
    wall_time[r - 1] = wall_time[r] - (std::isfinite(ms[r]) && ms[r] > 0 ? ms[r] / 1000 : 0.0);
  return wall_time;
}

// Cell `column` of a metrics.csv row (cells split at commas, as MetricsReader splits them).
std::string_view cell_text(std::string_view line, std::size_t column) {
  for (; column > 0; --column) {
    const std::size_t comma = line.find(',');
    if (comma == std::string_view::npos) return {};
    line.remove_prefix(comma + 1);
  }
  return line.substr(0, line.find(','));
}

// The step a step cell holds: decimal digits (no sign, space or hex), read as an integer (a double would round
// steps above 2^53), at most 2^63 - 1; or exactly what metrics.csv's %.9g writes for a whole step from 10^9 on
// ("1e+09"). Nothing when the text is neither.
std::optional<std::int64_t> parse_step(std::string_view text) {
  if (text.empty()) return std::nullopt;
  if (std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    std::int64_t step = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), step);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return step;
  }
  const std::string written(text);
  const double value = std::strtod(written.c_str(), nullptr);
  if (value >= 1e9 && is_event_step(value) && as_text(value) == written) return static_cast<std::int64_t>(value);
  return std::nullopt;
}

// Writes the complete rows of the metrics.csv at `path` to `file`, row r at wall_time[r], empty cells left out; a
// step cell that is not a step (parse_step) is refused naming its place, never cast or read as the row's index. An
// empty step cell (a file not of xgrad's writing) leaves the row's place as its step.
void write_rows(EventFile& file, const std::string& path, const std::vector<double>& wall_time) {
  MetricsReader reader(path);
  std::size_t step_column = reader.columns().size();
  for (std::size_t i = 0; i < reader.columns().size(); ++i)
    if (reader.columns()[i] == metrics_columns::kStep) step_column = i;
  std::vector<bool> empty(reader.columns().size());
  for (std::size_t r = 0; r < wall_time.size() && reader.next(); ++r) {
    for (std::size_t i = 0; i < empty.size(); ++i) empty[i] = reader.empty(i);
    if (step_column == empty.size() || empty[step_column]) {
      file.write(wall_time[r], reader.cells(), empty);
      continue;
    }
    const std::string_view text = cell_text(reader.line(), step_column);
    const std::optional<std::int64_t> step = parse_step(text);
    if (!step)
      throw std::runtime_error(path + ": line " + std::to_string(r + 2) + ", column " + metrics_columns::kStep + ": '" +
                               std::string(text.substr(0, 40)) + (text.size() > 40 ? "..." : "") +
                               "' is not a step (a whole number in [0, 2^63)); not a metrics.csv xgrad writes");
    file.write_at_step(wall_time[r], *step, reader.cells(), empty);
  }
}

// A new event file in `dir` from the rows of `metrics_path` ("" for none), ending at `end_time`, renamed into place
// over the others. The temporary file is this process's own (platform::temporary_path), deleted if the write fails.
std::unique_ptr<EventFile> replace_event_file(const fs::path& dir, const std::vector<std::string>& columns,
                                              const std::string& metrics_path, double end_time, fs::path& written) {
  const double now = wall_time_now();
  const std::vector<double> wall_time =
      metrics_path.empty() ? std::vector<double>{} : row_wall_times(metrics_path, end_time);
  const fs::path tmp = platform::temporary_path(dir, "events");
  written = dir / event_file_name(now);
  std::unique_ptr<EventFile> file;
  try {
    // The file_version event at the first row's time: TensorBoard takes a run's start time from it.
    file = std::make_unique<EventFile>(tmp.string(), columns, wall_time.empty() ? now : wall_time.front(),
                                       written.string());
    if (!wall_time.empty()) write_rows(*file, metrics_path, wall_time);
    const platform::DirectoryLock lock(dir);
    const platform::StopSignalsHeld held;
    if (::rename(tmp.c_str(), written.c_str()) != 0)
      throw std::runtime_error("cannot move " + tmp.string() + " to " + written.string() + ": " + std::strerror(errno));
    remove_event_files(dir, written.filename().string());
  } catch (...) {
    file.reset();
    ::unlink(tmp.c_str());
    throw;
  }
  return file;
}

}  // namespace

std::uint32_t crc32c(std::string_view bytes) {
  static const std::array<std::uint32_t, 256> table = make_crc32c_table();
  std::uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char b : bytes) crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

std::uint32_t masked_crc32c(std::string_view bytes) {
  const std::uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string event_record(std::string_view payload) {
  std::string length;
  put_little_endian(length, static_cast<std::uint64_t>(payload.size()));
  std::string out = length;
  put_little_endian(out, masked_crc32c(length));
  out.append(payload.data(), payload.size());
  put_little_endian(out, masked_crc32c(payload));
  return out;
}

std::string file_version_event(double wall_time) {
  std::string out = event_header(wall_time, 0);
  put_bytes(out, 3, "brain.Event:2");  // Event.file_version
  return out;
}

std::string scalars_event(double wall_time, std::int64_t step, const std::vector<std::string>& tags,
                          const std::vector<float>& values) {
  if (tags.size() != values.size())
    throw std::invalid_argument("scalars_event: " + std::to_string(tags.size()) + " tags for " +
                                std::to_string(values.size()) + " values");
  std::string summary;
  for (std::size_t i = 0; i < tags.size(); ++i) put_bytes(summary, 1, summary_value(tags[i], values[i]));
  std::string out = event_header(wall_time, step);
  put_bytes(out, 5, summary);  // Event.summary
  return out;
}

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

EventFile::EventFile(const std::string& path, std::vector<std::string> columns, double wall_time,
                     const std::string& name)
    : file_(nullptr), name_(name.empty() ? path : name), columns_(std::move(columns)), step_column_(columns_.size()) {
  const int fd = platform::create_new_file(path);
  file_ = ::fdopen(fd, "w");
  if (!file_) {
    const std::string reason = std::strerror(errno);
    ::close(fd);
    throw std::runtime_error("cannot open " + path + " for writing: " + reason);
  }
  for (std::size_t i = 0; i < columns_.size(); ++i)
    if (columns_[i] == metrics_columns::kStep) step_column_ = i;
  try {
    append(file_version_event(wall_time));
  } catch (...) {
    std::fclose(file_);  // no destructor runs for a constructor that throws
    throw;
  }
}

EventFile::~EventFile() {
  if (file_) std::fclose(file_);
}

void EventFile::write(double wall_time, const std::vector<double>& row, const std::vector<bool>& unmeasured) {
  // Without a step cell (a file not of xgrad's writing), the row's place is its step.
  const double step =
      step_column_ < row.size() && !std::isnan(row[step_column_]) ? row[step_column_] : static_cast<double>(rows_);
  if (!is_event_step(step))
    throw std::runtime_error(name_ + ": step " + as_text(step) + " is not a whole number in [0, 2^63)");
  write_at_step(wall_time, static_cast<std::int64_t>(step), row, unmeasured);
}

void EventFile::write_at_step(double wall_time, std::int64_t step, const std::vector<double>& row,
                              const std::vector<bool>& unmeasured) {
  if (step < 0) throw std::runtime_error(name_ + ": step " + std::to_string(step) + " is negative");
  if (row.size() != columns_.size() || (!unmeasured.empty() && unmeasured.size() != columns_.size()))
    throw std::runtime_error("event row has " + std::to_string(row.size()) + " values for " +
                             std::to_string(columns_.size()) + " columns");
  std::vector<std::string> tags;
  std::vector<float> values;
  for (std::size_t i = 0; i < row.size(); ++i)
    if (unmeasured.empty() || !unmeasured[i]) {
      tags.push_back(columns_[i]);
      values.push_back(as_written(row[i]));
    }
  append(scalars_event(wall_time, step, tags, values));
  ++rows_;
}

void EventFile::append(const std::string& event) {
  const std::string record = event_record(event);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() || std::fflush(file_) != 0)
    throw std::runtime_error("writing " + name_ + " failed: " + std::strerror(errno));
}

bool is_event_step(double step) {
  // 2^63 is the first double past int64's range.
  return step >= 0 && step < 9223372036854775808.0 && std::floor(step) == step;
}

std::string event_file_name(double wall_time) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%010lld", static_cast<long long>(wall_time));
  return kEventFilePrefix + std::string(seconds) + "." + host_name();
}

void remove_event_files(const fs::path& dir, const std::string& keep) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kEventFilePrefix, 0) == 0 && name != keep) fs::remove(entry.path(), ec);
  }
}

std::unique_ptr<EventFile> open_event_file(const fs::path& dir, const std::vector<std::string>& columns, bool resume) {
  fs::path written;
  const fs::path metrics = dir / kMetricsFile;
  std::error_code ec;
  const bool rows = resume && fs::exists(metrics, ec);
  return replace_event_file(dir, columns, rows ? metrics.string() : "", wall_time_now(), written);
}

fs::path export_event_file(const fs::path& run_dir, const fs::path& out_dir) {
  const fs::path metrics = run_dir / kMetricsFile;
  const MetricsReader header(metrics.string());
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw std::runtime_error("cannot create " + out_dir.string() + ": " + ec.message());
  const auto modified = fs::last_write_time(metrics, ec);
  // file_time_type's clock is not system_clock before C++20: its offset is measured against now.
  const double end_time =
      ec ? wall_time_now()
         : wall_time_now() - std::chrono::duration<double>(fs::file_time_type::clock::now() - modified).count();
  fs::path written;
  replace_event_file(out_dir, header.columns(), metrics.string(), end_time, written);
  return written;
}

}  // namespace xgrad::train
