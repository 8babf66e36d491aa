// The data task on fuzzed arrays: input = [2-byte split][inputs.npy][targets.npy], the last byte choosing
// shuffling, a vocabulary size and the batch size. Arrays are refused with TaskError or give batches whose ids are
// all in range.
#include <cstdlib>

#include "data/token_arrays.h"

using namespace xgrad::data;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const std::size_t split = (data[0] | (data[1] << 8)) % (size - 2);
  const std::uint8_t knobs = data[size - 1];
  try {
    TokenArraysSplit train{parse_npy(data + 2, split, "inputs.npy"),
                           parse_npy(data + 2 + split, size - 3 - split, "targets.npy")};
    TokenArraysConfig config{"fuzz", static_cast<std::size_t>(knobs & 0x1f), (knobs & 0x80) != 0};
    const TokenArrays task(config, std::move(train), TokenArraysSplit{}, "fuzz/");
    const std::size_t batch_size = 1 + ((knobs >> 5) & 3);
    const auto V = static_cast<std::int64_t>(task.vocab_size());
    for (std::uint64_t index : {0ull, 1ull, 7ull, 1000003ull, ~0ull}) {
      const Batch b = task.batch(knobs, index, batch_size);
      if (b.inputs.shape() != b.targets.shape() || b.inputs.shape(0) != batch_size ||
          b.inputs.shape(1) != task.seq_len())
        std::abort();
      for (std::size_t i = 0; i < b.inputs.size(); ++i)
        if (b.inputs.data()[i] < 0 || b.inputs.data()[i] >= V || b.targets.data()[i] < -1 || b.targets.data()[i] >= V)
          std::abort();
    }
  } catch (const TaskError&) {
  }
  return 0;
}
