#!/usr/bin/env bash
# nanoGPT's CPU setup in xgrad and in PyTorch (bench/nanogpt_reference.py), side by side on one text corpus.
#
#   bench/nanogpt_cpu.sh [--iters N] [--seeds N] [--threads 1,2] [--text FILE] [--eval-batches N] [--out DIR]
#                        [BUILD_DIR]
#
# The model and training of nanoGPT's README "I only have a macbook" run: 4 layers, 4 heads, d_model 128, block size
# 64, batch 12, dropout 0, AdamW lr 1e-3 betas (0.9, 0.99) weight decay 0.1 on the 2-D parameters only, gradient
# clipping at 1.0, 100 warmup iterations then cosine decay to 1e-4 over 2000 iterations, the readout tied to the token
# embedding, no biases; xgrad's init (embeddings N(0, 0.02^2), LeCun normal Linear weights) in both engines, and the
# same training and held-out windows (xgrad's char_lm batches, which the reference draws with a port of xgrad's
# generator). Per thread count (default 1 then 2) and seed (0 .. N-1, default 3), one run of each engine, their order
# alternating between seeds so that a drift in the machine's load hits both. --iters scales the warmup (iters / 20)
# and the held-out evaluations (every iters / 4 steps, --eval-batches batches each, default 50).
#
# The corpus: --text FILE, or the King James Bible from Debian's bible-kjv (`./run.sh corpus` installs it and writes
# build/corpus/kjv.txt). The table: per engine and thread count, ms per iteration (each run's mean step time over its
# steps 1 .. N-2; the median over seeds and its spread), xgrad/PyTorch, the step's sgemm GFLOP (every call of xgrad's
# steps 1 .. N-2 counted by shape; PyTorch's row divides the same count by its own time), the GFLOP/s reached, the
# floor (those GEMMs timed alone on one thread, operands in cache, after each xgrad run, the median over runs, divided
# by the thread count: what that many cores allow at best) and the step over it, and the held-out loss at iterations
# N/4, N/2 and N (mean and spread over seeds); then the targets judged. --out DIR keeps every run's metrics.csv
# (default: a temporary directory, removed). PyTorch is Debian's python3-torch, run with /usr/bin/python3; it is optional and
# never a dependency of xgrad. Bad arguments exit 2 with one line naming the flag (tests/nanogpt_cpu_errors_test.sh).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
fail() {
  echo "nanogpt_cpu.sh: $*" >&2
  exit 2
}
# whole FLAG VALUE MIN MAX: VALUE is a whole number in [MIN, MAX].
whole() {
  [[ $2 =~ ^[0-9]{1,10}$ ]] || fail "$1 must be a whole number in [$3, $4], got '$2'"
  ((10#$2 >= $3 && 10#$2 <= $4)) || fail "$1 must be in [$3, $4], got $2"
}

iters=2000 seeds=3 threads_list=1,2 text="" eval_batches=50 keep="" args=()
while (($#)); do
  case $1 in
    --iters | --seeds | --threads | --text | --eval-batches | --out)
      (($# >= 2)) || fail "$1 needs a value"
      case $1 in
        --iters) iters=$2 ;;
        --seeds) seeds=$2 ;;
        --threads) threads_list=$2 ;;
        --text) text=$2 ;;
        --eval-batches) eval_batches=$2 ;;
        --out) keep=$2 ;;
      esac
      shift 2
      ;;
    -*) fail "unknown option '$1' (allowed: --iters N, --seeds N, --threads LIST, --text FILE, --eval-batches N, --out DIR)" ;;
    *) args+=("$1"); shift ;;
  esac
