#!/usr/bin/env bash
# xgrad's entry point. Installs what it needs (Debian 12 or 13 packages), configures, builds, then:
#   ./run.sh experiment [flags]   run an experiment preset (default dk: scaled vs unscaled at d_k 16 to 1024) and write the report
#   ./run.sh test                 run the test suite (ctest)
#   ./run.sh sanitize             build with ASan + UBSan in build-asan/ and run the sanitizer suite there
#   ./run.sh clang                build every target with Clang in build-clang/ (warnings are errors) and run the suite
#   ./run.sh build                only install and build
#   ./run.sh corpus               install and write the text corpus of --preset text and logits and the nanoGPT bench; print its path
# Flags after `experiment` go to `xgrad experiment` (see ./build/bin/xgrad experiment --help).
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(g++ make cmake pkg-config ccache
  libxtensor-dev libxtensor-blas-dev xtl-dev libxsimd-dev libopenblas-dev
  doctest-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev libxxhash-dev gnuplot-nox
  openmpi-bin libopenmpi-dev)
# Only the test suite needs these: numpy reads a checkpoint (ctest safetensors_numpy); chromium opens report.html
# (ctest report_page_browser, driven by puppeteer-core from npm: node_packages below); a single-node Slurm runs a
# sweep as a job array (ctest slurm_sweep: munge, slurmctld, slurmd and the client commands); protoc, protobuf and
# crcmod read TensorBoard event files with TensorBoard's schema (ctest tensorboard_events).
TEST_PACKAGES=(python3-numpy chromium munge slurmctld slurmd slurm-client protobuf-compiler python3-protobuf python3-crcmod)
# `./run.sh clang` runs the suite but the browser, Slurm and MPI tests (they drive the xgrad executable as the other
# tests do, so a second compiler adds nothing there).
CLANG_PACKAGES=(clang python3-numpy protobuf-compiler python3-protobuf python3-crcmod)

# XGRAD_WERROR=ON (CI sets it) makes every warning of the release build an error; `./run.sh clang` always does.
WERROR="${XGRAD_WERROR:-OFF}"

# Each stage says how long it took, so that growth is seen when it happens.
stage_start=$SECONDS
stage_done() {
  echo "run.sh: $1 took $((SECONDS - stage_start)) s"
  stage_start=$SECONDS
}

# Compiler cache: a build in another clone of the same tree (CI's clean clone) reuses this machine's objects. Paths
# under the tree are hashed relative to it (base_dir), and the build directory's own path is not hashed.
# launcher_flags prints the CMake flag, once install_packages has installed ccache.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
launcher_flags() {
  command -v ccache >/dev/null 2>&1 && echo "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
  return 0
}

