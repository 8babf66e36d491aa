// Checkpoints (safetensors): round trips, the byte layout other readers expect, atomic writes, optimizer state that
// continues bit for bit, and every malformed file the reader must refuse without reading out of bounds.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <unistd.h>

#include "autograd/ops.h"
#include "nn/checkpoint.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "platform/atomic_file.h"
#include "tests/support/bad_files.h"
#include "tests/support/bytes.h"
#include "tests/support/temp_dir.h"

using namespace xgrad;
using namespace xgrad::nn;
namespace fs = std::filesystem;
using xgrad::testing::TempDir;

namespace {

// A safetensors image from a header text and raw data bytes (the length prefix is computed).
std::string image(const std::string& header, const std::string& data = "") {
  std::string out;
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + header + data;
}

std::string floats(std::initializer_list<float> values) { return xgrad::testing::raw(values); }

// The error message of parsing `bytes` ("" if it parses).
std::string parse_error(const std::string& bytes) {
  return xgrad::testing::error_message<CheckpointError>([&] { from_safetensors(bytes.data(), bytes.size(), "test"); });
}

Checkpoint sample() {
  Checkpoint c;
  c.add("a", xt::xarray<float>{{1.5f, -2.0f, 3.25f}, {4.0f, 5.0f, 6.0f}});
  c.add("scalar", xt::xarray<float>(7.0f));
  c.add("empty", xt::xarray<float>::from_shape({0, 3}));
  c.add("b.c", xt::xarray<float>{0.125f});
  c.metadata = {{"step", "42"}, {"note", "ünïcode ok"}};
  return c;
}

}  // namespace

TEST_CASE("safetensors: a round trip keeps names, order, shapes, values and metadata") {
  const Checkpoint c = sample();
  const std::string bytes = to_safetensors(c);
  const Checkpoint d = from_safetensors(bytes.data(), bytes.size(), "round trip");
  REQUIRE(d.tensors.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(d.tensors[i].first == c.tensors[i].first);
    CHECK(d.tensors[i].second.shape() == c.tensors[i].second.shape());
    CHECK(d.tensors[i].second == c.tensors[i].second);
  }
  CHECK(d.tensors[1].second.dimension() == 0);
  CHECK(d.metadata == c.metadata);
  CHECK(d.meta("step") == "42");
  CHECK_THROWS_WITH_AS(d.meta("absent"), doctest::Contains("'absent'"), CheckpointError);
  CHECK(d.find("b.c") != nullptr);
  CHECK(d.find("nope") == nullptr);
}

TEST_CASE("safetensors: the layout is the published one (length prefix, JSON header, aligned little-endian data)") {
  Checkpoint c;
  c.add("w", xt::xarray<float>{{1.0f, 2.0f}});
  c.metadata["k"] = "v";
  const std::string bytes = to_safetensors(c);
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  CHECK((8 + n) % 8 == 0);
  CHECK(bytes.size() == 8 + n + 8);
  const std::string header = bytes.substr(8, n);
  CHECK(header.find(R"("w":{"data_offsets":[0,8],"dtype":"F32","shape":[1,2]})") != std::string::npos);
  CHECK(header.find(R"("__metadata__":{"k":"v"})") != std::string::npos);
  CHECK(bytes.substr(8 + n) == floats({1.0f, 2.0f}));
  // A header written by another tool (no padding, other key order) reads the same.
  const std::string other = image(
      R"({"__metadata__":{"k":"v"},"w":{"shape":[1,2],"dtype":"F32","data_offsets":[0,8]}})", floats({1.0f, 2.0f}));
  const Checkpoint d = from_safetensors(other.data(), other.size(), "other");
  CHECK(*d.find("w") == xt::xarray<float>{{1.0f, 2.0f}});
  CHECK(d.metadata.at("k") == "v");
}

