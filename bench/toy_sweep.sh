#!/usr/bin/env bash
# A toy sweep in xgrad and in PyTorch, side by side.
#
#   bench/toy_sweep.sh [BUILD_DIR] [ROUNDS] [STEPS]        (defaults: build, 3, 3000)
#
# The model and task of a toy sweep: kv_recall with summed key + value embeddings (8 keys, 8 values, 8 pairs, so
# T = 9), batch 64, one pre-LN block of a single attention head with d_model = d_k, no output projection, no MLP,
# final LayerNorm, readout at the target position; SGD (lr 0.1, momentum 0.9) and AdamW (lr 1e-3). xgrad runs as a
# sweep runs it: `xgrad train` with the experiment's logging (--log-every 10, metrics.csv row and grad_norm every
# step, checkpoints every 100 steps); PyTorch runs bench/torch_reference.py --toy, the same model, init and
# optimizer with the loss and the global gradient norm of every step written to a file. PyTorch runs twice: as the
# model is usually written (`torch`: queries at every position, the readout at the target), and doing the same work
# as xgrad's trainer (`torch_q`, --queries target: the query, attention output and residual at the target position
# only, keys and values everywhere; the same FLOPs as xgrad). Per d_k and optimizer and round, each engine runs 2
# single-thread processes at once (seeds 0 and 1, as a sweep on this 2-core machine runs them), the engines' order
# rotating between rounds. A process's steps/s is steps over its training loop's wall time (xgrad: summary.json
# wall_seconds; PyTorch: the loop in torch_reference.py); process start (PyTorch's import, xgrad's BLAS re-exec) is
# reported separately. The ratios are xgrad's step time over each PyTorch's (target <= 0.5 on the same work:
# ratio_q).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
rounds=${2:-3}
steps=${3:-3000}
xgrad=$build/bin/xgrad
python=/usr/bin/python3
[ -x "$xgrad" ] || { echo "toy_sweep.sh: $xgrad not found; build the xgrad target first" >&2; exit 2; }
"$python" -c "import torch" 2>/dev/null ||
  { echo "toy_sweep.sh: $python cannot import torch; apt-get install -y python3-torch" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "toy_sweep.sh: ROUNDS must be a whole number >= 1, got '$rounds'" >&2; exit 2; }
[[ $steps =~ ^[1-9][0-9]*$ ]] || { echo "toy_sweep.sh: STEPS must be a whole number >= 1, got '$steps'" >&2; exit 2; }

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
now() { date +%s.%N; }

# run_xgrad D_K OPT LR SEED -> "toy,d_k,opt,steps,train_seconds,steps_per_s,final_loss,process_seconds"
run_xgrad() {
  local dir=$out/x-$1-$2-$4-$RANDOM t0 t1
  t0=$(now)
  "$xgrad" train --task kv_recall --kv-encoding sum --n-keys 8 --n-values 8 --n-pairs 8 --batch-size 64 \
    --d-model "$1" --d-k "$1" --n-heads 1 --mlp false --attn-out-proj false --optimizer "$2" --lr "$3" --seed "$4" \
    --steps "$steps" --log-every 10 --print-every "$steps" --threads 1 --out "$dir" >/dev/null 2>&1
  t1=$(now)
  "$python" - "$dir/summary.json" "$1" "$2" "$steps" "$t0" "$t1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
steps, secs = int(sys.argv[4]), s["wall_seconds"]
print(f"toy,{sys.argv[2]},{sys.argv[3]},{steps},{secs:.4f},{steps / secs:.2f},{s['final_loss']:.6g},"
      f"{float(sys.argv[6]) - float(sys.argv[5]):.4f}")
PY
  rm -rf "$dir"
}

run_torch() {
  "$python" "$here/torch_reference.py" --toy --d-k "$1" --optimizer "$2" --lr "$3" --seed "$4" --steps "$steps" \
    --threads 1 --metrics "$out/t-$1-$2-$4.csv"
}

run_torch_q() {
  "$python" "$here/torch_reference.py" --toy --queries target --d-k "$1" --optimizer "$2" --lr "$3" --seed "$4" \
    --steps "$steps" --threads 1 --metrics "$out/q-$1-$2-$4.csv"
}

