"""Reads a TensorBoard event file xgrad wrote with readers that are not xgrad's: the record framing and both masked
CRC-32Cs checked with crcmod, each payload decoded by the protoc-generated code of TensorBoard's event.proto and
summary.proto (the subset in tests/tensorboard/event.proto, compiled into PROTO_DIR), and compared with the run's
metrics.csv: every column a tag, every recorded cell the float32-rounded value at its row's step, no (tag, step)
twice, an empty cell (not measured that step) absent.

    check_events.py PROTO_DIR EVENT_FILE METRICS_CSV
"""

import csv
import math
import struct
import sys

import crcmod.predefined

sys.path.insert(0, sys.argv[1])
import event_pb2  # noqa: E402  (generated into PROTO_DIR by protoc)

crc32c = crcmod.predefined.mkCrcFun("crc-32c")


def fail(message):
    sys.exit("check_events.py: " + message)


def masked(data):
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    """Every record's payload, the framing and CRCs checked as TensorBoard's record reader checks them."""
    with open(path, "rb") as f:
        data = f.read()
    at, n = 0, 0
    while at < len(data):
        if len(data) - at < 12:
            fail(f"{path}: record {n} cut short in its header")
        length_bytes = data[at:at + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if length_crc != masked(length_bytes):
            fail(f"{path}: record {n}: masked CRC-32C of the length is {length_crc:#x}, not {masked(length_bytes):#x}")
        payload = data[at + 12:at + 12 + length]
        if len(payload) != length or len(data) < at + 16 + length:
            fail(f"{path}: record {n} cut short")
        (payload_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        if payload_crc != masked(payload):
            fail(f"{path}: record {n}: masked CRC-32C of the payload is {payload_crc:#x}, not {masked(payload):#x}")
        yield payload
        at += 16 + length
        n += 1


def events(path):
    out = []
    for i, payload in enumerate(records(path)):
        event = event_pb2.Event()
        event.ParseFromString(payload)
        # The encoding is the canonical one (fields in order, none unknown to the schema): re-encoding gives it back.
        if event.SerializeToString() != payload:
            fail(f"{path}: record {i} does not re-encode to its own bytes: {event}")
        out.append(event)
    if not out or out[0].file_version != "brain.Event:2":
        fail(f"{path}: the first event is not file_version brain.Event:2")
    return out


def float32(text):
    value = float(text)
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


def scalars(path):
    """{(tag, step): value} of every summary value, each pair once; and the wall times in file order."""
    values, wall_times = {}, []
    for event in events(path)[1:]:
        if event.WhichOneof("what") != "summary":
            fail(f"{path}: an event that is not a summary: {event}")
        wall_times.append(event.wall_time)
        for v in event.summary.value:
            if v.WhichOneof("value") != "simple_value":
                fail(f"{path}: value {v.tag} at step {event.step} is not a simple_value")
            if (v.tag, event.step) in values:
                fail(f"{path}: {v.tag} twice at step {event.step}")
            values[(v.tag, event.step)] = v.simple_value
    if any(t < 1e9 for t in wall_times) or wall_times != sorted(wall_times):
        fail(f"{path}: wall times are not seconds since the epoch in order: {wall_times[:5]}...")
    return values


def main():
    event_file, metrics_csv = sys.argv[2], sys.argv[3]
    values = scalars(event_file)
    with open(metrics_csv, newline="") as f:
        rows = list(csv.reader(f))
    columns, rows = rows[0], rows[1:]
    expected = {}
    for row in rows:
        step = int(row[columns.index("step")])
        for column, cell in zip(columns, row):
            if cell != "":
                expected[(column, step)] = float32(cell)
    for key, value in expected.items():
        if key not in values:
            fail(f"{event_file}: no {key[0]} at step {key[1]}")
        if not same(values[key], value):
            fail(f"{event_file}: {key[0]} at step {key[1]} is {values[key]!r}, metrics.csv {value!r}")
    extra = sorted(set(values) - set(expected))
    if extra:
        fail(f"{event_file}: values metrics.csv does not hold (empty cells, or rows it lacks): {extra[:5]}")
    missing = sorted(set(columns) - {tag for tag, _ in values})
    if missing:
        fail(f"{event_file}: columns without a tag: {missing}")
    steps = sorted({step for _, step in values})
    print(f"{event_file}: {len(values)} values of {len(columns)} tags at {len(steps)} steps "
          f"({steps[0]}..{steps[-1]}), each once; CRCs and metrics.csv agree")


main()
