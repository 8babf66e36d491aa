// The `data` task: user token arrays read in order (or a seeded permutation per epoch), their checks, and a run
// that learns from them.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include <unistd.h>

#include "data/registry.h"
#include "data/token_arrays.h"
#include "tests/support/task_options.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_run.h"
#include "train/trainer.h"

using namespace xgrad;
using namespace xgrad::data;
namespace fs = std::filesystem;
using xgrad::testing::TempDir;

namespace {

using xgrad::testing::make_task;
using xgrad::testing::TaskOptions;

// Writes an int32 (or int64) .npy file of shape [rows, cols] as numpy would.
template <class T>
void write_npy(const fs::path& path, std::size_t rows, std::size_t cols, const std::vector<T>& values) {
  const std::string descr = sizeof(T) == 4 ? "<i4" : "<i8";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const char length[2] = {static_cast<char>(header.size() & 0xff), static_cast<char>(header.size() >> 8)};
  out.write(length, 2);
  out << header;
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(T)));
}

// N rows of T tokens: row r holds r*T .. r*T + T - 1 (mod 50); targets the same ids, -1 at position 0.
void write_rows(const fs::path& dir, std::size_t N, std::size_t T, const std::string& prefix = "") {
  std::vector<std::int32_t> inputs;
  std::vector<std::int64_t> targets;
  for (std::size_t i = 0; i < N * T; ++i) {
    inputs.push_back(static_cast<std::int32_t>(i % 50));
    targets.push_back(i % T == 0 ? -1 : static_cast<std::int64_t>(i % 50));
  }
  write_npy(dir / (prefix + "inputs.npy"), N, T, inputs);
  write_npy(dir / (prefix + "targets.npy"), N, T, targets);
}

// Options of the data task that reads `dir`.
TaskOptions data_options(const fs::path& dir) {
  TaskOptions o;
  o.name = "data";
  o.data_dir = dir.string();
  return o;
}

std::size_t first_row(const Batch& b, std::size_t k, std::size_t T) {
  return static_cast<std::size_t>(b.inputs(k, 0)) / T;  // valid while N * T <= 50
}

