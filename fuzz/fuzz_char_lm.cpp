// char_lm on fuzzed text files: the first byte picks seq_len, the rest is the file. Too-short files are refused
// with TaskError; batches of others hold bytes of the right split.
#include <cstdlib>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

#include "data/char_lm.h"

using namespace xgrad::data;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  // An in-memory file (no disk writes per input) that CharLM opens by path like any other.
  static const int fd = ::memfd_create("xgrad_fuzz_char_lm", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ::ftruncate(fd, 0) != 0 || ::pwrite(fd, data + 1, size - 1, 0) != static_cast<ssize_t>(size - 1))
    std::abort();
  try {
    const CharLM task(CharLMConfig{path, static_cast<std::size_t>(data[0] % 70)});
    if (task.bytes().size() != size - 1) std::abort();
    for (Split split : {Split::train, Split::eval})
      for (std::uint64_t index : {0ull, 5ull, ~0ull}) {
        const Batch b = task.batch(data[0], index, 3, split);
        for (std::size_t i = 0; i < b.inputs.size(); ++i)
          if (b.inputs.data()[i] < 0 || b.inputs.data()[i] > 255 || b.targets.data()[i] < 0 ||
              b.targets.data()[i] > 255)
            std::abort();
      }
  } catch (const TaskError&) {
  }
  return 0;
}