TEST_CASE("safetensors: save is atomic and leaves no temporary file; load names missing files") {
  const TempDir dir("checkpoint_save");
  const std::string path = (dir / "c.safetensors").string();
  save_checkpoint(path, sample());
  Checkpoint second = sample();
  second.metadata["step"] = "43";
  save_checkpoint(path, second);  // replaces the first
  CHECK(load_checkpoint(path).meta("step") == "43");
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    ++files;
    CHECK(entry.path().filename() == "c.safetensors");
  }
  CHECK(files == 1);
  CHECK_THROWS_WITH_AS(load_checkpoint((dir / "missing.safetensors").string()), doctest::Contains("no such file"),
                       CheckpointError);
  CHECK_THROWS_WITH_AS(load_checkpoint(dir.string()), doctest::Contains("not a regular file"), CheckpointError);
  CHECK_THROWS_WITH_AS(save_checkpoint((dir / "no" / "such" / "dir.safetensors").string(), sample()),
                       doctest::Contains("dir.safetensors: No such file or directory"), CheckpointError);
  fs::remove_all(dir);
}

TEST_CASE("safetensors: add refuses empty, reserved and repeated names") {
  Checkpoint c;
  c.add("x", xt::xarray<float>{1.0f});
  CHECK_THROWS_AS(c.add("x", xt::xarray<float>{1.0f}), CheckpointError);
  CHECK_THROWS_AS(c.add("", xt::xarray<float>{1.0f}), CheckpointError);
  CHECK_THROWS_AS(c.add("__metadata__", xt::xarray<float>{1.0f}), CheckpointError);
}

