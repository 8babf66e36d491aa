// Restoring a training run from a fuzzed checkpoint: --init-from's weight loader and --resume's full restore
// (weights, optimizer state, metadata) into the tiny model of fuzz_model.h. Anything malformed is refused with
// CheckpointError; nothing crashes or reads out of bounds.
#include <memory>

#include "fuzz/fuzz_model.h"
#include "nn/optim.h"
#include "train/run_checkpoint.h"
#include "train/trainer.h"

using namespace xgrad;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const train::TrainConfig config = fuzz::tiny_run();
  static const std::unique_ptr<data::Task> task = config.make_task();
  nn::Checkpoint checkpoint;
  try {
    checkpoint = nn::from_safetensors(data, size, "fuzz");
  } catch (const nn::CheckpointError&) {
    return 0;
  }
  nn::AttentionModel model(train::model_config(config, *task), config.seed);
  nn::AdamW optimizer(model.parameters(), config.lr);
  train::RunProgress progress;
  try {
    train::load_model_weights(checkpoint, "fuzz", model);
  } catch (const nn::CheckpointError&) {
  }
  try {
    train::restore_run_checkpoint(checkpoint, "fuzz", config, model, optimizer, progress);
  } catch (const nn::CheckpointError&) {
  }
  return 0;
}
