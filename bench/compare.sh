#!/usr/bin/env bash
# Side-by-side step times of xgrad and PyTorch with the same OpenBLAS core and thread count, runs alternating.
#
#   bench/compare.sh [--threads N] [--configs S,M,L] [BUILD_DIR] [ROUNDS]      (defaults: 1, S,M,L, build, 3)
#
# Each round times each size in both engines — xgrad then PyTorch per size in odd rounds, PyTorch then xgrad in
# even ones — and the sgemm floor of L once. The table holds, per size, the median over rounds of each engine's
# median step time with its spread over rounds ((max - min) / median), the minimum over rounds of each engine's
# fastest step, and xgrad/PyTorch ratios of the medians, of the minima and of thread CPU time; then per size the
# sgemm GFLOP of xgrad's step (counted), its floor (those GEMMs alone, one thread, / N) and both engines over it. --threads N gives
# both engines N threads (BLAS and their own loops). PyTorch is Debian's python3-torch
# (`apt-get install -y python3-torch`), run with /usr/bin/python3; it is optional and never a dependency of xgrad.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
threads=1 configs=S,M,L
args=()
while (($#)); do
  case $1 in
    --threads) threads=${2:-}; shift 2 || { echo "compare.sh: --threads needs a value" >&2; exit 2; } ;;
    --configs) configs=${2:-}; shift 2 || { echo "compare.sh: --configs needs a value" >&2; exit 2; } ;;
    -*) echo "compare.sh: unknown option '$1' (allowed: --threads N, --configs S,M,L)" >&2; exit 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
[[ $threads =~ ^[1-9][0-9]?$ ]] && ((threads <= 64)) ||
  { echo "compare.sh: --threads must be a whole number in [1, 64], got '$threads'" >&2; exit 2; }