TEST_CASE("safetensors: malformed files are refused with a message naming the problem") {
  const std::string two = floats({1.0f, 2.0f});
  const std::string good = image(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", two);
  REQUIRE(parse_error(good).empty());

  std::string huge_length(8, '\0');
  const std::uint64_t big = kMaxSafetensorsHeaderBytes + 1;
  for (int i = 0; i < 8; ++i) huge_length[i] = static_cast<char>((big >> (8 * i)) & 0xff);
  std::string all_ones(8, '\xff');
  const std::vector<xgrad::testing::BadFile> cases{
      {"empty file", "", "shorter than the 8-byte header length"},
      {"truncated length", std::string("\x10\0\0", 3), "shorter than the 8-byte header length"},
      {"header length past the end", good.substr(0, 20), "runs past the end of the file"},
      {"huge header length", huge_length + "{}", "exceeds the limit"},
      {"length 2^64 - 1", all_ones + "{}", "exceeds the limit"},
      {"zero header length", image(""), "does not start with '{'"},
      {"header not an object", image("[1, 2]"), "does not start with '{'"},
      {"invalid JSON", image(R"({"w": {"dtype": )"), "not valid JSON"},
      {"trailing garbage", image(R"({} x)"), "not valid JSON"},
      {"invalid UTF-8", image("{\"\xff\": 1}"), "not valid JSON"},
      {"deep nesting", image(R"({"w":{"dtype":{"a":1}}})"), "nests objects deeper"},
      {"deep arrays", image(R"({"w":{"shape":[[1]]}})"), "nests arrays deeper"},
      {"repeated tensor",
       image(
           R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           two),
       "repeats the key 'w'"},
      {"repeated field", image(R"({"w":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", two),
       "repeats the key 'dtype'"},
      {"entry not an object", image(R"({"w":3})"), "entry is not an object"},
      {"unknown field", image(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", two),
       "unknown field 'x'"},
      {"missing dtype", image(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", two), "no 'dtype' field"},
      {"missing offsets", image(R"({"w":{"dtype":"F32","shape":[2]}})", two), "no 'data_offsets' field"},
      {"wrong dtype", image(R"({"w":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})", two), "dtype 'F16'"},
      {"dtype not a string", image(R"({"w":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", two),
       "dtype is not a string"},
      {"negative dim", image(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", two), "whole numbers"},
      {"fractional dim", image(R"({"w":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", two), "whole numbers"},
      {"shape not a list", image(R"({"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", two),
       "shape is not a list"},
      {"element count overflows",
       image(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", two), "more elements"},
      {"offsets not a pair", image(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", two), "not a pair"},
      {"offsets negative", image(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", two), "not a pair"},
      {"offsets past the data", image(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", floats({1.0f})),
       "outside the data"},
      {"offsets reversed", image(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", two), "outside the data"},
      {"offsets huge",
       image(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[18446744073709551615,18446744073709551615]}})", two),
       "outside the data"},
      {"length does not match the shape", image(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", two),
       "needs 12"},
      {"overlapping tensors",
       image(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           two),
       "'a' and 'b' overlap"},
      {"a hole in the data", image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", two), "bytes [0, 4)"},
      {"bytes after the last tensor", image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", two),
       "bytes [4, 8)"},
      {"metadata not an object", image(R"({"__metadata__":[1]})"), "__metadata__ is not an object"},
      {"metadata value not a string", image(R"({"__metadata__":{"step":3}})"), "value of 'step' is not a string"},
      {"empty tensor name", image(R"({"":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", two), "empty name"},
  };
  xgrad::testing::check_bad_files(cases, good, "safetensors: test: ", parse_error);
}

TEST_CASE("optimizer state: export, import into a fresh optimizer, and the next steps are bit-identical") {
  for (const std::string kind : {"adamw", "sgd"}) {
    INFO(kind);
    auto make = [&](std::vector<Tensor> params) -> std::unique_ptr<Optimizer> {
      if (kind == "sgd") return std::make_unique<SGD>(std::move(params), 0.1, 0.9, 0.01);
      return std::make_unique<AdamW>(std::move(params), 0.01, 0.9, 0.999, 1e-8, 0.01);
    };
    auto run_step = [](Optimizer& opt, Tensor& w, float scale) {
      opt.zero_grad();
      Tensor loss = sum(mul(mul(w, w), scalar<float>(scale)));
      loss.backward();
      opt.step();
    };
    Tensor a(xt::xarray<float>{{0.5f, -1.0f}, {2.0f, 0.25f}}, true);
    auto opt_a = make({a});
    for (int i = 0; i < 3; ++i) run_step(*opt_a, a, 1.0f + static_cast<float>(i));
    // Save through a checkpoint file image, as the trainer does.
    const OptimizerState saved = opt_a->state();
    Tensor b(a.value(), true);
    auto opt_b = make({b});
    opt_b->load_state(saved);
    CHECK(opt_b->state().step == saved.step);
    for (int i = 3; i < 6; ++i) {
      run_step(*opt_a, a, 1.0f + static_cast<float>(i));
      run_step(*opt_b, b, 1.0f + static_cast<float>(i));
    }
    CHECK(a.value() == b.value());

    OptimizerState bad = saved;
    bad.buffers.begin()->second[0] = xt::zeros<float>({3});
    CHECK_THROWS_WITH_AS(opt_b->load_state(bad), doctest::Contains("has shape [3], the parameter [2, 2]"), Error);
    bad = saved;
    bad.buffers["extra"] = {};
    CHECK_THROWS_WITH_AS(opt_b->load_state(bad), doctest::Contains("unexpected state buffer 'extra'"), Error);
    bad = saved;
    bad.buffers.erase(bad.buffers.begin());
    CHECK_THROWS_WITH_AS(opt_b->load_state(bad), doctest::Contains("no state buffer"), Error);
    bad = saved;
    bad.buffers.begin()->second.clear();
    CHECK_THROWS_WITH_AS(opt_b->load_state(bad), doctest::Contains("0 arrays for 1 parameters"), Error);
  }
}

TEST_CASE("write_file_atomically never writes through a symbolic link left at its temporary file's name") {
  const TempDir dir("atomic_link");
  const auto victim = dir.path() / "victim.txt";
  std::ofstream(victim) << "keep";
  const auto target = dir.path() / "config.json";
  // The next temporary name is this one's successor (one counter per process): a link planted there is met.
  const std::string taken = xgrad::platform::temporary_path(dir.path(), "config.json").string();
  const std::size_t dash = taken.rfind('-');
  const auto tmp = taken.substr(0, dash + 1) + std::to_string(std::stoul(taken.substr(dash + 1)) + 1);
  std::filesystem::create_symlink(victim, tmp);
  CHECK_THROWS_AS(xgrad::nn::write_file_atomically(target.string(), "{}\n"), xgrad::nn::CheckpointError);
  std::ifstream in(victim);
  const std::string kept((std::istreambuf_iterator<char>(in)), {});
  CHECK(kept == "keep");
  CHECK_FALSE(std::filesystem::exists(target));
}
