// xgrad_bench's FLOP count (bench/bench_configs.h step_gemms) and a sweep's work (bench/sweep_floor.h), counted on
// what the loss needs: the last block's queries, output projection and MLP, and the readout, only at target
// positions, as nn::loss_at_targets computes them.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "bench/bench_configs.h"
#include "bench/sweep_floor.h"

using namespace xgrad;
namespace fs = std::filesystem;

namespace {

// 2 m n k per product, three products (forward and both gradients) per GEMM: written out independently.
double linear_flops(double rows, double in, double out) { return 3 * 2 * rows * in * out; }

nn::ModelConfig model(std::size_t n_layers, std::size_t vocab_size) {
  nn::ModelConfig mc;
  mc.d_model = 16;
  mc.n_heads = 2;
  mc.d_k = 8;
  mc.n_layers = n_layers;
  mc.d_ff = 32;
  mc.mlp = true;
  mc.vocab_size = vocab_size;
  return mc;
}

}  // namespace

TEST_CASE("step_flops: every position by default, the last block and readout at the needed rows with NeededRows") {
  nn::ModelConfig mc = model(2, 10);
  mc.d_k = 4;
  const double B = 3, T = 5, inner = 8, heads = B * 2;
  const double block_full = 4 * linear_flops(B * T, 16, inner) + 2 * 3 * 2 * heads * T * T * 4 +
                            linear_flops(B * T, 16, 32) + linear_flops(B * T, 32, 16);
  CHECK(bench::step_flops(mc, 3, 5) == doctest::Approx(2 * block_full + linear_flops(B * T, 16, 10)));

  bench::NeededRows needed;
  needed.positions = 1;
  needed.readout_rows = 3;
  needed.out_proj = false;
  const double last = linear_flops(B * 1, 16, inner) + 2 * linear_flops(B * T, 16, inner) +
                      2 * 3 * 2 * heads * 1 * T * 4 + linear_flops(B, 16, 32) + linear_flops(B, 32, 16);
  const double first = block_full - linear_flops(B * T, inner, 16);  // no W_o in any block
  CHECK(bench::step_flops(mc, 3, 5, needed) == doctest::Approx(first + last + linear_flops(3, 16, 10)));
}

TEST_CASE("read_sweep_work reads config_version 2 files and counts kv_recall at its one target position") {
  const fs::path dir = fs::temp_directory_path() / "xgrad_test_bench_floor";
  fs::remove_all(dir);
  fs::create_directories(dir / "runs" / "a");
  // The keys a run's config.json has (train/config.cpp), the sizes the task decides under "derived".
  const nlohmann::json config = {
      {"task", "kv_recall"},  {"n_keys", 8},   {"n_values", 8},  {"n_pairs", 8},
      {"kv_encoding", "sum"}, {"d_model", 16}, {"n_heads", 1},   {"d_k", 16},
      {"n_layers", 1},        {"d_ff", 64},    {"mlp", false},   {"attn_out_proj", false},
      {"batch_size", 4},      {"steps", 10},   {"data_seed", 0}, {"derived", {{"seq_len", 9}, {"vocab_size", 17}}}};
  std::ofstream(dir / "runs" / "a" / "config.json") << config.dump();
  std::ofstream(dir / "sweep.json") << nlohmann::json{{"runs", {{{"dir", "runs/a"}, {"seconds", 2.5}}}}}.dump();

  const bench::SweepWork work = bench::read_sweep_work(dir.string());
  CHECK(work.runs == 1);
  CHECK(work.run_seconds == 2.5);
  // One block: q at the 4 target rows, k and v at all 36, q k^T and probs v for one query per sequence, no W_o, no
  // MLP; the readout at 4 rows.
  const double per_step =
      linear_flops(4, 16, 16) + 2 * linear_flops(36, 16, 16) + 2 * 3 * 2 * 4 * 1 * 9 * 16 + linear_flops(4, 16, 17);
  CHECK(work.flops == doctest::Approx(10 * per_step));
  fs::remove_all(dir);
}

TEST_CASE(
    "read_sweep_work: sizes from \"derived\" over a task setting of the same name; a task it cannot build "
    "counts every position") {
  const fs::path dir = fs::temp_directory_path() / "xgrad_test_bench_floor_derived";
  fs::remove_all(dir);
  fs::create_directories(dir / "runs" / "a");
  // --task data keeps its own --vocab-size (0: from the files) on top; the size the run used is under "derived".
  // Its files are gone here, so the task cannot be built: every position counts, with a warning.
  const nlohmann::json config = {{"task", "data"},  {"data", (dir / "moved").string()},
                                 {"vocab_size", 0}, {"d_model", 16},
                                 {"n_heads", 2},    {"d_k", 8},
                                 {"n_layers", 1},   {"d_ff", 32},
                                 {"mlp", true},     {"batch_size", 4},
                                 {"steps", 3},      {"derived", {{"seq_len", 12}, {"vocab_size", 10}}}};
  std::ofstream(dir / "runs" / "a" / "config.json") << config.dump();
  std::ofstream(dir / "sweep.json") << nlohmann::json{{"runs", {{{"dir", "runs/a"}}}}}.dump();
  CHECK(bench::read_sweep_work(dir.string()).flops == doctest::Approx(3 * bench::step_flops(model(1, 10), 4, 12)));
  fs::remove_all(dir);
}

TEST_CASE("read_sweep_work names the file that is missing") {
  CHECK_THROWS_WITH_AS(bench::read_sweep_work("/nonexistent-sweep"), doctest::Contains("sweep.json: cannot open"),
                       std::runtime_error);
}
