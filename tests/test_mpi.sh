#!/bin/bash
# ctest mpi_<case>: data-parallel training under the real Open MPI `mpirun` with the real xgrad.
#   tests/test_mpi.sh XGRAD_BIN SOURCE_DIR CASE [TEST_MPI_CHECKSUM_BIN]
# CASE: equivalence | batch_size_not_divisible | killed_rank | stopped_job | resume_other_world_size | bad_input |
#       checksum_mismatch
# Fails (never skips) without mpirun, naming the packages to install. Runs as root in CI: OMPI_ALLOW_RUN_AS_ROOT.
# Tolerance: P = 2 and P = 4 differ from P = 1 only in the order the gradient sums are added up (measured over 100
# steps of the tiny model below: max relative difference 1.3e-7 in loss and grad_norm, 7e-7 in a per-parameter
# grad_norm column under AdamW, 1.2e-6 under Muon, whose Newton-Schulz iteration magnifies a gradient's small
# singular directions); kTolerance leaves a margin of over 8x for other compilers, flags (the sanitizer build) and BLAS
# kernels. Resumed runs on the same number of processes match exactly.
set -u
xgrad=$1
src=$2
case_name=$3
checksum_test=${4:-}
readonly kTolerance=1e-5

fail() { echo "mpi_$case_name: FAILED: $*" >&2; exit 1; }
command -v mpirun >/dev/null ||
  fail "mpirun not found: install Open MPI (apt-get install openmpi-bin libopenmpi-dev; ./run.sh test installs it)"

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
# Each test's mpirun keeps its session files in the test's directory: two mpiruns starting at once both create
# /tmp/ompi.<host>.<uid> otherwise, and one of them fails ("mkdir ... File exists").
export OMPI_MCA_orte_tmpdir_base="$dir" PRTE_MCA_prte_tmpdir_base="$dir"  # Open MPI 4.1 (ORTE) and 5.0 (PRRTE)
# Open MPI keeps some of its allocations until exit: LeakSanitizer (in the sanitizer build) is told to ignore those.
# Open MPI's libraries have no frame pointers, so only the slow unwinder sees them in an allocation's stack, which
# the suppressions match against. It makes every allocation slow (the fault cases' longer runs took 150 s): those
# cases, whose code paths the others leak-check under mpirun, run without leak checking.
export LSAN_OPTIONS="suppressions=$src/tests/mpi_lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
if [ -n "${ASAN_OPTIONS:-}" ]; then
  case $case_name in
    killed_rank | stopped_job) export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" ;;
    *) export ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0" ;;
  esac
fi
# Shared-memory transport only, with no network interfaces probed: the ranks are all on this machine. A rank waiting
# for the others yields its CPU rather than spinning, which would slow them on a busy machine. Open MPI 5 renamed the
# shared-memory BTL from vader to sm: the name is the one this Open MPI lists.
shared_memory_btl=vader
ompi_info --parsable 2>/dev/null | grep -q '^mca:btl:sm:' && shared_memory_btl=sm
mpi() {
  local np=$1
  shift
  local pass=()
  for v in LSAN_OPTIONS ASAN_OPTIONS UBSAN_OPTIONS OPENBLAS_NUM_THREADS; do [ -n "${!v:-}" ] && pass+=(-x "$v"); done
  timeout 300 mpirun --oversubscribe -np "$np" --mca btl "self,$shared_memory_btl" --mca mpi_yield_when_idle 1 "${pass[@]}" "$@"
}
tiny=(--d-model 16 --batch-size 8 --log-every 10 --print-every 1000)
# A run that a fault interrupts: its ranks are held with SIGSTOP as soon as the first checkpoint (step 50) appears
# (start_and_hold), so the fault lands mid-run however fast the machine; 2000 steps (2.5 s on two ranks once the last
# block computed only the target position) leave the poll margin on a loaded machine.
long=(--d-model 64 --batch-size 32 --log-every 10 --print-every 1000 --steps 2000 --checkpoint-every 50)

