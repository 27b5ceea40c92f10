#!/usr/bin/env python3
"""Writes tests/golden/quant_blocks.json: what PyPI gguf's dequantiser (gguf.quants.dequantize)
makes of every block kind IRON reads, for tests/io/quant_golden_test.cpp to compare with to_f32.

    python3 tests/golden/make_quant_golden.py [--gemma models/gemma-3-270m-q4_k_m.gguf]

Two parts:
  "blocks": per kind, a few blocks of seeded random bytes (their f16 scales set to finite
            values) and gguf's values for them, as little-endian hex;
  "gemma":  per tensor of the Gemma 3 270M Q4_K_M file (one of each kind it holds), a checksum
            of gguf's values for the whole tensor and its first values, so the test can check a
            real tensor without this file holding any of the model.
The checksum of values v_i (float32 bit patterns as uint64) is sum_i v_i (2 i + 1) mod 2^64.
"""
import argparse
import json
import os
from importlib.metadata import version

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# kind: (blocks to write, byte offsets of each block's f16 scales)
KINDS = {
    "Q8_0": (4, [0]),
    "Q4_0": (4, [0]),
    "Q4_1": (4, [0, 2]),
    "Q5_0": (4, [0]),
    "Q5_1": (4, [0, 2]),
    "Q4_K": (2, [0, 2]),
    "Q5_K": (2, [0, 2]),
    "Q6_K": (2, [208]),
}
GEMMA_TENSORS = ["blk.0.attn_k.weight", "blk.0.attn_output.weight", "blk.0.ffn_down.weight",
                 "blk.0.attn_v.weight"]


def checksum(values):
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64).ravel()
    weights = np.arange(bits.size, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    with np.errstate(over="ignore"):
        return int(np.sum(bits * weights, dtype=np.uint64))


def random_blocks(kind, count, scale_offsets, rng):
    qtype = Q[kind]
    block_elements, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(count, block_bytes), dtype=np.uint8)
    for at in scale_offsets:
        scales = rng.uniform(-0.05, 0.05, size=count).astype(np.float16)
        raw[:, at:at + 2] = scales.view(np.uint8).reshape(count, 2)
    values = dequantize(raw.reshape(-1), qtype).astype(np.float32).reshape(-1)
    assert values.size == count * block_elements
    return {"bytes": raw.tobytes().hex(), "values": values.tobytes().hex()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gemma", default=os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--out", default=os.path.join(HERE, "quant_blocks.json"))
    args = ap.parse_args()

    rng = np.random.default_rng(12)
    out = {"source": f"PyPI gguf {version('gguf')}",
           "blocks": {k: random_blocks(k, n, at, rng) for k, (n, at) in KINDS.items()},
           "gemma": {}}
    reader = gguf.GGUFReader(args.gemma)
    for t in reader.tensors:
        if t.name not in GEMMA_TENSORS:
            continue
        values = dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1)
        out["gemma"][t.name] = {"kind": t.tensor_type.name, "elements": int(values.size),
                                "checksum": str(checksum(values)),
                                "first": values[:16].tobytes().hex()}
    assert len(out["gemma"]) == len(GEMMA_TENSORS), "a Gemma tensor is missing"
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
