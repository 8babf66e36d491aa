#!/usr/bin/env python3
"""Reads an xgrad checkpoint with numpy alone, to show the file is plain safetensors.

    /usr/bin/python3 tests/safetensors_numpy_check.py RUN_DIR/checkpoint.safetensors

ctest runs it as safetensors_numpy (tests/safetensors_numpy_test.sh); it can also be run by hand. Needs numpy: on Debian `apt-get install python3-numpy`, then use the system
interpreter /usr/bin/python3 (a pyenv or venv python may not see that package).

Parses the 8-byte little-endian header length and the JSON header, checks that the tensors tile the data exactly,
np.frombuffer's each tensor, and prints its name, shape, dtype and checksums (the float64 sum of its elements and a
CRC-32 of its bytes), then the metadata. Exits 1 with a message if the file is not valid safetensors.
"""
import json
import struct
import sys
import zlib

import numpy as np

DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
          "U8": "u1", "BOOL": "?"}


def fail(message):
    print(f"safetensors_numpy_check: {message}", file=sys.stderr)
    sys.exit(1)


def main(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        fail(f"{path}: shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        fail(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(blob[8:8 + n])
    metadata = header.pop("__metadata__", {})
    data = memoryview(blob)[8 + n:]

    entries = sorted(header.items(), key=lambda item: tuple(item[1]["data_offsets"]))
    position = 0
    print(f"{path}: {len(entries)} tensors, {len(data)} bytes of data, header {n} bytes")
    for name, info in entries:
        begin, end = info["data_offsets"]
        if begin != position:
            fail(f"tensor {name} starts at byte {begin}, expected {position} (overlap or hole)")
        dtype = np.dtype(DTYPES[info["dtype"]])
        array = np.frombuffer(data[begin:end], dtype=dtype).reshape(info["shape"])
        checksum = float(array.astype(np.float64).sum())
        crc = zlib.crc32(data[begin:end]) & 0xFFFFFFFF
        print(f"  {name:55s} {info['dtype']:4s} {str(list(array.shape)):14s} sum={checksum:.9g} crc32={crc:08x}")
        position = end
    if position != len(data):
        fail(f"bytes [{position}, {len(data)}) of the data belong to no tensor")
    print("metadata:")
    for key in sorted(metadata):
        value = metadata[key]
        print(f"  {key} = {value if len(value) <= 80 else value[:77] + '...'}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        fail("usage: safetensors_numpy_check.py FILE.safetensors")
    main(sys.argv[1])
