#!/bin/sh
# ctest safetensors_numpy: a checkpoint xgrad writes is read by numpy alone (tests/safetensors_numpy_check.py), with
# the tensor names, shapes and step README documents. Skipped (exit 77) when /usr/bin/python3 has no numpy
# (`apt-get install python3-numpy`; ./run.sh test installs it).
#   tests/safetensors_numpy_test.sh XGRAD_BIN SOURCE_DIR
set -eu
xgrad=$1
src=$2
/usr/bin/python3 -c "import numpy" 2>/dev/null || { echo "skipped: /usr/bin/python3 cannot import numpy"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$xgrad" train --d-model 16 --d-k 8 --steps 3 --out "$dir/run" >/dev/null 2>&1
/usr/bin/python3 "$src/tests/safetensors_numpy_check.py" "$dir/run/checkpoint.safetensors" >"$dir/out.txt"
cat "$dir/out.txt"
fail() { echo "safetensors_numpy: $1" >&2; exit 1; }
grep -Eq '^  model\.blocks\.0\.attn\.w_q\.weight +F32 +\[16, 8\]' "$dir/out.txt" || fail "W_q [16, 8] not read"
grep -Eq '^  model\.tok_emb\.weight +F32 +\[72, 16\]' "$dir/out.txt" || fail "token embedding [72, 16] not read"
grep -Eq '^  optim\.v\.head\.weight +F32 +\[16, 72\]' "$dir/out.txt" || fail "AdamW v of the readout not read"
grep -Eq '^  step = 3$' "$dir/out.txt" || fail "metadata step = 3 not read"
echo "safetensors_numpy: ok"
