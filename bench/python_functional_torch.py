#!/usr/bin/env python3
"""iron.functional against PyPI torch's torch.nn.functional, op by op (outside CI: torch is
large). Each op is compiled as a one-op graph, called on the same random float32 inputs as
torch's function, and the largest |IRON - torch| is printed beside the op's own scale.

  .venv/bin/python -m pip install torch   # then:
  PYTHONPATH=build/python .venv/bin/python bench/python_functional_torch.py
"""

import sys

import numpy as np

import iron
from iron import functional as F

try:
    import torch
    import torch.nn.functional as T
except ImportError:
    sys.exit("this script compares against torch: .venv/bin/python -m pip install torch")

rng = np.random.default_rng(3)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


class Op(iron.Graph):
    def __init__(self, fn, count, held=()):
        super().__init__("op")
        self.fn, self.count = fn, count
        self.held = [iron.param(a) for a in held]  # operands held as params, as models hold them

    def signature(self):
        import inspect

        p = [inspect.Parameter(f"a{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD) for i in range(self.count)]
        return inspect.Signature(p)

    def body(self, *args):
        return self.fn(*args, *self.held)


def iron_run(fn, *arrays, held=0):
    """fn on the arrays, the last `held` of them held as params rather than given as inputs."""
    given, kept = arrays[: len(arrays) - held], arrays[len(arrays) - held :]
    g = Op(fn, len(given), kept)
    return g.compile(**{f"a{i}": (a.shape, a.dtype) for i, a in enumerate(given)})(*given)


def t(a):
    return torch.from_numpy(a)


def rope_torch(x, angles, halves):
    x = t(x).double()
    a = t(angles).double()
    if halves:
        x0, x1 = x[:, : x.shape[1] // 2], x[:, x.shape[1] // 2 :]
    else:
        x0, x1 = x[:, 0::2], x[:, 1::2]
    r0, r1 = x0 * a.cos() - x1 * a.sin(), x0 * a.sin() + x1 * a.cos()
    return torch.cat([r0, r1], 1) if halves else torch.stack([r0, r1], -1).flatten(1)


CASES = [
    ("linear (1 row)", lambda x, w, b: F.linear(x, w, b), lambda x, w, b: T.linear(t(x), t(w), t(b)), [(1, 256), (128, 256), (128,)]),
    ("linear (16 rows)", lambda x, w, b: F.linear(x, w, b), lambda x, w, b: T.linear(t(x), t(w), t(b)), [(16, 256), (128, 256), (128,)]),
    ("rms_norm", lambda x, w: F.rms_norm(x, 64, w, 1e-5), lambda x, w: T.rms_norm(t(x), (64,), t(w), 1e-5), [(8, 64), (64,)]),
    ("rms_norm (held w)", lambda x, w: F.rms_norm(x, 64, w, 1e-5), lambda x, w: T.rms_norm(t(x), (64,), t(w), 1e-5), [(8, 64), (64,)], 1),
    ("layer_norm", lambda x, w, b: F.layer_norm(x, 64, w, b), lambda x, w, b: T.layer_norm(t(x), (64,), t(w), t(b)), [(8, 64), (64,), (64,)]),
    ("layer_norm (held)", lambda x, w, b: F.layer_norm(x, 64, w, b), lambda x, w, b: T.layer_norm(t(x), (64,), t(w), t(b)), [(8, 64), (64,), (64,)], 2),
    ("silu", F.silu, lambda x: T.silu(t(x)), [(8, 64)]),
    ("gelu", F.gelu, lambda x: T.gelu(t(x)), [(8, 64)]),
    ("gelu tanh", lambda x: F.gelu(x, "tanh"), lambda x: T.gelu(t(x), approximate="tanh"), [(8, 64)]),
    ("softmax", F.softmax, lambda x: T.softmax(t(x), -1), [(8, 64)]),
    ("silu_mul", F.silu_mul, lambda g, u: T.silu(t(g)) * t(u), [(8, 64), (8, 64)]),
    ("rope adjacent", lambda x, a: F.rope(x, a), lambda x, a: rope_torch(x, a, False), [(8, 16), (8, 8)]),
    ("rope halves", lambda x, a: F.rope(x, a, "halves"), lambda x, a: rope_torch(x, a, True), [(8, 16), (8, 8)]),
    ("attention", lambda q, k, v: F.attention(q, k, v, 0),
     lambda q, k, v: T.scaled_dot_product_attention(t(q).transpose(0, 1), t(k).transpose(0, 1), t(v).transpose(0, 1),
                                                   is_causal=True).transpose(0, 1), [(8, 4, 16), (8, 4, 16), (8, 4, 16)]),
]


def main():
    # Operands are graph inputs, except where a case holds its last ones as params ("held"), as
    # models hold a norm's weight.
    print(f"{'op':18} {'max |iron - torch|':>20} {'max |torch|':>12}")
    worst = 0.0
    for name, ours, theirs, shapes, *held in CASES:
        arrays = [rand(*s) for s in shapes]
        got = iron_run(ours, *arrays, held=held[0] if held else 0)
        want = theirs(*arrays).double().numpy()
        d = float(np.abs(got - want).max())
        worst = max(worst, d / max(1.0, float(np.abs(want).max())))
        print(f"{name:18} {d:20.3g} {float(np.abs(want).max()):12.3g}")
    print(f"torch {torch.__version__}; the largest difference relative to the op's scale: {worst:.3g}")


if __name__ == "__main__":
    main()
