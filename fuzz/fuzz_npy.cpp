// .npy reader: any bytes are parsed or refused with TaskError; what parses holds prod(shape) values.
#include <cstdlib>

#include "data/npy.h"
#include "data/task.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const xgrad::data::NpyArray a = xgrad::data::parse_npy(data, size, "fuzz");
    std::size_t count = 1;
    for (std::size_t d : a.shape) count *= d;
    if (count != a.size() || (a.descr != "<i4" && a.descr != "<i8")) std::abort();
  } catch (const xgrad::data::TaskError&) {
  }
  return 0;
}
