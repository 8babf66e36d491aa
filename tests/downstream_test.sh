#!/usr/bin/env bash
# ctest downstream: install the already-built xgrad into a fresh prefix, build examples/downstream against it with
# find_package(xgrad), run a small sweep with the downstream executable, and compare it with that executable and
# with the installed plain xgrad.
#   downstream_test.sh CMAKE XGRAD_BUILD_DIR DOWNSTREAM_SOURCE_DIR WORK_DIR [CXX_COMPILER_LAUNCHER [CXX_FLAGS
#                      [CXX_COMPILER]]]
# CXX_FLAGS: flags the downstream project must compile and link with to use this build's libraries (a sanitizer
# build's -fsanitize=..., whose runtime must come first in the executable).
set -euo pipefail
cmake_bin=$1 build_dir=$2 source_dir=$3 work=$4 launcher=${5:-} cxx_flags=${6:-} compiler=${7:-}
# CXX_COMPILER: the compiler that built xgrad. A project uses the package with the compiler that built it: GCC and
# Clang mangle the static of an inline function with an ABI tag differently (registration_errors()), so a program of
# one linked with libraries of the other holds two copies and a clash of names goes unreported.

# The work directory is fixed (under ctest's build tree) so a compiler cache sees the same paths on every run; it is
# removed at the end unless XGRAD_KEEP_WORK is set.
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix

"$cmake_bin" --install "$build_dir" --prefix "$prefix" >"$work/install.log"
"$cmake_bin" -S "$source_dir" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher"} ${cxx_flags:+-DCMAKE_CXX_FLAGS="$cxx_flags"} \
  ${compiler:+-DCMAKE_CXX_COMPILER="$compiler"} \
  ${cxx_flags:+-DCMAKE_EXE_LINKER_FLAGS="$cxx_flags"} >"$work/configure.log"
"$cmake_bin" --build "$work/build" -j2 >"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }

# An extension registering a task under a built-in name (sort): the executable refuses every start, --help included,
# with one line naming the entry and both files, exit 2 (not an abort from a static initialiser).
clash_source=$(cd "$(dirname "$0")" && pwd)/downstream_clash
"$cmake_bin" -S "$clash_source" -B "$work/clash" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher"} ${cxx_flags:+-DCMAKE_CXX_FLAGS="$cxx_flags"} \
  ${compiler:+-DCMAKE_CXX_COMPILER="$compiler"} \
  ${cxx_flags:+-DCMAKE_EXE_LINKER_FLAGS="$cxx_flags"} >"$work/clash_configure.log"
"$cmake_bin" --build "$work/clash" >"$work/clash_build.log" 2>&1 || { tail -40 "$work/clash_build.log"; exit 1; }
clash_fail=0
for args in "--help" "train --help" "--version" "train --steps 1 --out $work/clash_run"; do
  code=0
  # shellcheck disable=SC2086  # each entry is a list of words
  "$work/clash/clash_xgrad" $args >"$work/clash_out.txt" 2>"$work/clash_err.txt" || code=$?
  first=$(head -1 "$work/clash_err.txt")
  case "$first" in
    "xgrad: error: task 'sort' registered twice: by "*"/data/"*" and by "*"downstream_clash/sort_clash.cpp") ;;
    *) echo "FAIL: clash_xgrad $args: stderr does not name the entry and both files:"; cat "$work/clash_err.txt"
       clash_fail=1 ;;
  esac
  # Every other mistake on a line of its own naming its entry (and the key, for a setting).
  for entry in "'my@opt'" "'no_build'" "--optimizer core_key .*'lr'" "--optimizer other_form .*'weight_decay_params'"; do
    grep -q "^xgrad: error: .*$entry" "$work/clash_err.txt" ||
      { echo "FAIL: clash_xgrad $args does not report $entry:"; cat "$work/clash_err.txt"; clash_fail=1; }
  done
  [ "$code" -eq 2 ] || { echo "FAIL: clash_xgrad $args exited $code, expected 2"; clash_fail=1; }
  [ ! -s "$work/clash_out.txt" ] || { echo "FAIL: clash_xgrad $args printed to stdout:"; cat "$work/clash_out.txt"; clash_fail=1; }
  ! grep -q "terminate called" "$work/clash_err.txt" || clash_fail=1
done
[ ! -e "$work/clash_run" ] || { echo "FAIL: clash_xgrad train wrote $work/clash_run"; clash_fail=1; }
[ "$clash_fail" -eq 0 ] || exit 1

# The project's own tests of its extensions (through xgrad's registries).
(cd "$work/build" && ctest --output-on-failure >"$work/ctest.log" 2>&1) || { cat "$work/ctest.log"; exit 1; }