std::string task_error(const TaskOptions& o) {
  try {
    make_task(o);
  } catch (const TaskError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("data task: batch i holds rows i*B .. (i+1)*B - 1 modulo N, in order; vocabulary = max id + 1") {
  const TempDir dir("npy_task_order");
  write_rows(dir, 7, 4);  // ids 0 .. 27
  TaskOptions o = data_options(dir);
  const auto task = make_task(o);
  CHECK(task->name() == "data");
  CHECK(task->vocab_size() == 28);
  CHECK(task->seq_len() == 4);
  CHECK(task->chance_loss() == doctest::Approx(std::log(28.0)));
  const Batch b0 = task->batch(0, 0, 3), b2 = task->batch(0, 2, 3);
  CHECK(b0.inputs.shape() == std::vector<std::size_t>{3, 4});
  for (std::size_t k = 0; k < 3; ++k) CHECK(first_row(b0, k, 4) == k);
  // Batch 2 holds rows 6, 0, 1: the end of epoch 0 and the start of epoch 1.
  CHECK(first_row(b2, 0, 4) == 6);
  CHECK(first_row(b2, 1, 4) == 0);
  CHECK(first_row(b2, 2, 4) == 1);
  CHECK(b0.targets(0, 0) == -1);
  CHECK(b0.targets(1, 2) == 6);
  // Without --shuffle the seed changes nothing.
  CHECK(task->batch(5, 2, 3).inputs == b2.inputs);
  // A batch larger than the data wraps around.
  const Batch big = task->batch(0, 0, 10);
  CHECK(first_row(big, 9, 4) == 2);
  // --vocab-size: larger is allowed, smaller is refused naming the largest id.
  o.vocab_size = 40;
  CHECK(make_task(o)->vocab_size() == 40);
  o.vocab_size = 20;
  CHECK(task_error(o).find("token id 27, not below vocab_size 20") != std::string::npos);
}

TEST_CASE("data task --shuffle: every epoch visits each row once, in an order drawn from (seed, epoch)") {
  const TempDir dir("npy_task_shuffle");
  write_rows(dir, 10, 5);
  TaskOptions o = data_options(dir);
  o.shuffle = true;
  const auto task = make_task(o);
  std::vector<std::size_t> epoch0, epoch1;
  for (std::uint64_t i = 0; i < 5; ++i) {  // batches of 4: 20 positions = 2 epochs
    const Batch b = task->batch(3, i, 4);
    for (std::size_t k = 0; k < 4; ++k) (i * 4 + k < 10 ? epoch0 : epoch1).push_back(first_row(b, k, 5));
  }
  CHECK(std::set<std::size_t>(epoch0.begin(), epoch0.end()).size() == 10);
  CHECK(std::set<std::size_t>(epoch1.begin(), epoch1.end()).size() == 10);
  CHECK(epoch0 != epoch1);
  std::vector<std::size_t> in_order(10);
  for (std::size_t i = 0; i < 10; ++i) in_order[i] = i;
  CHECK(epoch0 != in_order);
  // A pure function of (seed, index): asked out of order, or by a fresh task, batch 3 is the same.
  const auto again = make_task(o);
  CHECK(again->batch(3, 3, 4).inputs == task->batch(3, 3, 4).inputs);
  CHECK(task->batch(3, 0, 4).inputs == again->batch(3, 0, 4).inputs);
  CHECK(task->batch(4, 0, 4).inputs != task->batch(3, 0, 4).inputs);
}

TEST_CASE("data task: the held-out split is read when both eval files are there") {
  const TempDir dir("npy_task_eval");
  write_rows(dir, 6, 3);
  TaskOptions o = data_options(dir);
  auto task = make_task(o);
  CHECK_FALSE(dynamic_cast<TokenArrays&>(*task).has_eval_split());
  CHECK_THROWS_WITH_AS(task->batch(0, 0, 2, Split::eval), doctest::Contains("no held-out split"), TaskError);
  write_rows(dir, 2, 3, "eval_");
  task = make_task(o);
  CHECK(dynamic_cast<TokenArrays&>(*task).has_eval_split());
  const Batch e = task->batch(0, 1, 3, Split::eval);  // rows 3, 4, 5 of 2: 1, 0, 1
  CHECK(first_row(e, 0, 3) == 1);
  CHECK(first_row(e, 1, 3) == 0);
  fs::remove(dir / "eval_targets.npy");
  CHECK(task_error(o).find("only one of eval_inputs.npy and eval_targets.npy") != std::string::npos);
  write_rows(dir, 2, 4, "eval_");
  CHECK(task_error(o).find("has sequences of 4 tokens, the training split 3") != std::string::npos);
}

TEST_CASE("data task: bad arrays are refused naming the file, and for a bad id its row and position") {
  const TempDir dir("npy_task_bad");
  TaskOptions o = data_options(dir);
  CHECK(task_error(o).find("inputs.npy: no such file") != std::string::npos);
  write_rows(dir, 3, 4);
  auto write_targets = [&](std::vector<std::int64_t> t) { write_npy(dir / "targets.npy", 3, 4, t); };
  std::vector<std::int64_t> targets(12, 1);
  targets[6] = -2;
  write_targets(targets);
  CHECK(task_error(o).find("targets.npy holds -2 (row 1, position 2)") != std::string::npos);
  write_targets(std::vector<std::int64_t>(12, -1));
  CHECK(task_error(o).find("every target in") != std::string::npos);
  write_npy(dir / "targets.npy", 4, 3, std::vector<std::int64_t>(12, 1));
  CHECK(task_error(o).find("has shape [4, 3], but") != std::string::npos);
  write_rows(dir, 3, 4);
  std::vector<std::int32_t> inputs(12, 1);
  inputs[11] = -5;
  write_npy(dir / "inputs.npy", 3, 4, inputs);
  CHECK(task_error(o).find("inputs.npy holds token id -5 (row 2, position 3)") != std::string::npos);
  write_npy(dir / "inputs.npy", 1, 12, std::vector<std::int32_t>(12, 1));
  CHECK(task_error(o).find("has [1, 12] (they must match)") != std::string::npos);
  {
    std::ofstream out(dir / "inputs.npy", std::ios::binary | std::ios::trunc);
    out << "garbage";
  }
  CHECK(task_error(o).find("npy: " + (dir / "inputs.npy").string() + ": not a .npy file") != std::string::npos);
  // The largest int64 id, with and without --vocab-size (max id + 1 overflowed before; found by fuzz_token_arrays).
  write_targets(std::vector<std::int64_t>(12, 1));
  std::vector<std::int64_t> huge(12, 1);
  huge[5] = std::numeric_limits<std::int64_t>::max();
  write_npy(dir / "inputs.npy", 3, 4, huge);
  CHECK(task_error(o).find("the files hold token id 9223372036854775807; ids must be below 16777216") !=
        std::string::npos);
  o.vocab_size = 10;
  CHECK(task_error(o).find("the files hold token id 9223372036854775807; ids must be below 16777216") !=
        std::string::npos);
  o.vocab_size = 0;
  huge[5] = 16777215;  // the largest id allowed
  write_npy(dir / "inputs.npy", 3, 4, huge);
  CHECK(task_error(o).empty());
  o.data_dir = (dir / "nope").string();
  CHECK(task_error(o).find("is not a directory") != std::string::npos);
  o.data_dir.clear();
  CHECK(task_error(o).find("no directory given") != std::string::npos);
}

TEST_CASE("xgrad train --task data learns a pattern from token arrays; its flags are checked") {
  const TempDir dir("npy_task_learn");
  // Next-token prediction on a fixed cycle of 12 tokens: each row is a window of the cycle.
  const std::size_t N = 64, T = 8;
  std::vector<std::int64_t> inputs, targets;
  for (std::size_t r = 0; r < N; ++r)
    for (std::size_t t = 0; t < T; ++t) {
      inputs.push_back(static_cast<std::int64_t>((r + t) % 12));
      targets.push_back(static_cast<std::int64_t>((r + t + 1) % 12));
    }
  write_npy(dir / "inputs.npy", N, T, inputs);
  write_npy(dir / "targets.npy", N, T, targets);
  train::TrainConfig c = xgrad::testing::tiny_run((dir / "run").string(), 150);
  c.task = "data";
  c.settings.set("data", dir.string());
  c.settings.set("shuffle", true);
  c.batch_size = 16;
  c.lr = 1e-2;
  const train::RunSummary s = train::train(c);
  INFO("final loss " << s.final_loss << ", chance " << s.chance_loss);
  CHECK(s.chance_loss == doctest::Approx(std::log(12.0)));
  CHECK(s.final_loss < 0.2 * s.chance_loss);

  auto config_error = [](train::TrainConfig t) {
    try {
      t.validate();
    } catch (const train::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  train::TrainConfig e = c;
  e.eval_every = 10;
  CHECK(config_error(e).find("--eval-every: the data in") != std::string::npos);
  e = c;
  e.task = "kv_recall";  // assigned, not set_setting: the data task's settings stay, and are refused
  CHECK(config_error(e).find("--data is read only by --task data (the task is kv_recall)") != std::string::npos);
  e.settings = xgrad::SettingValues(nlohmann::json{{"shuffle", true}});
  CHECK(config_error(e).find("--shuffle is read only by --task data") != std::string::npos);
  e = c;
  e.settings.set("vocab_size", 5);
  CHECK(config_error(e).find("--data: data: the files hold token id 11, not below vocab_size 5") == 0);
}

TEST_CASE("data task: int32 arrays are held as int32, and the memory estimate counts the data") {
  const TempDir dir("npy_task_int32");
  write_rows(dir, 7, 4);  // inputs int32, targets int64
  TaskOptions o = data_options(dir);
  const auto task = make_task(o);
  // 4 bytes per int32 input, 8 per int64 target: nothing is widened.
  CHECK(task->data_bytes() == 7 * 4 * 4 + 7 * 4 * 8);

  train::TrainConfig c;
  c.task = "data";
  c.settings.set("data", dir.string());
  const train::MemoryEstimate estimate = c.estimate_memory(*task);
  const auto data = std::find_if(estimate.terms.begin(), estimate.terms.end(),
                                 [](const train::MemoryTerm& t) { return t.what == "the task's data"; });
  REQUIRE(data != estimate.terms.end());
  CHECK(data->bytes == doctest::Approx(7 * 4 * 4 + 7 * 4 * 8));
  CHECK(data->factors == "--data");
  double sum = 0;
  for (const train::MemoryTerm& t : estimate.terms) sum += t.bytes;
  CHECK(estimate.bytes() == doctest::Approx(sum));
}
