#!/usr/bin/env bash
# What a run pays before and after its steps, so a sweep of many short runs can
# be judged.
#
#   bench/startup.sh [BUILD_DIR] [REPEATS]        (defaults: build, 30)
#
# Each line times REPEATS processes, one at a time, and prints the median and minimum wall time in ms:
#   version         `xgrad --version`: exec, dynamic loading (OpenBLAS, spdlog, ...), the BLAS core check and, where
#                   OpenBLAS misdetects the CPU, the re-exec with OPENBLAS_CORETYPE set
#   version, core   the same with OPENBLAS_CORETYPE already set by the caller (no re-exec): the difference is the re-exec
#   train 1 step    `xgrad train` of a 1-step tiny model into a new directory: settings, config.json, the task, the
#                   model, one step, metrics.csv, summary.json and the final checkpoint
#   outside steps   the same run minus its own account of its training (summary.json wall_seconds): what a run costs
#                   outside its steps (start-up, the final files and checkpoint)
# Target: a run's start-up, the re-exec included, <= 50 ms ("version" where OpenBLAS misdetects the CPU,
# else "version" plus one more process start, and "outside steps").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
repeats=${2:-30}
xgrad=$build/bin/xgrad
[ -x "$xgrad" ] || { echo "startup.sh: $xgrad not found; build the xgrad target first" >&2; exit 2; }
[[ $repeats =~ ^[1-9][0-9]*$ ]] || { echo "startup.sh: REPEATS must be a whole number >= 1, got '$repeats'" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

ms() { # command...: wall ms of one run
  local t0 t1
  t0=$(date +%s%N)
  "$@" >/dev/null 2>&1
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000))
}
stats() { # label, then microsecond values on stdin
  sort -n | awk -v label="$1" '{ a[NR] = $1 } END {
    med = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
    printf "%-16s median %7.1f ms   min %7.1f ms   (%d runs)\n", label, med / 1000, a[1] / 1000, NR }'
}

echo "xgrad start-up: $("$xgrad" --version | head -1), load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
core=$(OPENBLAS_VERBOSE=2 "$xgrad" --version 2>&1 | sed -n 's/^Core: //p' | tail -1)
for ((i = 0; i < repeats; i++)); do ms env -u OPENBLAS_CORETYPE "$xgrad" --version; done | stats "version"
if [ -n "$core" ]; then
  for ((i = 0; i < repeats; i++)); do ms env OPENBLAS_CORETYPE="$core" "$xgrad" --version; done | stats "version, core"
fi
for ((i = 0; i < repeats; i++)); do
  rm -rf "$out/run"
  t=$(ms env -u OPENBLAS_CORETYPE "$xgrad" train --task kv_recall --d-model 16 --steps 1 --batch-size 8 --out "$out/run")
  echo "$t" >>"$out/total"
  awk -v t="$t" -F'[:,]' '/"wall_seconds"/ { printf "%d\n", t - $2 * 1e6 }' "$out/run/summary.json" >>"$out/outside"
done
stats "train 1 step" <"$out/total"
stats "outside steps" <"$out/outside"
echo "target: start-up (the re-exec included) <= 50 ms; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
