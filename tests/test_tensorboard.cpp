// TensorBoard event files (train/tensorboard.h): the CRC-32C against RFC 3720's vectors, the masked CRC and the
// encoding of a known event against bytes computed by hand (and by crcmod for the CRCs), and which event files a run
// directory holds. tests/tensorboard/ reads whole files with TensorBoard's schema and readers that are not xgrad's.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "report/stats.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_run.h"
#include "train/tensorboard.h"
#include "train/trainer.h"

using namespace xgrad::train;
using xgrad::testing::TempDir;
using xgrad::testing::tiny_run;
namespace fs = std::filesystem;

namespace {

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
}

std::vector<std::string> event_files(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().rfind(kEventFilePrefix, 0) == 0)
      names.push_back(entry.path().filename().string());
  return names;
}

}  // namespace

TEST_CASE("crc32c: the test vectors of RFC 3720 B.4") {
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  CHECK(crc32c(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(crc32c(std::string(32, '\xFF')) == 0x62A8AB43u);
  CHECK(crc32c(ascending) == 0x46DD794Eu);
  CHECK(crc32c(descending) == 0x113FDB5Cu);
  const std::string read_pdu =
      bytes({0x01, 0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
             0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
             0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00});
  CHECK(crc32c(read_pdu) == 0xD9963A56u);
  CHECK(crc32c("123456789") == 0xE3069283u);
  CHECK(crc32c("") == 0u);
}

TEST_CASE("masked_crc32c and event_record: TFRecord's framing") {
  CHECK(masked_crc32c("123456789") == 0xC78AB0E5u);  // crcmod's crc-32c, masked as TFRecord masks
  const std::string record = event_record("abc");
  // length 3 (uint64 LE), its masked CRC 0x0E4999B0, "abc", its masked CRC 0x21F1576E (both LE)
  CHECK(record == bytes({3, 0, 0, 0, 0, 0, 0, 0, 0xB0, 0x99, 0x49, 0x0E, 'a', 'b', 'c', 0x6E, 0x57, 0xF1, 0x21}));
}

TEST_CASE("file_version_event and scalars_event: the Event bytes") {
  // wall_time (1, fixed64) 1.5, file_version (3, length-delimited) "brain.Event:2"; step 0 is left out
  CHECK(file_version_event(1.5) == bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F, 0x1A, 13}) + "brain.Event:2");
  // wall_time 2.0, step (2, varint) 300, summary (5) { value (1) { tag (1) "loss", simple_value (2, fixed32) 0.5 } }
  const std::string value = bytes({0x0A, 4}) + "loss" + bytes({0x15, 0, 0, 0, 0x3F});
  const std::string summary = bytes({0x0A, 11}) + value;
  CHECK(scalars_event(2.0, 300, {"loss"}, {0.5f}) ==
        bytes({0x09, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x10, 0xAC, 0x02, 0x2A, 13}) + summary);
  CHECK_THROWS_AS(scalars_event(2.0, 1, {"loss"}, {}), std::invalid_argument);
}

TEST_CASE("EventFile: every cell but the unmeasured ones, at the row's step") {
  const TempDir dir("tensorboard_file");
  const fs::path path = dir / "events.out.tfevents.test";
  {
    EventFile file(path.string(), {"step", "loss", "entropy"}, 1.5);
    file.write(2.0, {300, 0.5, 7}, {false, false, true});
    CHECK_THROWS_AS(file.write(2.0, {1, 2}), std::runtime_error);
  }
  std::ifstream in(path, std::ios::binary);
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string step = bytes({0x0A, 4}) + "step" + bytes({0x15, 0, 0, 0x96, 0x43});  // 300.0f
  const std::string loss = bytes({0x0A, 4}) + "loss" + bytes({0x15, 0, 0, 0, 0x3F});
  const std::string summary = bytes({0x0A, 11}) + step + bytes({0x0A, 11}) + loss;
  CHECK(written == event_record(file_version_event(1.5)) +
                       event_record(bytes({0x09, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x10, 0xAC, 0x02, 0x2A, 26}) + summary));
}

TEST_CASE("EventFile: without a step column, a row's step is its place") {
  const TempDir dir("tensorboard_no_step");
  const fs::path path = dir / "events.out.tfevents.test";
  {
    EventFile file(path.string(), {"loss"}, 1.5);
    file.write(2.0, {0.5});
    file.write(2.0, {0.5});
  }
  std::ifstream in(path, std::ios::binary);
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string summary = bytes({0x2A, 13, 0x0A, 11, 0x0A, 4}) + "loss" + bytes({0x15, 0, 0, 0, 0x3F});
  const std::string at_2s = bytes({0x09, 0, 0, 0, 0, 0, 0, 0, 0x40});
  CHECK(written == event_record(file_version_event(1.5)) + event_record(at_2s + summary) +
                       event_record(at_2s + bytes({0x10, 1}) + summary));
}

TEST_CASE("a run writes one event file with --tensorboard, none without; --overwrite replaces it") {
  const TempDir dir("tensorboard_run");
  TrainConfig config = tiny_run((dir / "run").string(), 3);
  train(config);
  CHECK(event_files(dir / "run").empty());
  config.overwrite = true;
  config.tensorboard = true;
  train(config);
  REQUIRE(event_files(dir / "run").size() == 1);
  const fs::path stale = dir / "run" / (std::string(kEventFilePrefix) + "0000000001.elsewhere");
  fs::copy_file(dir / "run" / event_files(dir / "run").front(), stale);
  config.tensorboard = false;
  train(config);
  CHECK(event_files(dir / "run").empty());
}

TEST_CASE("--tensorboard records how a run is logged: runs with and without it are one arm") {
  TrainConfig with = tiny_run("a", 3), without = tiny_run("b", 3);
  with.tensorboard = true;
  CHECK(with.to_json().at("tensorboard") == true);
  CHECK(xgrad::report::arm_settings(with.to_json()) == xgrad::report::arm_settings(without.to_json()));
}
