// safetensors reader: any bytes are parsed or refused with CheckpointError; what parses writes back to a file that
// parses to the same tensors and metadata.
#include <cstdlib>
#include <cstring>
#include <optional>

#include "nn/checkpoint.h"

using xgrad::nn::Checkpoint;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<Checkpoint> parsed;
  try {
    parsed = xgrad::nn::from_safetensors(data, size, "fuzz");
  } catch (const xgrad::nn::CheckpointError&) {
    return 0;
  }
  const std::string bytes = xgrad::nn::to_safetensors(*parsed);
  const Checkpoint again = xgrad::nn::from_safetensors(bytes.data(), bytes.size(), "round trip");
  if (again.metadata != parsed->metadata || again.tensors.size() != parsed->tensors.size()) std::abort();
  for (std::size_t i = 0; i < again.tensors.size(); ++i) {
    const auto& [name_a, a] = parsed->tensors[i];
    const auto& [name_b, b] = again.tensors[i];
    // Bytes, not values: NaN payloads must survive too.
    if (name_a != name_b || a.shape() != b.shape() || (a.size() && std::memcmp(a.data(), b.data(), 4 * a.size())))
      std::abort();
  }
  return 0;
}
