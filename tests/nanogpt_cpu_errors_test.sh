#!/bin/sh
# ctest nanogpt_cpu_errors: bad bench/nanogpt_cpu.sh invocations exit 2 with one line on stderr, "nanogpt_cpu.sh: ...",
# naming the flag; the arguments are checked before anything runs, so neither a build nor PyTorch is needed.
#   tests/nanogpt_cpu_errors_test.sh SOURCE_DIR
set -u
script=$1/bench/nanogpt_cpu.sh
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failed=0
# expect MESSAGE ARGS...: exit code 2, exactly one stderr line, starting "nanogpt_cpu.sh: " and holding MESSAGE.
expect() {
  message=$1
  shift
  "$script" "$@" >"$dir/out" 2>"$dir/err"
  code=$?
  lines=$(wc -l <"$dir/err")
  if [ "$code" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -q '^nanogpt_cpu.sh: ' "$dir/err" ||
     ! grep -qF -- "$message" "$dir/err" || [ -s "$dir/out" ]; then
    echo "FAILED: nanogpt_cpu.sh $* -> exit $code, stderr:"
    cat "$dir/err"
    echo "  (wanted exit 2, one line with: $message, and nothing on stdout)"
    failed=1
  fi
}
expect "--iters must be in [8, 1000000], got 7" --iters 7
expect "--iters must be a whole number in [8, 1000000], got 'abc'" --iters abc
expect "--iters must be a whole number in [8, 1000000], got '-5'" --iters -5
expect "--iters needs a value" --iters
expect "--seeds must be in [1, 100], got 0" --seeds 0
expect "--seeds must be a whole number in [1, 100], got '1.5'" --seeds 1.5
expect "--eval-batches must be in [1, 10000], got 10001" --eval-batches 10001
expect "--threads must be a comma list of thread counts in [1, 64], got '1,,2'" --threads 1,,2
expect "--threads must be in [1, 64], got 65" --threads 1,65
expect "--threads must be in [1, 64], got 0" --threads 0
expect "--text: '$dir/missing.txt' is not a readable file" --text "$dir/missing.txt"
expect "--text: '$dir' is not a readable file" --text "$dir"
expect "unknown option '--steps' (allowed: --iters N, --seeds N, --threads LIST, --text FILE, --eval-batches N, --out DIR)" --steps 10
expect "at most one BUILD_DIR, got 'a b'" a b
expect "$dir/no-build/bin/xgrad not found; build the xgrad target first (./run.sh build)" "$dir/no-build"
[ "$failed" -eq 0 ] && echo "nanogpt_cpu_errors: ok"
exit "$failed"
