#include "autograd/kernels/isa.h"

#include <cstdlib>
#include <stdexcept>

namespace xgrad::simd {

namespace {

constexpr Isa kAll[] = {Isa::baseline, Isa::avx2, Isa::avx512f};

Isa widest_on_cpu() {
  for (Isa isa : {Isa::avx512f, Isa::avx2})
    if (cpu_runs(isa)) return isa;
  return Isa::baseline;
}

Isa choose() {
  const char* wanted = std::getenv("XGRAD_SIMD");
  if (wanted == nullptr || *wanted == '\0') return widest_on_cpu();
  std::string runnable;
  for (Isa isa : kAll) {
    if (!cpu_runs(isa)) continue;
    if (std::string(wanted) == isa_name(isa)) return isa;
    runnable += std::string(runnable.empty() ? "" : ", ") + isa_name(isa);
  }
  throw std::invalid_argument("XGRAD_SIMD=" + std::string(wanted) + " is not a kernel variant this CPU runs; " +
                              "allowed here: " + runnable);
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512f: return "avx512f";
    case Isa::avx2: return "avx2";
    case Isa::baseline: break;
  }
  return "baseline";
}

bool cpu_runs(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  switch (isa) {
    case Isa::avx512f: return __builtin_cpu_supports("avx512f") != 0;
    case Isa::avx2: return __builtin_cpu_supports("avx2") != 0;
    case Isa::baseline: return true;
  }
  return false;
#else
  return isa == Isa::baseline;
#endif
}

Isa active_isa() {
  static const Isa chosen = choose();  // a throw leaves it unset: the next call chooses (and throws) again
  return chosen;
}

}  // namespace xgrad::simd
