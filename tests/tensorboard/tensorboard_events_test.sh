#!/usr/bin/env bash
# ctest tensorboard_events: the event files of `xgrad train --tensorboard`, of a sweep passing it on, of a resumed
# run and of `xgrad export tensorboard` read by readers that are not xgrad's (tests/tensorboard/check_events.py):
# TensorBoard's event.proto and summary.proto (the subset in tests/tensorboard/event.proto) compiled by protoc and
# decoded by python3-protobuf, the masked CRC-32Cs checked by crcmod. Fails, saying what to install, without them
# (./run.sh test installs them).
#   tensorboard_events_test.sh XGRAD_EXECUTABLE SOURCE_DIR WORK_DIR
set -euo pipefail
xgrad=$1
src=$2
work=$3
python=/usr/bin/python3
protoc=${PROTOC:-protoc}
fail() {
  echo "tensorboard_events: $1" >&2
  exit 1
}
missing=()
command -v "$protoc" >/dev/null || missing+=(protobuf-compiler)
"$python" -c "import google.protobuf" 2>/dev/null || missing+=(python3-protobuf)
"$python" -c "import crcmod.predefined" 2>/dev/null || missing+=(python3-crcmod)
[ ${#missing[@]} -eq 0 ] || fail "needs ${missing[*]}: apt-get install ${missing[*]} (./run.sh test installs them)"
# Without them it must fail, naming what to install, never pass silently: checked by running itself without protoc.
if [ -z "${PROTOC:-}" ]; then
  if without=$(PROTOC=/nonexistent/protoc "$0" "$@" 2>&1); then fail "passed without protoc"; fi
  grep -q "needs protobuf-compiler: apt-get install protobuf-compiler" <<<"$without" ||
    fail "without protoc it does not say what to install: $without"
fi

rm -rf "$work"
mkdir -p "$work/proto"
"$protoc" -I "$src/tests/tensorboard" --python_out="$work/proto" event.proto
train() { "$xgrad" train --d-model 16 --print-every 1000 "$@" >/dev/null 2>&1 || fail "xgrad train $* failed"; }
# check RUN_DIR [EVENT_DIR]: EVENT_DIR (default RUN_DIR) holds one event file, agreeing with RUN_DIR/metrics.csv.
check() {
  local files=("${2:-$1}"/events.out.tfevents.*)
  [ ${#files[@]} -eq 1 ] && [ -f "${files[0]}" ] || fail "${2:-$1}: ${#files[@]} event files, not 1: ${files[*]}"
  "$python" "$src/tests/tensorboard/check_events.py" "$work/proto" "${files[0]}" "$1/metrics.csv"
}

# Every column, the measured-only ones (every 2 steps) and eval_loss (every 3) included.
train --steps 7 --log-every 2 --eval-every 3 --tensorboard --out "$work/run"
check "$work/run"
# A run that diverges at step 1 and goes on (--on-nan skip): NaN cells are written as NaN floats.
train --steps 4 --optimizer sgd --lr 1e30 --on-nan skip --tensorboard --out "$work/diverged"
grep -q nan "$work/diverged/metrics.csv" || fail "the diverged run has no NaN cell"
check "$work/diverged"

# The reader refuses a file TensorBoard would: one byte of a payload changed breaks its CRC.
cp -r "$work/run" "$work/corrupt"
"$python" - "$work"/corrupt/events.out.tfevents.* <<'EOF'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(-5, 2)
    byte = f.read(1)
    f.seek(-5, 2)
    f.write(bytes([byte[0] ^ 1]))
EOF
if check "$work/corrupt" 2>"$work/corrupt.txt"; then fail "a corrupted event file passed the check"; fi
grep -q "masked CRC-32C of the payload" "$work/corrupt.txt" || fail "the corrupted file failed for another reason"

# A resumed run whose metrics.csv is cut back: the step-5 checkpoint put back after the run went on to step 9 (as if
# killed there), then continued to 12. Steps 5 to 8 are recomputed; each step is in the event file once.
train --steps 5 --checkpoint-every 5 --tensorboard --out "$work/resumed"
cp "$work/resumed/checkpoint.safetensors" "$work/step5.safetensors"
train --resume "$work/resumed" --steps 9
cp "$work/step5.safetensors" "$work/resumed/checkpoint.safetensors"
train --resume "$work/resumed" --steps 12
[ "$(wc -l <"$work/resumed/metrics.csv")" -eq 13 ] || fail "the resumed metrics.csv does not hold 12 rows"
check "$work/resumed"

# A sweep passes --tensorboard on to its runs (config.json records it), and --overwrite replaces the event file.
"$xgrad" sweep --scale none,sqrt_dk --d-k 8 --seeds 0 --arms adamw@0.003 --d-model 16 --steps 3 --jobs 1 \
  --tensorboard --out "$work/sweep" >/dev/null 2>&1 || fail "xgrad sweep --tensorboard failed"
runs=0
for config in "$work"/sweep/runs/*/config.json; do
  grep -q '"tensorboard": true' "$config" || fail "$config does not record tensorboard"
  check "$(dirname "$config")"
  runs=$((runs + 1))
done
[ "$runs" -eq 2 ] || fail "the sweep wrote $runs runs, not 2"
train --steps 4 --tensorboard --overwrite --out "$work/run"
check "$work/run"

# export: one subdirectory per run, named by the input and the run's path below it; the event file of a run written
# without --tensorboard too.
train --steps 3 --out "$work/plain"
"$xgrad" export tensorboard "$work/plain" "$work/sweep" "$work/resumed" --out "$work/tb" >"$work/export.txt" ||
  fail "xgrad export tensorboard failed"
cat "$work/export.txt"
check "$work/plain" "$work/tb/plain"
check "$work/resumed" "$work/tb/resumed"
for run in "$work"/sweep/runs/*/; do
  check "$run" "$work/tb/sweep/runs/$(basename "$run")"
done
"$xgrad" export tensorboard "$work/plain" --out "$work/tb" >/dev/null || fail "a second export failed"
check "$work/plain" "$work/tb/plain"
# Two inputs of one name would share a subdirectory: refused before anything is written.
mkdir -p "$work/other"
cp -r "$work/plain" "$work/other/plain"
if "$xgrad" export tensorboard "$work/plain" "$work/other/plain" --out "$work/tb2" 2>"$work/clash.txt"; then
  fail "two inputs named plain were exported into one subdirectory"
fi
grep -q "would both be written to $work/tb2/plain" "$work/clash.txt" || fail "the clash is not named: $(cat "$work/clash.txt")"
[ ! -e "$work/tb2" ] || fail "a refused export wrote $work/tb2"
echo "tensorboard_events: ok"