# engine ENGINE D_K OPT LR: two processes at once; one CSV line each into $out/ENGINE.csv
engine() {
  local e=$1 d_k=$2 opt=$3 lr=$4
  "run_$e" "$d_k" "$opt" "$lr" 0 >"$out/$e.0" &
  local p0=$!
  "run_$e" "$d_k" "$opt" "$lr" 1 >"$out/$e.1" &
  local p1=$!
  wait "$p0" && wait "$p1" || { echo "toy_sweep.sh: a $e run failed (d_k $d_k, $opt)" >&2; exit 1; }
  cat "$out/$e.0" "$out/$e.1" >>"$out/$e.csv"
}

echo "toy sweep: $steps steps per run, $rounds rounds, OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= rounds; r++)); do
  for d_k in 16 64 256; do
    for arm in sgd@0.1 adamw@0.001; do
      opt=${arm%@*} lr=${arm#*@}
      case $((r % 3)) in
        1) order="xgrad torch torch_q" ;;
        2) order="torch torch_q xgrad" ;;
        0) order="torch_q xgrad torch" ;;
      esac
      for e in $order; do engine "$e" "$d_k" "$opt" "$lr"; done
    done
  done
  echo "round $r/$rounds done, load average $(cut -d' ' -f1-3 /proc/loadavg)"
done

# toy,d_k,opt,steps,train_seconds,steps_per_s,final_loss,process_seconds
awk -F, '
  function sort(list, a,   n, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n
  }
  function median(list,   a, n) { n = sort(list, a); return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  function lo(list,   a) { sort(list, a); return a[1] }
  function hi(list,   a, n) { n = sort(list, a); return a[n] }
  FNR == 1 { e = FILENAME ~ /xgrad.csv$/ ? "x" : FILENAME ~ /torch_q.csv$/ ? "q" : "t" }
  { k = $2 SUBSEP $3; ms[e, k] = ms[e, k] " " 1000 * $5 / $4; start[e] = start[e] " " $8 - $5; loss[e, k] = loss[e, k] " " $7
    if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
  END {
    printf "per-step ms of one process (2 running at once): median over processes and rounds, min, spread (max-min)/median\n"
    printf "torch: queries at every position; torch_q: the same work as xgrad (queries at the target only). ratio = medians, min_ratio = minima\n"
    printf "%-5s %-6s %9s %9s %7s %9s %9s %7s %9s %9s %7s %8s %8s %8s %8s %7s\n", "d_k", "optim", "xgrad_ms", "xgrad_min",
           "spread", "torch_ms", "torch_min", "spread", "torchq_ms", "torchq_min", "spread", "ratio", "min_ratio",
           "ratio_q", "min_rq", "target"
    for (i = 1; i <= n; i++) {
      k = order[i]; split(k, kk, SUBSEP)
      xm = median(ms["x", k]); tm = median(ms["t", k]); qm = median(ms["q", k])
      printf "%-5s %-6s %9.3f %9.3f %6.1f%% %9.3f %9.3f %6.1f%% %9.3f %9.3f %6.1f%% %8.3f %8.3f %8.3f %8.3f %7s\n",
             kk[1], kk[2], xm, lo(ms["x", k]), 100 * (hi(ms["x", k]) - lo(ms["x", k])) / xm,
             tm, lo(ms["t", k]), 100 * (hi(ms["t", k]) - lo(ms["t", k])) / tm,
             qm, lo(ms["q", k]), 100 * (hi(ms["q", k]) - lo(ms["q", k])) / qm,
             xm / tm, lo(ms["x", k]) / lo(ms["t", k]), xm / qm, lo(ms["x", k]) / lo(ms["q", k]), "<= 0.5"
    }
    printf "final loss, median (the engines draw different batches and initial weights, so only similar, not equal): "
    for (i = 1; i <= n; i++) { k = order[i]; split(k, kk, SUBSEP)
      printf "%s/%s xgrad %.4g torch %.4g torch_q %.4g; ", kk[1], kk[2], median(loss["x", k]), median(loss["t", k]), median(loss["q", k]) }
    printf "\nprocess time outside the training loop (start-up, and xgrad'\''s final files), median: xgrad %.3f s, PyTorch %.3f s\n",
           median(start["x"]), median(start["t"] start["q"])
  }' "$out/xgrad.csv" "$out/torch.csv" "$out/torch_q.csv"
