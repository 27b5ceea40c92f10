#!/usr/bin/env python3
"""Writes a GGUF file with a real model's metadata and tensor table but random weights.

    random_weights.py HEADER OUT

HEADER is the head of a real GGUF file, up to where its tensor data starts (prepare.sh cuts it
from SmolLM2-135M-Instruct.Q4_1.gguf: its 94 MiB do not fit the 64 MiB a device run may carry,
its 1.8 MiB of metadata and tokenizer do). OUT gets that head, then every tensor at its offset
with random values of its kind, each block's scales set to small finite numbers so that no
NaN or infinity runs through the model. Decode and prefill speed do not depend on the values.
Python's standard library only: the device machine has no numpy of ours.
"""
import os
import struct
import sys

# Bytes of one block and elements per block of each kind the Q4_1 and Q4_K_M files prepare.sh cuts
# hold, with where each block's f16 scales sit (offset in the block, value) so they can be set to
# sane numbers (a K block's sub-block scales are 6-bit integers: any bits are finite).
KINDS = {
    0: ("F32", 4, 1, []),
    1: ("F16", 2, 1, []),
    8: ("Q8_0", 34, 32, [(0, 0.01)]),
    2: ("Q4_0", 18, 32, [(0, 0.01)]),
    3: ("Q4_1", 20, 32, [(0, 0.01), (2, -0.08)]),
    6: ("Q5_0", 22, 32, [(0, 0.01)]),
    7: ("Q5_1", 24, 32, [(0, 0.01), (2, -0.16)]),
    12: ("Q4_K", 144, 256, [(0, 0.001), (2, 0.001)]),
    13: ("Q5_K", 176, 256, [(0, 0.001), (2, 0.001)]),
    14: ("Q6_K", 210, 256, [(208, 0.001)]),
}
VALUE_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, n):
        if self.at + n > len(self.data):
            sys.exit("random_weights.py: the header ends inside its own metadata (cut too short?)")
        b = self.data[self.at:self.at + n]
        self.at += n
        return b

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def string(self):
        return self.take(self.u64()).decode("utf-8", "replace")

    def value(self, kind):
        if kind == 8:
            return self.string()
        if kind == 9:
            inner, count = self.u32(), self.u64()
            if inner == 8:
                for _ in range(count):
                    self.string()
            else:
                self.take(VALUE_SIZES[inner] * count)
            return None
        raw = self.take(VALUE_SIZES[kind])
        return struct.unpack({4: "<I", 5: "<i", 10: "<Q", 11: "<q"}.get(kind, "<%dB" % len(raw)), raw)[0]


def parse(header):
    """The tensor table of a GGUF head, (offset, bytes, kind, name) each, and where its data starts."""
    r = Reader(header)
    if r.take(4) != b"GGUF":
        sys.exit("random_weights.py: not a GGUF file")
    _version, tensors, keys = r.u32(), r.u64(), r.u64()
    alignment = 32
    for _ in range(keys):
        key, kind = r.string(), r.u32()
        v = r.value(kind)
        if key == "general.alignment":
            alignment = v
    table = []
    for _ in range(tensors):
        name = r.string()
        dims = [r.u64() for _ in range(r.u32())]
        kind, offset = r.u32(), r.u64()
        if kind not in KINDS:
            sys.exit("random_weights.py: tensor %s is of GGML type %d, which this script does not write" % (name, kind))
        elements = 1
        for d in dims:
            elements *= d
        _, block_bytes, block_elements, _ = KINDS[kind]
        table.append((offset, elements // block_elements * block_bytes, kind, name))
    return table, (r.at + alignment - 1) // alignment * alignment


def data_start(header):
    return parse(header)[1]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    header = open(sys.argv[1], "rb").read()
    table, start = parse(header)
    if start > len(header):
        sys.exit("random_weights.py: the header is cut before its tensor data starts (%d bytes needed)" % start)
    with open(sys.argv[2], "wb") as out:
        out.write(header[:start])
        for offset, size, kind, name in sorted(table):
            out.write(b"\0" * (start + offset - out.tell()))
            _, block_bytes, _, scales = KINDS[kind]
            if kind == 0:  # norms and other f32 vectors: ones
                out.write(struct.pack("<f", 1.0) * (size // 4))
                continue
            buf = bytearray(os.urandom(size))
            if kind == 1:  # f16: small values, sign and mantissa random
                buf[1::2] = bytes(b & 0x83 | 0x20 for b in buf[1::2])
            for at, value in scales:
                half = struct.pack("<e", value)
                buf[at::block_bytes] = half[:1] * (size // block_bytes)
                buf[at + 1::block_bytes] = half[1:] * (size // block_bytes)
            out.write(buf)
    print("wrote %s: %d tensors with random weights (%d MiB), the metadata of %s"
          % (sys.argv[2], len(table), os.path.getsize(sys.argv[2]) >> 20, sys.argv[1]))


if __name__ == "__main__":
    main()