[[ $configs =~ ^[SML](,[SML])*$ ]] || { echo "compare.sh: --configs must be a comma list of S, M, L, got '$configs'" >&2; exit 2; }
((${#args[@]} <= 2)) || { echo "compare.sh: at most BUILD_DIR and ROUNDS, got '${args[*]}'" >&2; exit 2; }
build=${args[0]:-$here/../build}
rounds=${args[1]:-3}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: ROUNDS must be a whole number >= 1, got '$rounds'" >&2; exit 2; }
bench=$build/bin/xgrad_bench
python=/usr/bin/python3
[ -x "$bench" ] || { echo "compare.sh: $bench not found; build the xgrad_bench target first" >&2; exit 2; }
"$python" -c "import torch" 2>/dev/null ||
  { echo "compare.sh: $python cannot import torch; apt-get install -y python3-torch" >&2; exit 2; }

# The same thread count everywhere, the same OpenBLAS kernels in both processes (Debian's torch calls sgemm_ through
# libblas.so.3, which the alternatives system points at the same OpenBLAS as xgrad's libopenblas.so.0).
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads MKL_NUM_THREADS=$threads
# The same kernels for both engines: AVX-512's where the CPU has it, else Haswell's (what OpenBLAS picks on most
# AVX2 CPUs, Zen included). A SkylakeX core on a CPU without AVX-512 dies of an illegal instruction.
default_core=Haswell
grep -qw avx512f /proc/cpuinfo 2>/dev/null && default_core=SkylakeX
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$default_core}

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE, $threads thread(s), sizes $configs, $rounds rounds, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= rounds; r++)); do
  for cfg in ${configs//,/ }; do
    if ((r % 2)); then
      "$bench" --threads "$threads" --csv step --floor --config "$cfg" >>"$out/xgrad.csv"
      "$python" "$here/torch_reference.py" --threads "$threads" --csv --config "$cfg" >>"$out/torch.csv"
    else
      "$python" "$here/torch_reference.py" --threads "$threads" --csv --config "$cfg" >>"$out/torch.csv"
      "$bench" --threads "$threads" --csv step --floor --config "$cfg" >>"$out/xgrad.csv"
    fi
  done
  [[ $configs == *L* ]] && ((threads == 1)) && "$bench" --csv sgemm --config L >>"$out/sgemm.csv"
  echo "round $r/$rounds done, load average $(cut -d' ' -f1-3 /proc/loadavg)"
done

# step,cfg,median_ms,min_ms,cpu_ms,gflops,peak_rss_mib,core,threads (xgrad adds: counted_gflop,floor_ms,sgemm_gflops)
# sgemm,cfg,total_ms,total_cpu_ms,gflops,cpu_gflops,peak_gflops,core,threads
# Targets: one thread S <= 0.5, M <= 0.8, L <= 1.0; two threads M, L <= 0.8.
targets="S=0.5 M=0.8 L=1.0"
((threads == 1)) || targets="S=- M=0.8 L=0.8"
touch "$out/sgemm.csv"
awk -F, -v targets="$targets" -v configs="$configs" '
  function sort(list, a,   n, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n
  }
  function median(list,   a, n) { n = sort(list, a); return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  function lo(list,   a) { sort(list, a); return a[1] }
  function spread(list,   a, n) { n = sort(list, a); return 100 * (a[n] - a[1]) / median(list) }
  FNR == 1 { engine = FILENAME ~ /xgrad.csv$/ ? "x" : FILENAME ~ /torch.csv$/ ? "t" : "s" }
  engine != "s" { ms[engine, $2] = ms[engine, $2] " " $3; mn[engine, $2] = mn[engine, $2] " " $4
                  cpu[engine, $2] = cpu[engine, $2] " " $5
                  gf[engine, $2] = gf[engine, $2] " " $6; rss[engine, $2] = $7; core[engine] = $8; thr[engine] = $9 }
  engine == "x" { cgf[$2] = cgf[$2] " " $10; flr[$2] = flr[$2] " " $11; frt[$2] = frt[$2] " " $12 }
  engine == "s" { fms = fms " " $3; fcpu = fcpu " " $4; fgf = fgf " " $5; fcgf = fcgf " " $6; fpk = fpk " " $7 }
  END {
    split(targets, tl, " "); for (i in tl) { split(tl[i], kv, "="); target[kv[1]] = kv[2] }
    printf "xgrad: OpenBLAS core %s, %s thread(s); PyTorch: OpenBLAS core %s, %s thread(s)\n", core["x"], thr["x"], core["t"], thr["t"]
    printf "ratio = median over rounds of each engine'\''s median step (the figure judged); min_ratio = minimum over rounds of each engine'\''s fastest step; spread = (max - min) / median of the medians (0 with one round); cpu: thread CPU time\n"
    printf "%-3s %10s %7s %10s %7s %10s %10s %7s %9s %8s %10s %10s %9s %10s %10s %9s %9s\n", "cfg", "xgrad_ms", "spread",
           "torch_ms", "spread", "xgrad_min", "torch_min", "ratio", "min_ratio", "target", "xgrad_cpu", "torch_cpu", "cpu_ratio",
           "xgrad_GF/s", "torch_GF/s", "xgrad_MiB", "torch_MiB"
    n = split(configs, cfgs, ",")
    for (i = 1; i <= n; i++) {
      c = cfgs[i]; xm = median(ms["x", c]); tm = median(ms["t", c]); xc = median(cpu["x", c]); tc = median(cpu["t", c])
      printf "%-3s %10.3f %6.1f%% %10.3f %6.1f%% %10.3f %10.3f %7.3f %9.3f %8s %10.3f %10.3f %9.3f %10.2f %10.2f %9.1f %9.1f\n",
             c, xm, spread(ms["x", c]), tm, spread(ms["t", c]), lo(mn["x", c]), lo(mn["t", c]), xm / tm,
             lo(mn["x", c]) / lo(mn["t", c]), "<= " target[c], xc, tc, xc / tc, median(gf["x", c]), median(gf["t", c]),
             rss["x", c], rss["t", c]
    }
    printf "floor: the sgemm calls of xgrad'\''s timed steps counted by shape (GFLOP per step), timed alone on one BLAS thread in the same round (median over rounds), / threads; x_floor = median step / floor (PyTorch'\''s against the same floor)\n"
    printf "%-3s %10s %10s %10s %12s %12s\n", "cfg", "GFLOP", "floor_ms", "sgemm_GF/s", "xgrad_x_flr", "torch_x_flr"
    for (i = 1; i <= n; i++) {
      c = cfgs[i]; f = median(flr[c]); xf = 0; tf = 0
      if (f > 0) { xf = median(ms["x", c]) / f; tf = median(ms["t", c]) / f }
      printf "%-3s %10.4f %10.3f %10.2f %12.3f %12.3f\n", c, median(cgf[c]), f, median(frt[c]), xf, tf
    }
    if (!(("x", "L") in ms) || thr["x"] != 1) exit  # the floor is of one thread
    fl = median(fgf); lx = median(gf["x", "L"])
    printf "sgemm floor (every GEMM of one L step alone, one thread): %.1f ms = %.2f GFLOP/s (by CPU time: %.1f ms = %.2f GFLOP/s); best single shape %.2f GFLOP/s\n",
           median(fms), fl, median(fcpu), median(fcgf), median(fpk)
    printf "L in xgrad: %.2f GFLOP/s = %.0f%% of the floor (target >= 70%%); %.0f%% of the best single shape\n", lx,
           100 * lx / fl, 100 * lx / median(fpk)
  }' "$out/xgrad.csv" "$out/torch.csv" "$out/sgemm.csv"
