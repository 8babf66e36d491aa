#!/bin/bash
# Data-parallel throughput on this machine (bench/README.md, "Data parallelism over MPI"): steps/s of `xgrad train` at
# sizes M and L for one process with one thread (P = 1), two MPI ranks of one thread each (P = 2, the same global
# batch), and one process with --threads 2; the allreduce time per step of P = 2; the speedups and the scaling
# efficiency (P = 2 steps/s / (2 × P = 1 steps/s)). Nothing here is a test.
#   bench/mpi_scaling.sh [BUILD_DIR] [ROUNDS]     (default: build 3)
# A size is that of bench/bench_configs.cpp as `xgrad train` spells it: the copy task with 31 symbols (vocabulary
# 32) and seq_len T; M: d_model 128, 4 heads, batch 64, T 32; L: d_model 512, 8 heads, batch 32, T 64. Step time =
# the median step_ms of metrics.csv (forward, backward, allreduce, update) without the first 10% of the steps and the
# last step (which gathers the attention statistics); steps/s = 1000 / that. Each round runs the three modes one
# after the other; the table gives the median over the rounds. The load average is printed at the start and after
# every round: on a shared machine a disturbed round shows there.
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
xgrad=$build/bin/xgrad
[ -x "$xgrad" ] || { echo "mpi_scaling: $xgrad not found (build first: ./run.sh build)" >&2; exit 1; }
command -v mpirun >/dev/null ||
  { echo "mpi_scaling: mpirun not found: apt-get install openmpi-bin libopenmpi-dev (./run.sh build installs it)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OPENBLAS_NUM_THREADS=1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

size_flags() {
  case $1 in
    M) echo "--d-model 128 --n-heads 4 --batch-size 64 --seq-len 32 --steps 100" ;;
    L) echo "--d-model 512 --n-heads 8 --batch-size 32 --seq-len 64 --steps 30" ;;
  esac
}
common="--task copy --n-symbols 31 --lr 1e-3 --log-every 1000000000 --print-every 1000000000 --checkpoint-every 0"

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# median_step_ms RUN_DIR
median_step_ms() {
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "step_ms") c = i; next } { v[NR - 1] = $c; n = NR - 1 }
    END { for (i = int(n / 10) + 1; i < n; i++) print v[i] }' "$1/metrics.csv" | median
}

# run SIZE MODE ROUND: prints "step_ms allreduce_ms"
run() {
  local out="$dir/$1-$2-$3" log="$dir/$1-$2-$3.log"
  # shellcheck disable=SC2046
  case $2 in
    p1) "$xgrad" train $common $(size_flags "$1") --threads 1 --out "$out" >"$log" 2>&1 ;;
    p2) mpirun -np 2 --bind-to core --mca btl self,vader "$xgrad" train $common $(size_flags "$1") --threads 1 \
          --out "$out" >"$log" 2>&1 ;;
    t2) "$xgrad" train $common $(size_flags "$1") --threads 2 --out "$out" >"$log" 2>&1 ;;
  esac || { echo "mpi_scaling: $1 $2 failed:" >&2; cat "$log" >&2; exit 1; }
  local allreduce
  allreduce=$(grep -o 'allreduce [0-9.]* ms/step' "$log" | awk '{print $2}' || true)
  echo "$(median_step_ms "$out") ${allreduce:--}"
}

echo "mpi_scaling: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $rounds rounds"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A ms allreduce
for r in $(seq "$rounds"); do
  for size in M L; do
    for mode in p1 p2 t2; do
      read -r step ar < <(run "$size" "$mode" "$r")
      ms[$size-$mode]+="$step "
      [ "$ar" != - ] && allreduce[$size]+="$ar "
    done
  done
  echo "round $r done; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
done

printf '\n| size | P=1, 1 thread: steps/s | P=2 ranks × 1 thread: steps/s | 1 process, --threads 2: steps/s | P=2 allreduce ms/step | P=2 / P=1 | efficiency | --threads 2 / P=1 |\n'
printf '|---|---:|---:|---:|---:|---:|---:|---:|\n'
for size in M L; do
  p1=$(echo "${ms[$size-p1]}" | tr ' ' '\n' | grep . | median)
  p2=$(echo "${ms[$size-p2]}" | tr ' ' '\n' | grep . | median)
  t2=$(echo "${ms[$size-t2]}" | tr ' ' '\n' | grep . | median)
  ar=$(echo "${allreduce[$size]}" | tr ' ' '\n' | grep . | median)
  awk -v s="$size" -v p1="$p1" -v p2="$p2" -v t2="$t2" -v ar="$ar" 'BEGIN {
    printf "| %s | %.2f | %.2f | %.2f | %.2f | %.2fx | %.0f%% | %.2fx |\n", s, 1000 / p1, 1000 / p2, 1000 / t2, ar,
           p1 / p2, 100 * p1 / (2 * p2), p1 / t2 }'
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
