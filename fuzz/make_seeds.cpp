// Writes the seed corpus of each fuzz target into DIR/<target>/: valid files of every kind the loaders read, and a
// few near misses, so fuzzing starts from deep inside each format.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "fuzz/fuzz_model.h"
#include "nn/optim.h"
#include "tests/support/bytes.h"
#include "train/run_checkpoint.h"
#include "train/trainer.h"

using namespace xgrad;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

std::string npy(const std::string& descr, const std::string& shape, const std::string& data, int major = 1) {
  return testing::npy_image("{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }", data,
                            major);
}

using testing::raw;

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_seeds DIR\n";
    return 2;
  }
  const fs::path dir(argv[1]);
  const train::TrainConfig config = fuzz::tiny_run();
  const auto task = config.make_task();
  nn::AttentionModel model(train::model_config(config, *task), config.seed);
  nn::AdamW adamw(model.parameters(), config.lr);
  train::RunProgress progress;
  progress.step = 3;
  progress.recent_loss = {1.5, 0.25};
  progress.recent_accuracy = {0.5, 1.0};
  const std::string run = nn::to_safetensors(train::make_run_checkpoint(config, model, adamw, progress, false));
  write(dir / "fuzz_run_checkpoint" / "run.safetensors", run);
  nn::Checkpoint weights;
  for (const auto& [name, p] : model.named_parameters()) weights.add(name, p.value());
  write(dir / "fuzz_run_checkpoint" / "bare.safetensors", nn::to_safetensors(weights));

  nn::Checkpoint small;
  small.add("a", xt::xarray<float>{{1.0f, 2.0f}, {3.0f, 4.0f}});
  small.add("b", xt::xarray<float>(5.0f));
  small.add("e", xt::xarray<float>::from_shape({0}));
  small.metadata = {{"step", "1"}};
  write(dir / "fuzz_safetensors" / "small.safetensors", nn::to_safetensors(small));
  write(dir / "fuzz_safetensors" / "run.safetensors", run);

  const std::string in = npy("<i4", "(2, 3)", raw<std::int32_t>({0, 1, 2, 3, 4, 5}));
  const std::string target = npy("<i8", "(2, 3)", raw<std::int64_t>({-1, 2, 3, 4, 5, -1}), 2);
  write(dir / "fuzz_npy" / "i4.npy", in);
  write(dir / "fuzz_npy" / "i8_v2.npy", target);
  write(dir / "fuzz_npy" / "v3.npy", npy("<i8", "(4,)", raw<std::int64_t>({1, 2, 3, 4}), 3));
  auto pair = [](const std::string& a, const std::string& b, char knobs) {
    const std::size_t n = a.size();
    return std::string{static_cast<char>(n & 0xff), static_cast<char>(n >> 8)} + a + b + knobs;
  };
  write(dir / "fuzz_token_arrays" / "ordered", pair(in, target, 0x20));
  write(dir / "fuzz_token_arrays" / "shuffled", pair(in, target, static_cast<char>(0xa9)));
  std::string text = "\x08";
  for (int i = 0; i < 12; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  write(dir / "fuzz_char_lm" / "text", text);
  write(dir / "fuzz_char_lm" / "short", "\x03hello world, short");
  std::cout << "seeds written to " << dir.string() << "\n";
  return 0;
}
