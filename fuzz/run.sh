#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, -fsanitize=fuzzer,address,undefined) in build-fuzz/ and runs each one for
# RUNS executions (default 1,000,000), starting from the seed corpus make_seeds writes. A crash, leak, ASan or UBSan
# report stops the target with its reproducer in build-fuzz/ (crash-*, leak-*); the script then exits 1.
#   fuzz/run.sh [RUNS]          e.g. fuzz/run.sh 10000 for a quick pass
#   XGRAD_FUZZ_BUILD=dir        another build directory
#   XGRAD_FUZZ_TARGETS="a b"    a subset of the targets
# Needs clang and its runtime (Debian 12: apt-get install clang libclang-rt-14-dev).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-1000000}"
BUILD="${XGRAD_FUZZ_BUILD:-build-fuzz}"
TARGETS=(${XGRAD_FUZZ_TARGETS:-fuzz_safetensors fuzz_run_checkpoint fuzz_npy fuzz_token_arrays fuzz_char_lm})

if ! command -v clang++ >/dev/null || ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, long) { return 0; }' |
    clang++ -x c++ -fsanitize=fuzzer - -o /dev/null 2>/dev/null; then
  echo "fuzz/run.sh: clang++ with libFuzzer is missing; on Debian 12: apt-get install clang libclang-rt-14-dev" >&2
  exit 1
fi

cmake -S fuzz -B "$BUILD" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
echo "fuzz/run.sh: building in $BUILD (log: $BUILD/build.log)"
if ! cmake --build "$BUILD" -j"$(nproc)" --target make_seeds "${TARGETS[@]}" >"$BUILD/build.log" 2>&1; then
  grep -E 'error' -A5 "$BUILD/build.log" | head -40 >&2
  exit 1
fi
rm -rf "$BUILD/seeds"
"$BUILD/bin/make_seeds" "$BUILD/seeds"

status=0
for t in "${TARGETS[@]}"; do
  corpus="$BUILD/corpus/$t"
  mkdir -p "$corpus"
  start=$(date +%s)
  # -runs counts executions; the first directory collects new inputs, the second holds the seeds (read only).
  if (cd "$BUILD" && "./bin/$t" -runs="$RUNS" -print_final_stats=1 -max_len=8192 -timeout=10 \
        "corpus/$t" "seeds/$t") >"$BUILD/$t.log" 2>&1; then
    result="ok"
  else
    result="FAILED (see $BUILD/$t.log)"
    status=1
  fi
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$BUILD/$t.log" | grep -o '[0-9]*$' || echo "?")
  echo "$t: $execs executions in $(( $(date +%s) - start )) s, corpus $(ls "$corpus" | wc -l) inputs: $result"
done
exit $status
