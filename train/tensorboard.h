// TensorBoard event files (--tensorboard): every metrics.csv column as a scalar, so that TensorBoard, and W&B and Aim,
// which import event files, show an xgrad run beside others. The file is a sequence of TFRecord records (length,
// masked CRC-32C of the length, payload, masked CRC-32C of the payload); each payload is an Event protobuf
// (tensorflow/core/util/event.proto) encoded here by hand: first the file_version event, then one event per
// metrics.csv row holding a Summary (tensorflow/core/framework/summary.proto) of one simple_value per recorded cell,
// tagged with the column name, at the row's step.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace xgrad::train {

/// Every event file name starts with this (TensorBoard finds the files of a run by "tfevents" in the name).
inline constexpr const char* kEventFilePrefix = "events.out.tfevents.";

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `bytes`, as RFC 3720 B.4 defines it.
std::uint32_t crc32c(std::string_view bytes);
/// TFRecord's masked CRC-32C of `bytes`: ((crc >> 15) | (crc << 17)) + 0xa282ead8, so that a CRC stored inside
/// checksummed data does not check itself.
std::uint32_t masked_crc32c(std::string_view bytes);
/// One TFRecord record holding `payload`: uint64 length (little-endian), masked CRC of those 8 bytes, the payload,
/// masked CRC of the payload.
std::string event_record(std::string_view payload);
/// An Event holding file_version "brain.Event:2" at `wall_time` (seconds since the Unix epoch): the first record of
/// every event file.
std::string file_version_event(double wall_time);
/// An Event at `wall_time` and `step` whose Summary holds one simple_value (a float) per tag; `tags` and `values`
/// have one entry per value.
std::string scalars_event(double wall_time, std::int64_t step, const std::vector<std::string>& tags,
                          const std::vector<float>& values);

/// Seconds since the Unix epoch, now (an Event's wall_time).
double wall_time_now();

/// An event file being written: the file_version event, then one event per metrics.csv row, each flushed as it is
/// written, like metrics.csv's rows.
class EventFile {
 public:
  /// Creates the new file `path` (an existing file or a symbolic link there is refused) and writes the file_version
  /// event at `wall_time`. `columns`: metrics.csv's column names, the tags. `name`: the file errors name (the event
  /// file a temporary `path` becomes; `path` when empty). Throws std::runtime_error naming it and the reason.
  EventFile(const std::string& path, std::vector<std::string> columns, double wall_time, const std::string& name = "");
  ~EventFile();
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;
  /// Writes one metrics.csv row (one value per column) at `wall_time` and flushes. The step is the row's "step"
  /// cell (without one, or where it is not a number, the number of rows written before). A cell `unmeasured` marks
  /// (when given) is left out, as metrics.csv leaves it empty; every other value is written as the float nearest to its
  /// metrics.csv cell (%.9g), NaN and infinities included (TensorBoard reads them; a diverged run's last steps stay in
  /// its curves). Throws std::runtime_error on a column count mismatch, a step that is not a whole number in
  /// [0, 2^63) (is_event_step) or a failed write.
  void write(double wall_time, const std::vector<double>& row, const std::vector<bool>& unmeasured = {});
  /// As write, at `step` (>= 0) instead of the row's step cell: for a step read from its text (a double holds
  /// steps exactly only up to 2^53). Throws std::runtime_error on a negative step, as write does otherwise.
  void write_at_step(double wall_time, std::int64_t step, const std::vector<double>& row,
                     const std::vector<bool>& unmeasured = {});

 private:
  std::FILE* file_;
  std::string name_;  // the file errors name
  std::vector<std::string> columns_;
  std::size_t step_column_;  // the index of "step" in columns_ (columns_.size(): none)
  std::size_t rows_ = 0;     // rows written
  void append(const std::string& event);
};

/// Whether `step` can be an Event's step: a whole number in [0, 2^63), the int64 it becomes.
bool is_event_step(double step);

/// The name of a new event file: kEventFilePrefix, the time in whole seconds (10 digits) and the host's name, as
/// TensorFlow names its own.
std::string event_file_name(double wall_time);

/// Deletes the event files (kEventFilePrefix*) in `dir` but the one named `keep`.
void remove_event_files(const std::filesystem::path& dir, const std::string& keep = "");

/// The event file of the run in `dir` (the trainer's, for --tensorboard): a new one named event_file_name, written
/// through a temporary file of this process (platform::temporary_path) and renamed into place, the run's other event
/// files then deleted; the rename and the deletion are done under a lock on `dir` with the stop signals held, so that
/// concurrent writers and a stop in between leave one whole event file. A resumed run's dir/metrics.csv, already cut
/// back to its checkpoint, is written to it first, wall times reconstructed as export_event_file's but ending now: the
/// file holds each step once. `columns`: the columns of metrics.csv. Throws std::runtime_error naming the file.
std::unique_ptr<EventFile> open_event_file(const std::filesystem::path& dir, const std::vector<std::string>& columns,
                                           bool resume);

/// Writes the event file of the run directory `run_dir` into `out_dir` (created if missing; its other event files
/// deleted) from the complete rows of the run's metrics.csv. metrics.csv holds no times: a row's wall time is
/// reconstructed from the step_ms column, the last row at metrics.csv's modification time and each earlier one its
/// successors' step_ms earlier (a cell without a number counts 0 ms). Written as open_event_file writes.
/// Returns the file's path. Throws std::runtime_error naming the file that cannot be read or written, and the
/// metrics.csv, its line and column for a step that is not a whole number in [0, 2^63).
std::filesystem::path export_event_file(const std::filesystem::path& run_dir, const std::filesystem::path& out_dir);

}  // namespace xgrad::train
