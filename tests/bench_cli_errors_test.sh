#!/bin/sh
# ctest bench_cli_errors: bad xgrad_bench invocations exit 2 with one line on stderr, "xgrad_bench: ...", naming the
# flag (or command) and the allowed values; nothing is timed.
#   tests/bench_cli_errors_test.sh XGRAD_BENCH_BIN
set -u
program=$1 name=xgrad_bench
# shellcheck source-path=SCRIPTDIR source=support/expect_usage_error.sh
. "$(dirname "$0")/support/expect_usage_error.sh"
expect "--threads: must be in [1, 64], got 9999" --threads 9999 step
expect "--threads: must be in [1, 64], got 0" step --threads 0
expect "--threads: must be a whole number in [1, 64], got 'abc'" --threads abc step
expect "--steps: must be in [1, 1000000000], got 0" step --steps 0
expect "--steps: must be a whole number in [1, 1000000000], got '-1'" step --steps -1
expect "--warmup: must be a whole number in [0, 1000000000], got '-1'" step --warmup -1
expect "--config: X not in {S,M,L}" step --config S,X
expect "--targets: first not in {all,last}" step --targets first
expect "--readout: some not in {targets,full}" step --readout some
expect "--config excludes --shape" step --config S --shape 64,1,0,2,16,32
expect "--shape: expected six whole numbers" step --shape 64,1
expect "--steps: must be in [1, 1000000000], got 0" memory --steps 0
expect "--steps: must be a whole number in [1, 1000000000], got '-5'" memory --steps -5
expect "--wall: must be a decimal number > 0 (seconds), got 'nan'" floor "$dir" --wall nan
expect "--wall: must be a finite number > 0 (seconds), got 0" floor "$dir" --wall 0
expect "--wall: must be a finite number > 0 (seconds), got -1" floor "$dir" --wall -1
expect "--wall: must be a finite number > 0 (seconds), got 1e999" floor "$dir" --wall 1e999
expect "--cores: must be a whole number in [1, 1024], got 'x'" floor "$dir" --cores x
expect "--shape: '' in '' is not a whole number" sgemm --shape ""
expect "--shape: '' in '64,1,0,2,16,32,' is not a whole number" sgemm --shape 64,1,0,2,16,32,
expect "--shape: expected six whole numbers" sgemm --shape 64,1,0,2,16
expect "--config excludes --shape" sgemm --config L --shape 64,1,0,2,16,32
expect "--config: X not in {S,M,L}" sgemm --config X
expect "--shape: d_model must be at most 16384, got 99999999" sgemm --shape 99999999,1,0,2,16,32
expect "--shape: d_k must be at most 8192" sgemm --shape 64,1,9000,2,16,32
expect "--shape: batch * seq_len must be at most 1048576" sgemm --shape 64,1,0,2048,1024,32
expect "--shape: vocab must be at most 16777216" sgemm --shape 64,1,0,2,16,99999999
expect "--shape: its largest GEMM needs 36.0 GiB (limit 4)" sgemm --shape 512,8,0,1024,1024,32
expect "unknown command 'foo' (allowed: step, sgemm, memory, floor;" foo
expect "unknown command 'foo' (allowed: step, sgemm, memory, floor;" --threads 2 foo
expect "a command is required (allowed: step, sgemm, memory, floor;"
[ "$failed" -eq 0 ] && echo "bench_cli_errors: ok"
exit "$failed"
