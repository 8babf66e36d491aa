#!/usr/bin/env bash
# cpu_runs.sh FLAGS COMMAND...: runs COMMAND where this CPU has every flag of the comma-separated FLAGS (as
# /proc/cpuinfo spells them), else exits 77, which ctest counts as skipped: forcing an OpenBLAS kernel family or an
# xgrad kernel variant the CPU cannot execute would end in SIGILL, not in a test result.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: cpu_runs.sh FLAGS COMMAND..." >&2; exit 2; }
flags=$1
shift
have=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2 || true) "  # no flags line off x86: only baseline runs
missing=()
IFS=, read -ra wanted <<<"$flags"
for f in "${wanted[@]}"; do
  [ -z "$f" ] || [[ "$have" == *" $f "* ]] || missing+=("$f")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "skipped: this CPU lacks ${missing[*]} (needed by ${OPENBLAS_CORETYPE:+OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE}${XGRAD_SIMD:+XGRAD_SIMD=$XGRAD_SIMD})"
  exit 77
fi
exec "$@"
