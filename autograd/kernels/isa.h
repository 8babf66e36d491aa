// Which instruction set the wide float kernels run: the widest this CPU has, or the one XGRAD_SIMD names, so that
// every variant a user's CPU may pick is testable on one machine (as OPENBLAS_CORETYPE does for OpenBLAS).
#pragma once

namespace xgrad::simd {

/// The variants each wide float kernel is compiled in (vector_math.h, XGRAD_ISA_VARIANTS).
enum class Isa { baseline, avx2, avx512f };

/// "baseline", "avx2" or "avx512f": the spellings XGRAD_SIMD takes.
const char* isa_name(Isa isa);

/// The variant the kernels run, chosen once per process: XGRAD_SIMD if set (baseline, avx2 or avx512f) and this CPU
/// runs it, else the widest this CPU runs (a value it cannot honour is said once on stderr). Never throws: it is
/// first called from inside the kernels, possibly on a worker thread.
Isa active_isa();

/// Throws std::invalid_argument naming XGRAD_SIMD and the allowed values when it is set to a name that is not a
/// variant, or to one this CPU cannot run. Executables call it at start (xgrad refuses with exit 2).
void require_valid_simd_env();

/// Whether this CPU runs `isa`.
bool cpu_runs(Isa isa);

}  // namespace xgrad::simd