install_packages() {
  local missing=()
  for p in "${PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "run.sh: missing packages ${missing[*]} and not root (no sudo)" >&2; exit 1; }
    sudo="sudo"
  fi
  echo "run.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# node and npm for the browser test, unless some node is installed already (Debian's nodejs 18 and npm 9 do; a
# node from elsewhere may bring its own npm and conflict with Debian's npm package).
node_tools() {
  command -v node >/dev/null || echo nodejs
  command -v npm >/dev/null || echo npm
}

# The browser test's node packages (package.json, pinned in package-lock.json): puppeteer-core, which drives Debian's
# chromium and downloads no browser, and uplot, the source of report/web/vendor. Installed again only when the
# lock file changed since.
node_packages() {
  if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    echo "run.sh: npm ci (puppeteer-core and uplot for the browser test)"
    PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
  fi
}

# compile DIR WHAT [TARGET...]: builds the configured tree DIR (everything, or the given targets).
compile() {
  local dir=$1 what=$2
  shift 2
  echo "run.sh: building $what${1:+ ($*)} (log: $dir/build.log)"
  if ! cmake --build "$dir" -j"$(nproc)" ${1:+--target "$@"} >"$dir/build.log" 2>&1; then
    grep -E 'error|Error' -A5 "$dir/build.log" | head -60 >&2
    echo "run.sh: build failed; the full log is $dir/build.log" >&2
    exit 1
  fi
  stage_done "building $what"
}

# build [TARGET...]: everything, or only the given targets (the experiment needs the xgrad executable, not the tests).
build() {
  install_packages
  stage_done "installing packages"
  # Configured once; again when ccache has come since (a tree configured without it would never use it), or when
  # XGRAD_WERROR changed.
  if [ ! -f build/CMakeCache.txt ] ||
    { [ -n "$(launcher_flags)" ] && ! grep -q '^CMAKE_CXX_COMPILER_LAUNCHER' build/CMakeCache.txt; } ||
    ! grep -q "^XGRAD_WERROR:BOOL=$WERROR\$" build/CMakeCache.txt; then
    # shellcheck disable=SC2046
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DXGRAD_WERROR="$WERROR" $(launcher_flags) >/dev/null
  fi
  compile build "the release build" "$@"
}

# The text of `experiment --preset text` and `--preset logits` and of bench/nanogpt_cpu.sh: the King James Bible (1611;
# its copyright has expired, as Debian's bible-kjv-text says), 4.2 MB of ASCII from Debian's bible-kjv, written once
# to CORPUS with the verse numbers taken off (COLUMNS fixes the program's line width, so every machine writes the same
# bytes). Installed only for those.
CORPUS="$PWD/build/corpus/kjv.txt"
corpus() {
  install_packages bible-kjv
  if [ ! -s "$CORPUS" ]; then
    mkdir -p "$(dirname "$CORPUS")"
    COLUMNS=80 bible 'Gen1:1-Rev22:21' </dev/null | sed -E 's/^ +[0-9]+ //' >"$CORPUS.tmp"
    mv "$CORPUS.tmp" "$CORPUS"
    echo "run.sh: wrote the corpus $CORPUS ($(wc -c <"$CORPUS") bytes)" >&2
  fi
}

# needs_corpus FLAG...: true for `--preset text` or `--preset logits` without a --text of the user's own.
needs_corpus() {
  local text_preset=false arg prev=""
  for arg in "$@"; do
    case "$arg" in
      --text | --text=*) return 1 ;;
      --preset=text | --preset=logits) text_preset=true ;;
      text | logits) [ "$prev" = "--preset" ] && text_preset=true ;;
    esac
    prev=$arg
  done
  $text_preset
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
  experiment)
    build xgrad
    if needs_corpus "$@"; then
      corpus
      set -- "$@" --text "$CORPUS"
    fi
    exec ./build/bin/xgrad experiment "$@"
    ;;
  test)
    # shellcheck disable=SC2046
    install_packages "${TEST_PACKAGES[@]}" $(node_tools)
    node_packages
    build
    cd build
    rc=0
    ctest --output-on-failure -j"$(nproc)" "$@" || rc=$?
    stage_done "the test suite (ctest)"
    exit $rc
    ;;
  build)
    build
    ;;
  corpus)
    corpus
    echo "$CORPUS"
    ;;
  sanitize)
    # AddressSanitizer + UndefinedBehaviorSanitizer over the sanitizer suite (tests/CMakeLists.txt, label sanitize:
    # the engine, loaders, checkpoints, run files and the sweep's process code). -O1 keeps the build and the tests
    # fast enough for CI while the sanitizers still see every access; any UBSan report fails the test it occurs in.
    install_packages
    stage_done "installing packages"
    dir="${XGRAD_ASAN_DIR:-build-asan}"
    # shellcheck disable=SC2046
    cmake -S . -B "$dir" -DXGRAD_SANITIZE=ON -DXGRAD_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" $(launcher_flags) >/dev/null
    compile "$dir" "the ASan + UBSan build" xgrad_sanitizer_suite
    cd "$dir"
    export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}"
    export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
    rc=0
    ctest --output-on-failure -j"$(nproc)" -L sanitize "$@" || rc=$?
    stage_done "the sanitizer suite (ctest -L sanitize)"
    exit $rc
    ;;
  clang)
    # Every target (product, tests, bench, examples) compiled by Clang with warnings as errors, through ccache like
    # the other builds, then the suite but the browser, Slurm and MPI tests (CLANG_PACKAGES). GCC alone let
    # Clang-only errors (a structured binding captured by a lambda) in unseen. File by file (no unity units), so a
    # file that compiles only after a neighbour's includes fails here.
    install_packages "${CLANG_PACKAGES[@]}"
    stage_done "installing packages"
    # shellcheck disable=SC2046
    cmake -S . -B build-clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release -DXGRAD_WERROR=ON \
      -DXGRAD_UNITY_BUILD=OFF $(launcher_flags) >/dev/null
    compile build-clang "the Clang build"
    cd build-clang
    rc=0
    ctest --output-on-failure -j"$(nproc)" -E 'browser|slurm|mpi' "$@" || rc=$?
    stage_done "the test suite under Clang (ctest -E 'browser|slurm|mpi')"
    exit $rc
    ;;
  *)
    echo "usage: ./run.sh experiment [flags] | ./run.sh test | ./run.sh sanitize | ./run.sh clang | ./run.sh build |" \
      "./run.sh corpus" >&2
    exit 2
    ;;
esac