# same_columns A B: the loss and grad_norm columns (and every per-parameter grad_norm) of A/metrics.csv and
# B/metrics.csv agree within kTolerance (relative), row by row, over the same steps.
same_columns() {
  awk -F, -v tol="$kTolerance" -v a="$1" -v b="$2" '
    FNR == 1 { if (NR == 1) header = $0; else if ($0 != header) { print "headers differ"; bad = 1 }
               if (NR == 1) for (i = 1; i <= NF; i++) if ($i == "loss" || $i == "z_loss" || $i ~ /^grad_norm/) cols[i] = $i
               next }
    NR == FNR { row[FNR] = $0; rows = FNR; next }
    { split(row[FNR], x, ",")
      for (i in cols) {
        d = x[i] - $i; if (d < 0) d = -d
        m = x[i] < 0 ? -x[i] : x[i]; n = $i < 0 ? -$i : $i; if (n > m) m = n
        rel = m > 0 ? d / m : 0
        if (rel > worst) { worst = rel; where = cols[i] " at step " $1 }
        if (rel > tol) { printf "%s step %s: %s vs %s (relative difference %g)\n", cols[i], $1, x[i], $i, rel; bad = 1 }
      }
      compared = FNR }
    END { if (compared != rows) { printf "%d rows in %s, %d in %s\n", rows, a, compared, b; bad = 1 }
          printf "max relative difference %g (%s) over %d steps\n", worst, where, compared - 1
          exit bad }' "$1/metrics.csv" "$2/metrics.csv"
}

# checksums_agree LOG P: the log's line of parameter checksums lists P ranks, all equal.
checksums_agree() {
  local line
  line=$(grep 'parameter checksums after step' "$1") || fail "no parameter checksum line in $1: $(cat "$1")"
  local sums
  sums=$(echo "$line" | grep -o 'rank [0-9]* [0-9a-f]\{16\}' | awk '{print $3}')
  [ "$(echo "$sums" | wc -l)" -eq "$2" ] || fail "expected $2 ranks in: $line"
  [ "$(echo "$sums" | sort -u | wc -l)" -eq 1 ] || fail "ranks hold different parameters: $line"
}

# mpirun_under PID: the mpirun process below PID (the background job runs `timeout`, which runs mpirun). Open MPI 5's
# mpirun replaces itself with PRRTE's prterun, which is then the ranks' parent.
mpirun_under() {
  local p
  for p in $(pgrep -P "$1"); do
    case "$(cat /proc/"$p"/comm 2>/dev/null)" in mpirun | prterun) echo "$p"; return ;; esac
    mpirun_under "$p"
  done
}

# start_and_hold DIR LOG: starts the ${long[*]} run on 2 ranks into DIR, waits (10 ms polls) for its first
# checkpoint and stops both ranks with SIGSTOP. Sets job (the background job), mpirun_pid and ranks.
start_and_hold() {
  mpi 2 "$xgrad" train "${long[@]}" --out "$1" >"$2" 2>&1 &
  job=$!
  for _ in $(seq 12000); do [ -e "$1/checkpoint.safetensors" ] && break; sleep 0.01; done
  [ -e "$1/checkpoint.safetensors" ] || fail "$1/checkpoint.safetensors did not appear within 120 s: $(cat "$2")"
  mpirun_pid=$(mpirun_under "$job")
  [ -n "$mpirun_pid" ] || fail "mpirun not found under pid $job (the run ended before it was held: $(cat "$2"))"
  # The ranks are mpirun's children (on one machine mpirun is also their daemon).
  ranks=($(ps --ppid "$mpirun_pid" -o pid=,comm= | awk '$2 == "xgrad" {print $1}'))
  [ "${#ranks[@]}" -eq 2 ] || fail "expected 2 ranks under mpirun $mpirun_pid, found ${#ranks[@]}"
  kill -STOP "${ranks[@]}"
  [ ! -e "$1/summary.json" ] || fail "the run ended before it was held (make \${long[*]} slower)"
}

world_size_of() { grep -o '"world_size": [0-9]*' "$1/config.json" | awk '{print $2}'; }

# exits_within PID SECONDS: waits for the background job PID; fails if it is still running after SECONDS (a hang).
exits_within() {
  for _ in $(seq $(($2 * 10))); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$1" 2>/dev/null && fail "mpirun still running $2 s after the fault (a hang)"
  wait "$1"
}

