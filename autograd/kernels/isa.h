// Which instruction set the wide float kernels run: the widest this CPU has, or the one XGRAD_SIMD names, so that
// every variant a user's CPU may pick is testable on one machine (as OPENBLAS_CORETYPE does for OpenBLAS).
#pragma once

#include <string>

namespace xgrad::simd {

/// The variants each wide float kernel is compiled in (vector_math.h, XGRAD_ISA_VARIANTS).
enum class Isa { baseline, avx2, avx512f };

/// "baseline", "avx2" or "avx512f": the spellings XGRAD_SIMD takes.
const char* isa_name(Isa isa);

/// The variant the kernels run, chosen once per process: XGRAD_SIMD if set (baseline, avx2 or avx512f), else the
/// widest this CPU runs. Throws std::invalid_argument naming XGRAD_SIMD for any other value, or for a variant this
/// CPU cannot run (the message lists those it can).
Isa active_isa();

/// Whether this CPU runs `isa`.
bool cpu_runs(Isa isa);

}  // namespace xgrad::simd