my_xgrad=$work/build/my_xgrad
xgrad=$prefix/bin/xgrad
sweep=$work/sweep
# A tiny model for a few steps: this proves the wiring, not the science. Every run trains the downstream task with
# its own setting; the downstream scalings and attention layer are axes beside built-in ones.
"$my_xgrad" sweep --out "$sweep" --task lookback --lookback-distance 2 --seq-len 8 --scale dk_power,alibi,sqrt_dk \
  --grid attention=multi_head,multi_query --n-heads 2 --d-k 4 --d-model 8 --seeds 0 --arms adamw@0.01 \
  --batch-size 4 --steps 6 --print-every 100 --jobs 2 >"$work/sweep.log" 2>&1 \
  || { cat "$work/sweep.log"; exit 1; }

fail=0
expect() {  # expect FILE TEXT: FILE contains TEXT
  grep -qF -- "$2" "$1" || { echo "FAIL: $1 does not contain '$2'"; cat "$1"; fail=1; }
}
refuse() {  # refuse FILE TEXT: FILE does not contain TEXT
  ! grep -qF -- "$2" "$1" || { echo "FAIL: $1 contains '$2'"; cat "$1"; fail=1; }
}

runs=0
for run in "$sweep"/runs/*/; do
  runs=$((runs + 1))
  expect "$run/config.json" '"task": "lookback"'
  expect "$run/config.json" '"lookback_distance": 2'
  # Every attention layer's records reach the saturation statistics: the second head's mean attention entropy at
  # step 0 is a number, not nan.
  entropy=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "attn/l0h1/entropy_mean") c = i }
                     NR == 2 { print (c ? $c : "absent") }' "$run/metrics.csv")
  case "$entropy" in [0-9]*) ;; *) echo "FAIL: $run/metrics.csv: attn/l0h1/entropy_mean is '$entropy'"; fail=1 ;; esac
done
[ "$runs" -eq 6 ] || { echo "FAIL: $runs runs in $sweep/runs, expected 6"; fail=1; }

# The downstream optimizer trains with the weight-decay settings it declares; --parametrization mup, whose learning
# rates it does not declare, is refused naming both (exit 2, nothing written).
"$my_xgrad" train --optimizer signum --weight-decay 0.1 --weight-decay-params matrices --task lookback \
  --lookback-distance 2 --seq-len 8 --d-model 8 --n-heads 2 --batch-size 4 --steps 3 --print-every 100 \
  --out "$work/signum" >"$work/signum.log" 2>&1 || { cat "$work/signum.log"; exit 1; }
expect "$work/signum/config.json" '"optimizer": "signum"'
expect "$work/signum/config.json" '"weight_decay_params": "matrices"'
code=0
"$my_xgrad" train --optimizer signum --parametrization mup --scale dk --steps 1 --out "$work/signum_mup" \
  >"$work/signum_mup.txt" 2>&1 || code=$?
[ "$code" -eq 2 ] || { echo "FAIL: signum under --parametrization mup exited $code, expected 2"; fail=1; }
expect "$work/signum_mup.txt" "--parametrization mup: --optimizer signum"
[ ! -e "$work/signum_mup" ] || { echo "FAIL: signum under --parametrization mup wrote $work/signum_mup"; fail=1; }

# The downstream build knows its extensions: table, report and plots show them beside the built-ins.
"$my_xgrad" compare "$sweep" >"$work/my_compare.txt" 2>&1 || { cat "$work/my_compare.txt"; exit 1; }
for name in dk_power alibi sqrt_dk multi_query multi_head; do
  expect "$work/my_compare.txt" "$name"
  expect "$sweep/report.md" "${name//_/\\_}"  # as report.md's text writes it: '_' escaped
done
expect "$sweep/report.md" "task lookback"
refuse "$work/my_compare.txt" "not registered"

# Plain xgrad does not: it still compares, naming them, and warns that it draws dk_power in a palette colour.
"$xgrad" compare "$sweep" >"$work/compare.txt" 2>&1 || { cat "$work/compare.txt"; exit 1; }
for name in dk_power sqrt_dk multi_query multi_head; do
  expect "$work/compare.txt" "$name"
  expect "$sweep/report.md" "${name//_/\\_}"  # as report.md's text writes it: '_' escaped
done
expect "$work/compare.txt" "scaling 'dk_power' is not registered in this build"
[ "$fail" -eq 0 ] || exit 1
[ -n "${XGRAD_KEEP_WORK:-}" ] || rm -rf "$work"
echo "downstream: installed, built against the package, tested, swept and compared"
