#!/usr/bin/env bash
# ctest downstream: install the already-built xgrad into a fresh prefix, build examples/downstream against it with
# find_package(xgrad), run a small sweep with the downstream executable, and compare it with that executable and
# with the installed plain xgrad.
#   downstream_test.sh CMAKE XGRAD_BUILD_DIR DOWNSTREAM_SOURCE_DIR WORK_DIR [CXX_COMPILER_LAUNCHER]
set -euo pipefail
cmake_bin=$1 build_dir=$2 source_dir=$3 work=$4 launcher=${5:-}

# The work directory is fixed (under ctest's build tree) so a compiler cache sees the same paths on every run.
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix

"$cmake_bin" --install "$build_dir" --prefix "$prefix" >"$work/install.log"
"$cmake_bin" -S "$source_dir" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher"} >"$work/configure.log"
"$cmake_bin" --build "$work/build" -j2 >"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }

my_xgrad=$work/build/my_xgrad
xgrad=$prefix/bin/xgrad
sweep=$work/sweep
# A tiny model for a few steps: this proves the wiring, not the science.
"$my_xgrad" sweep --out "$sweep" --scale none,sqrt_dk --d-k 4 --seeds 0 --arms adamw@0.01 --d-model 8 \
  --batch-size 4 --steps 6 --print-every 100 --jobs 2 >"$work/sweep.log" 2>&1 \
  || { cat "$work/sweep.log"; exit 1; }

"$my_xgrad" compare "$sweep" --plots false >"$work/my_compare.txt" 2>&1 || { cat "$work/my_compare.txt"; exit 1; }
"$xgrad" compare "$sweep" --plots false >"$work/compare.txt" 2>&1 || { cat "$work/compare.txt"; exit 1; }

fail=0
expect() {  # expect FILE TEXT: FILE contains TEXT
  grep -qF -- "$2" "$1" || { echo "FAIL: $1 does not contain '$2'"; cat "$1"; fail=1; }
}
for name in none sqrt_dk; do
  expect "$work/my_compare.txt" "$name"
  expect "$work/compare.txt" "$name"
  expect "$sweep/report.md" "$name"
done
[ "$fail" -eq 0 ] || exit 1
rm -rf "$work"
echo "downstream: installed, built against the package, swept and compared"