case "$case_name" in
  equivalence)
    # With a z-loss term, whose gradient and column are reduced like the cross-entropy's. Under Muon every rank
    # orthogonalises the summed gradient: the ranks agree exactly and differ from P = 1 in the summation order alone.
    # Under qk_clip (tau under the logits, so heads are clipped) every rank clips by the largest logit of all rows.
    for variant in "--optimizer adamw" "--optimizer muon" "--scale qk_clip --qk-clip-tau 0.5"; do
      read -ra optimizer <<<"$variant"
      "$xgrad" train "${tiny[@]}" "${optimizer[@]}" --steps 100 --z-loss 1e-2 --out p1 >p1.log 2>&1 ||
        fail "P = 1, $variant: $(cat p1.log)"
      for np in 2 4; do
        mpi "$np" "$xgrad" train "${tiny[@]}" "${optimizer[@]}" --steps 100 --z-loss 1e-2 --out "p$np" \
          >"p$np.log" 2>&1 || fail "P = $np, $variant: $(cat "p$np.log")"
        same_columns p1 "p$np" || fail "P = $np differs from P = 1 beyond $kTolerance ($variant)"
        checksums_agree "p$np.log" "$np"
        [ "$(world_size_of "p$np")" = "$np" ] || fail "config.json of P = $np records world_size $(world_size_of "p$np")"
      done
      [ "$(world_size_of p1)" = 1 ] || fail "config.json of a plain run records world_size $(world_size_of p1)"
      rm -rf p1 p2 p4
    done
    ;;
  other_commands)
    # Only train is data-parallel: a sweep under mpirun would make every rank a sweep whose runs think they are ranks.
    mpi 2 "$xgrad" sweep --out sw --d-k 4 --seeds 0 --scale none --steps 3 >sweep.log 2>&1 && fail "sweep under mpirun exited 0"
    grep -q "sweep does not run under mpirun" sweep.log || fail "no refusal: $(cat sweep.log)"
    [ ! -e sw ] || fail "the refused sweep wrote sw/"
    mpi 2 "$xgrad" probe --d-model 8 >probe.log 2>&1 && fail "probe under mpirun exited 0"
    grep -q "probe does not run under mpirun" probe.log || fail "no refusal: $(cat probe.log)"
    ;;
  batch_size_not_divisible)
    mpi 4 "$xgrad" train --d-model 16 --batch-size 6 --steps 5 --out run >out.log 2>&1
    code=$?
    [ "$code" -eq 2 ] || fail "exit $code, wanted 2: $(cat out.log)"
    grep -qF -- "--batch-size: 6 is not divisible by the 4 MPI processes (mpirun -np 4)" out.log ||
      fail "message naming --batch-size 6 and the 4 processes missing: $(cat out.log)"
    [ ! -e run/metrics.csv ] || fail "a refused run wrote metrics.csv"
    ;;
  killed_rank)
    # A rank killed by SIGKILL: the job ends nonzero without hanging; the last checkpoint is whole, and --resume
    # continues to the curve of an uninterrupted run.
    mpi 2 "$xgrad" train "${long[@]}" --out whole >whole.log 2>&1 || fail "uninterrupted: $(cat whole.log)"
    start_and_hold run run.log
    kill -KILL "${ranks[1]}"
    kill -CONT "${ranks[0]}"
    exits_within "$job" 60
    code=$?
    [ "$code" -ne 0 ] || fail "mpirun exited 0: the run ended before the kill (make \${long[*]} slower)"
    mpi 2 "$xgrad" train --resume run >resume.log 2>&1 || fail "--resume after the kill: $(cat resume.log)"
    grep -q "resuming from" resume.log || fail "--resume did not start from the checkpoint: $(cat resume.log)"
    same_columns whole run || fail "the resumed run differs from the uninterrupted one"
    ;;
  stopped_job)
    # SIGTERM to mpirun (as a scheduler sends it) reaches every rank: all stop after the same step, rank 0 writes a
    # checkpoint, and --resume continues to the uninterrupted curve.
    mpi 2 "$xgrad" train "${long[@]}" --out whole >whole.log 2>&1 || fail "uninterrupted: $(cat whole.log)"
    start_and_hold run run.log
    kill -TERM "$mpirun_pid"
    kill -CONT "${ranks[@]}"
    exits_within "$job" 60
    code=$?
    [ "$code" -ne 0 ] || fail "mpirun exited 0: the run ended before SIGTERM (make \${long[*]} slower)"
    # The checkpoint holds the last step in metrics.csv: written at the stop, not at the last --checkpoint-every.
    last_row=$(tail -n 1 run/metrics.csv | cut -d, -f1)
    saved=$(head -c 65536 run/checkpoint.safetensors | grep -ao '"step":"[0-9]*"' | head -n 1 | tr -dc 0-9)
    [ "$saved" = $((last_row + 1)) ] || fail "no checkpoint on SIGTERM: it holds step $saved, metrics.csv ends at row $last_row"
    # Open MPI 4.1's mpirun forwards what rank 0 prints as it stops; 5.0's prterun ends the job as soon as a rank has
    # ended by the signal, dropping output still in flight, so the lines are checked where they arrived.
    if grep -q "parameter checksums" run.log; then
      grep -q "stopped by SIGTERM after step $saved" run.log || fail "no checkpoint message on SIGTERM: $(cat run.log)"
      checksums_agree run.log 2
    fi
    mpi 2 "$xgrad" train --resume run >resume.log 2>&1 || fail "--resume: $(cat resume.log)"
    same_columns whole run || fail "the resumed run differs from the uninterrupted one"
    ;;
  resume_other_world_size)
    # 50 steps on 2 ranks, on to 100 in one process, on to 150 on 4 ranks: the curve of 150 steps in one process.
    "$xgrad" train "${tiny[@]}" --steps 150 --out whole >whole.log 2>&1 || fail "uninterrupted: $(cat whole.log)"
    mpi 2 "$xgrad" train "${tiny[@]}" --steps 50 --out run >a.log 2>&1 || fail "P = 2: $(cat a.log)"
    "$xgrad" train --resume run --steps 100 >b.log 2>&1 || fail "--resume in one process: $(cat b.log)"
    [ "$(world_size_of run)" = 1 ] || fail "config.json after the one-process session: world_size $(world_size_of run)"
    mpi 4 "$xgrad" train --resume run --steps 150 >c.log 2>&1 || fail "--resume on 4 ranks: $(cat c.log)"
    [ "$(world_size_of run)" = 4 ] || fail "config.json after the 4-rank session: world_size $(world_size_of run)"
    checksums_agree c.log 4
    same_columns whole run || fail "the run resumed across 2, 1 and 4 processes differs from one process"
    ;;
  bad_input)
    # The same command on every rank, but the data file rank 1 reads (a relative path, from its own directory, as
    # on another node) is not a numpy file: the job fails with rank 1's message instead of hanging.
    mkdir -p rank0/d rank1/d
    npy() {  # npy FILE OFFSET: 16 rows of 4 int64 tokens, (i + OFFSET) % 10, as numpy writes them
      local header="{'descr': '<i8', 'fortran_order': False, 'shape': (16, 4), }"
      while [ $(((10 + ${#header} + 1) % 64)) -ne 0 ]; do header="$header "; done
      { printf '\223NUMPY\001\000'; printf "\\$(printf %03o $((${#header} + 1)))\\000"; printf '%s\n' "$header"
        for i in $(seq 0 63); do printf "\\$(printf %03o $(((i + $2) % 10)))\\000\\000\\000\\000\\000\\000\\000"; done
      } >"$1"
    }
    npy rank0/d/inputs.npy 0
    npy rank0/d/targets.npy 1
    echo "not a numpy file" >rank1/d/inputs.npy
    cp rank0/d/targets.npy rank1/d/
    cat >rank.sh <<EOF
#!/bin/sh
cd "$dir/rank\$OMPI_COMM_WORLD_RANK" && exec "$xgrad" train --task data --data d --d-model 8 --batch-size 2 \
  --steps 20 --out "$dir/run"
EOF
    chmod +x rank.sh
    mpi 2 ./rank.sh >out.log 2>&1 &
    job=$!
    exits_within "$job" 120
    code=$?
    [ "$code" -ne 0 ] || fail "the job succeeded with a bad input on rank 1: $(cat out.log)"
    grep -q "rank1/d/inputs.npy.*(rank 1 of 2)" out.log || fail "rank 1's message missing: $(cat out.log)"
    ;;
  checksum_mismatch)
    # tests/test_mpi_checksum.cpp on 2 ranks: rank 1 changes a weight; the next checksum stops the run on both.
    export XGRAD_MPI_TEST_DIR="$dir"
    mpi 2 -x XGRAD_MPI_TEST_DIR "$checksum_test" --no-colors=true >out.log 2>&1 || fail "$(cat out.log)"
    [ "$(grep -c 'Status: SUCCESS' out.log)" -eq 2 ] || fail "expected both ranks to pass: $(cat out.log)"
    ;;
  *)
    fail "unknown case '$case_name'"
    ;;
esac
echo "mpi_$case_name: ok"
