#include "autograd/kernels/isa.h"

#include <cstdio>
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

/// The variant XGRAD_SIMD asks for, the widest this CPU runs when it is unset or empty; throws for a value that is
/// not a variant this CPU runs.
Isa requested() {
  const char* wanted = std::getenv("XGRAD_SIMD");
  if (wanted == nullptr || *wanted == '\0') return widest_on_cpu();
  std::string runnable;
  for (Isa isa : kAll) {
    if (std::string(wanted) != isa_name(isa)) continue;
    if (cpu_runs(isa)) return isa;
    for (Isa other : kAll)
      if (cpu_runs(other)) runnable += std::string(runnable.empty() ? "" : ", ") + isa_name(other);
    throw std::invalid_argument(std::string("XGRAD_SIMD=") + isa_name(isa) + ": this CPU does not run it; allowed " +
                                "here: " + runnable);
  }
  throw std::invalid_argument(
      "XGRAD_SIMD: not a kernel variant (allowed: baseline, avx2, avx512f; unset for the "
      "widest this CPU runs)");
}

Isa choose() {
  try {
    return requested();
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "xgrad: %s; using %s\n", e.what(), isa_name(widest_on_cpu()));
    return widest_on_cpu();
  }
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512f:
      return "avx512f";
    case Isa::avx2:
      return "avx2";
    case Isa::baseline:
      break;
  }
  return "baseline";
}

bool cpu_runs(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  switch (isa) {
    case Isa::avx512f:
      return __builtin_cpu_supports("avx512f") != 0;
    case Isa::avx2:
      return __builtin_cpu_supports("avx2") != 0;
    case Isa::baseline:
      return true;
  }
  return false;
#else
  return isa == Isa::baseline;
#endif
}

Isa active_isa() {
  static const Isa chosen = choose();
  return chosen;
}

void require_valid_simd_env() { requested(); }

}  // namespace xgrad::simd
