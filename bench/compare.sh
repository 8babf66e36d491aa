#!/usr/bin/env bash
# Side-by-side step times of xgrad and PyTorch on one thread with the same OpenBLAS core, runs alternating.
#
#   bench/compare.sh [BUILD_DIR] [ROUNDS]        (defaults: build, 3)
#
# Each round times S, M and L in both engines — xgrad then PyTorch per size in odd rounds, PyTorch then xgrad in
# even ones — and the sgemm floor of L once. The table holds, per size, the median over rounds of each engine's
# median step time, and xgrad/PyTorch ratios of wall and thread CPU time. PyTorch is Debian's python3-torch
# (`apt-get install -y python3-torch`), run with /usr/bin/python3; it is optional and never a dependency of xgrad.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
rounds=${2:-3}
bench=$build/bin/xgrad_bench
python=/usr/bin/python3
[ -x "$bench" ] || { echo "compare.sh: $bench not found; build the xgrad_bench target first" >&2; exit 2; }
"$python" -c "import torch" 2>/dev/null ||
  { echo "compare.sh: $python cannot import torch; apt-get install -y python3-torch" >&2; exit 2; }

# One thread everywhere, the same OpenBLAS kernels in both processes (Debian's torch calls sgemm_ through
# libblas.so.3, which the alternatives system points at the same OpenBLAS as xgrad's libopenblas.so.0).
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE, $rounds rounds, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= rounds; r++)); do
  for cfg in S M L; do
    if ((r % 2)); then
      "$bench" --csv step --config "$cfg" >>"$out/xgrad.csv"
      "$python" "$here/torch_reference.py" --csv --config "$cfg" >>"$out/torch.csv"
    else
      "$python" "$here/torch_reference.py" --csv --config "$cfg" >>"$out/torch.csv"
      "$bench" --csv step --config "$cfg" >>"$out/xgrad.csv"
    fi
  done
  "$bench" --csv sgemm --config L >>"$out/sgemm.csv"
  echo "round $r/$rounds done, load average $(cut -d' ' -f1-3 /proc/loadavg)"
done

# step,cfg,median_ms,min_ms,cpu_ms,gflops,peak_rss_mib,core,threads
# sgemm,cfg,total_ms,total_cpu_ms,gflops,cpu_gflops,peak_gflops,core,threads
awk -F, -v targets="S=0.5 M=0.8 L=1.0" '
  function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  FNR == 1 { engine = FILENAME ~ /xgrad.csv$/ ? "x" : FILENAME ~ /torch.csv$/ ? "t" : "s" }
  engine != "s" { ms[engine, $2] = ms[engine, $2] " " $3; cpu[engine, $2] = cpu[engine, $2] " " $5
                  gf[engine, $2] = gf[engine, $2] " " $6; rss[engine, $2] = $7; core[engine] = $8; thr[engine] = $9 }
  engine == "s" { fms = fms " " $3; fcpu = fcpu " " $4; fgf = fgf " " $5; fcgf = fcgf " " $6; fpk = fpk " " $7 }
  END {
    split(targets, tl, " "); for (i in tl) { split(tl[i], kv, "="); target[kv[1]] = kv[2] }
    printf "xgrad: OpenBLAS core %s, %s thread(s); PyTorch: OpenBLAS core %s, %s thread(s)\n", core["x"], thr["x"], core["t"], thr["t"]
    printf "%-3s %10s %10s %7s %8s %10s %10s %7s %10s %10s %9s %9s\n", "cfg", "xgrad_ms", "torch_ms", "ratio", "target",
           "xgrad_cpu", "torch_cpu", "ratio", "xgrad_GF/s", "torch_GF/s", "xgrad_MiB", "torch_MiB"
    n = split("S M L", cfgs, " ")
    for (i = 1; i <= n; i++) {
      c = cfgs[i]; xm = median(ms["x", c]); tm = median(ms["t", c]); xc = median(cpu["x", c]); tc = median(cpu["t", c])
      printf "%-3s %10.3f %10.3f %7.3f %8s %10.3f %10.3f %7.3f %10.2f %10.2f %9.1f %9.1f\n", c, xm, tm, xm / tm,
             "<= " target[c], xc, tc, xc / tc, median(gf["x", c]), median(gf["t", c]), rss["x", c], rss["t", c]
    }
    fl = median(fgf); lx = median(gf["x", "L"])
    printf "sgemm floor (every GEMM of one L step alone, one thread): %.1f ms = %.2f GFLOP/s (by CPU time: %.1f ms = %.2f GFLOP/s); best single shape %.2f GFLOP/s\n",
           median(fms), fl, median(fcpu), median(fcgf), median(fpk)
    printf "L in xgrad: %.2f GFLOP/s = %.0f%% of the floor (target >= 70%%); %.0f%% of the best single shape\n", lx,
           100 * lx / fl, 100 * lx / median(fpk)
  }' "$out/xgrad.csv" "$out/torch.csv" "$out/sgemm.csv"
