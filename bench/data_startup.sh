#!/usr/bin/env bash
# Start-up of `xgrad train --task data` on a 4 GiB dataset: inputs.npy and targets.npy, each a [1048576, 512] int32
# array of 2 GiB (token ids 0..255), written into a temporary directory under /tmp and deleted at the end. Each
# xgrad given is timed on a 1-step run of a tiny model (d_model 16, batch 4), so the wall time is the start-up
# (reading and checking the arrays, building the model) plus one step of a few milliseconds; /usr/bin/time gives
# the peak RSS. The files are in the page cache for every run (written just before), so the runs compare the
# reading code, not the disk.
#
#   bench/data_startup.sh [XGRAD ...]     (default: build/bin/xgrad)
#
# Needs about 4 GiB in /tmp and, for a reader that widens to int64, 10+ GiB of memory.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 0 ] && set -- build/bin/xgrad
[ -x /usr/bin/time ] || { echo "data_startup.sh: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }

dir=$(mktemp -d /tmp/xgrad-data-startup.XXXXXX)
trap 'rm -rf "$dir"' EXIT
python3 - "$dir" <<'PY'
import os, random, struct, sys
rows, cols = 1048576, 512
header = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
header += " " * (63 - (10 + len(header)) % 64) + "\n"
random.seed(0)
# 1 MiB of int32 token ids in 0..255, repeated: the content does not change how long reading takes.
block = struct.pack("<262144i", *[random.randrange(256) for _ in range(262144)])
for name in ("inputs.npy", "targets.npy"):
    with open(os.path.join(sys.argv[1], name), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        for _ in range(rows * cols * 4 // len(block)):
            f.write(block)
PY
sync  # written back before timing: the first run would otherwise read while the kernel flushes 4 GiB
ls -l "$dir"/*.npy | awk '{print "data_startup: " $NF ": " $5 " bytes"}'
echo "xgrad,wall_s,peak_rss_mib"
for xgrad in "$@"; do
  rm -rf "$dir/run"
  /usr/bin/time -f "%e %M" -o "$dir/time" "$xgrad" train --task data --data "$dir" --steps 1 --d-model 16 \
    --batch-size 4 --print-every 1 --out "$dir/run" >/dev/null 2>"$dir/stderr" ||
    { echo "data_startup: $xgrad failed:" >&2; cat "$dir/stderr" >&2; exit 1; }
  read -r wall rss_kib <"$dir/time"
  echo "$xgrad,$wall,$((rss_kib / 1024))"
done