done
whole --iters "$iters" 8 1000000
whole --seeds "$seeds" 1 100
whole --eval-batches "$eval_batches" 1 10000
iters=$((10#$iters)) seeds=$((10#$seeds)) eval_batches=$((10#$eval_batches))  # "08" is 8, not an octal error
[[ $threads_list =~ ^[0-9]+(,[0-9]+)*$ ]] || fail "--threads must be a comma list of thread counts in [1, 64], got '$threads_list'"
for t in ${threads_list//,/ }; do whole --threads "$t" 1 64; done
[[ -z $text || -f $text && -r $text ]] || fail "--text: '$text' is not a readable file"
[[ -z $keep || -d $keep || ! -e $keep ]] || fail "--out: '$keep' exists and is not a directory"
((${#args[@]} <= 1)) || fail "at most one BUILD_DIR, got '${args[*]}'"
build=${args[0]:-$here/../build}
xgrad=$build/bin/xgrad
bench=$build/bin/xgrad_bench
python=/usr/bin/python3
[ -x "$xgrad" ] || fail "$xgrad not found; build the xgrad target first (./run.sh build)"
[ -x "$bench" ] || fail "$bench not found; build the xgrad_bench target first (./run.sh build)"
"$python" -c "import torch" 2>/dev/null || fail "$python cannot import torch; apt-get install -y python3-torch"
[ -n "$text" ] || text=$("$here/../run.sh" corpus | tail -n 1)

# The same kernels for both engines: AVX-512's where the CPU has it, else Haswell's (as bench/compare.sh).
default_core=Haswell
grep -qw avx512f /proc/cpuinfo 2>/dev/null && default_core=SkylakeX
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$default_core}
# Debian's torch runs its own OpenMP threads beside OpenBLAS's pthreads; with libgomp's default spin-waiting, its
# 2-thread step took 216 to 1,572 ms instead of 111 to 154 ms (this machine, 2 vCPUs, load 2 to 5). Passive waiting
# is PyTorch's best case here; xgrad uses no OpenMP, so the variable does not touch it.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

if [ -n "$keep" ]; then
  mkdir -p "$keep"
  out=$(cd "$keep" && pwd)
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
eval_every=$((iters / 4)) warmup=$((iters / 20))
# Flags both engines read with the same meaning (bench/nanogpt_reference.py takes xgrad's names).
common=(--text "$text" --seq-len 64 --n-layers 4 --n-heads 4 --d-model 128 --batch-size 12 --steps "$iters"
  --lr 1e-3 --beta2 0.99 --weight-decay 0.1 --clip-grad-norm 1 --warmup-steps "$warmup" --min-lr 1e-4
  --eval-every "$eval_every" --eval-batches "$eval_batches" --emb-init-std 0.02
  --tie-word-embeddings true --bias false --weight-decay-params matrices)
# xgrad's statistics rows (attention statistics, update RMS) at step 0 and the last step only, no console progress,
# one checkpoint at the end: the steps between are timed as training alone.
xgrad_only=(--task char_lm --dropout 0 --optimizer adamw --lr-schedule cosine --log-every 1000000000 --print-every 1000000000
  --checkpoint-every 0 --overwrite)

# run ENGINE THREADS SEED: one training run into $out/ENGINE-tTHREADS-sSEED, its wall time in wall_s. An xgrad run
# counts its sgemm calls by shape over the steps it times without statistics (XGRAD_SGEMM_COUNT, into
# ENGINE-tTHREADS-sSEED.sgemm.csv), and right after it those shapes are timed alone on one BLAS thread (xgrad_bench
# sgemm --counts): the floor, measured between the runs so that it sees the machine as they did (floor.csv).
run() {
  local dir=$out/$1-t$2-s$3 start=$EPOCHREALTIME
  export OMP_NUM_THREADS=$2 OPENBLAS_NUM_THREADS=$2 MKL_NUM_THREADS=$2
  if [ "$1" = xgrad ]; then
    XGRAD_SGEMM_COUNT=$out/$1-t$2-s$3.sgemm.csv "$xgrad" train "${common[@]}" "${xgrad_only[@]}" --threads "$2" \
      --seed "$3" --out "$dir" >"$out/$1-t$2-s$3.log" 2>&1 &&
      { printf '%s,%s,' "$2" "$3"; OPENBLAS_NUM_THREADS=1 "$bench" --threads 1 --csv sgemm --counts "$out/$1-t$2-s$3.sgemm.csv"; } \
        >>"$out/floor.csv"
  else
    "$python" "$here/nanogpt_reference.py" "${common[@]}" --threads "$2" --seed "$3" --out "$dir" >"$out/$1-t$2-s$3.log" 2>&1
  fi || { cat "$out/$1-t$2-s$3.log" >&2; echo "nanogpt_cpu.sh: the $1 run failed (above)" >&2; exit 1; }
  awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f\n", b - a }' >"$dir/wall_s"
  busiest=$(awk -v a="$busiest" -v b="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN { print (b > a ? b : a) }')
  printf '  %-5s %d thread(s) seed %d: %.1f s, load average %s\n' "$1" "$2" "$3" "$(cat "$dir/wall_s")" \
    "$(cut -d' ' -f1-3 /proc/loadavg)"
}

echo "nanoGPT CPU setup, $iters iterations, seeds 0..$((seeds - 1)), threads $threads_list, text $text ($(wc -c <"$text") bytes)"
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores; OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE, OMP_WAIT_POLICY=$OMP_WAIT_POLICY"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
busiest=$(cut -d' ' -f1 /proc/loadavg)
for threads in ${threads_list//,/ }; do
  for ((seed = 0; seed < seeds; seed++)); do
    if ((seed % 2 == 0)); then
      run xgrad "$threads" "$seed"
      run torch "$threads" "$seed"
    else
      run torch "$threads" "$seed"
      run xgrad "$threads" "$seed"
    fi
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
"$python" "$here/nanogpt_reference.py" summarize "$out" --iters "$iters" --seeds "$seeds" --threads "$threads_list"
# A verdict needs the machine to itself: the runs' own load is one process (a thread count's worth at most).
if awk -v l="$busiest" -v c="$(nproc)" 'BEGIN { exit !(l > c + 0.5) }'; then
  echo "warning: the 1-minute load average reached $busiest on $(nproc) cores during the runs: other work shared the machine, so these times and verdicts are not the quiet machine's"
fi
