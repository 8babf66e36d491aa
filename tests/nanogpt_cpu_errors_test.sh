#!/bin/sh
# ctest nanogpt_cpu_errors: bad bench/nanogpt_cpu.sh invocations exit 2 with one line on stderr, "nanogpt_cpu.sh: ...",
# naming the flag; the arguments are checked before anything runs, so neither a build nor PyTorch is needed.
#   tests/nanogpt_cpu_errors_test.sh SOURCE_DIR
set -u
program=$1/bench/nanogpt_cpu.sh name=nanogpt_cpu.sh quiet_stdout=1
# shellcheck source-path=SCRIPTDIR source=support/expect_usage_error.sh
. "$(dirname "$0")/support/expect_usage_error.sh"
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
# A leading zero passes the check, and the script reads it as decimal afterwards (10#: "08" is not octal).
expect "$dir/no-build/bin/xgrad not found; build the xgrad target first (./run.sh build)" --iters 08 --seeds 09 "$dir/no-build"
: >"$dir/afile"
expect "--out: '$dir/afile' exists and is not a directory" --out "$dir/afile"
[ "$failed" -eq 0 ] && echo "nanogpt_cpu_errors: ok"
exit "$failed"
