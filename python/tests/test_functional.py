"""Every functional op and handle operation, compiled and through reference(), against an
independent float64 numpy version of its published definition."""

import math

import numpy as np
import pytest

import iron
from iron import functional as F

rng = np.random.default_rng(7)


def rand(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


class One(iron.Graph):
    def __init__(self, fn, **held):
        super().__init__("one")
        self.fn = fn
        for k, v in held.items():
            setattr(self, k, v)

    def body(self, a):
        return self.fn(self, a)


class Two(One):
    def body(self, a, b):
        return self.fn(self, a, b)


class Three(One):
    def body(self, a, b, c):
        return self.fn(self, a, b, c)


def check(graph_cls, fn, want, *arrays, atol=1e-5, rtol=1e-5, **held):
    """Compiles fn on the arrays' shapes, calls it, and compares the output and reference()
    with `want` (float64)."""
    g = graph_cls(fn, **held)
    names = list(g.signature().parameters)
    v = g.compile(**{n: (a.shape, a.dtype) for n, a in zip(names, arrays)})
    got = v(*arrays)
    ref = g.reference(*arrays)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got.astype(np.float64), want, atol=atol, rtol=rtol)
    np.testing.assert_allclose(ref.astype(np.float64), want, atol=atol, rtol=rtol)
    return got


def f64(a):
    return np.asarray(a, dtype=np.float64)


@pytest.mark.parametrize("rows", [1, 5])
def test_linear(rows):
    x, w, b = rand(rows, 24), rand(16, 24), rand(16)
    check(Three, lambda s, x, w, b: F.linear(x, w, b), f64(x) @ f64(w).T + f64(b), x, w, b, atol=1e-4)
    check(Two, lambda s, x, w: F.linear(x, w), f64(x) @ f64(w).T, x, w, atol=1e-4)


def test_linear_held_weight():
    x, w = rand(3, 8), rand(4, 8)
    check(One, lambda s, x: F.linear(x, s.w), f64(x) @ f64(w).T, x, atol=1e-5, w=iron.param(w))


def test_linear_residual():
    x, w, r = rand(4, 16), rand(8, 16), rand(4, 8)
    check(Three, lambda s, x, w, r: F.linear_residual(x, w, r), f64(r) + f64(x) @ f64(w).T, x, w, r, atol=1e-4)


def test_rms_norm():
    x, w = rand(3, 32), rand(32)
    x64 = f64(x)
    want = x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-5) * f64(w)
    # The norm's weight held as a param, as a model holds it.
    check(One, lambda s, x: F.rms_norm(x, 32, s.w, eps=1e-5), want, x, atol=1e-5, w=iron.param(w))


def test_layer_norm():
    x, w, b = rand(3, 32), rand(32), rand(32)
    x64 = f64(x)
    mu, var = x64.mean(-1, keepdims=True), x64.var(-1, keepdims=True)
    want = (x64 - mu) / np.sqrt(var + 1e-5) * f64(w) + f64(b)
    check(One, lambda s, x: F.layer_norm(x, (32,), s.w, s.b), want, x, atol=1e-4, w=iron.param(w), b=iron.param(b))


def test_silu_gelu():
    x = rand(4, 40)
    x64 = f64(x)
    check(One, lambda s, x: F.silu(x), x64 / (1 + np.exp(-x64)), x, atol=1e-5)
    erf = np.vectorize(math.erf)
    check(One, lambda s, x: F.gelu(x), 0.5 * x64 * (1 + erf(x64 / math.sqrt(2))), x, atol=1e-5)
    tanh = 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64**3)))
    check(One, lambda s, x: F.gelu(x, approximate="tanh"), tanh, x, atol=1e-5)


def test_silu_mul():
    g, u = rand(2, 24), rand(2, 24)
    want = f64(g) / (1 + np.exp(-f64(g))) * f64(u)
    check(Two, lambda s, g, u: F.silu_mul(g, u), want, g, u, atol=1e-5)


@pytest.mark.parametrize("mode", ["adjacent", "halves"])
def test_rope(mode):
    x, ang = rand(3, 8), rand(3, 4)
    x64, a = f64(x), f64(ang)
    if mode == "adjacent":
        x0, x1 = x64[:, 0::2], x64[:, 1::2]
    else:
        x0, x1 = x64[:, :4], x64[:, 4:]
    r0, r1 = x0 * np.cos(a) - x1 * np.sin(a), x0 * np.sin(a) + x1 * np.cos(a)
    want = np.empty_like(x64)
    if mode == "adjacent":
        want[:, 0::2], want[:, 1::2] = r0, r1
    else:
        want[:, :4], want[:, 4:] = r0, r1
    check(Two, lambda s, x, a: F.rope(x, a, mode), want, x, ang, atol=1e-5)
    table = np.concatenate([np.cos(ang), np.sin(ang)], axis=1).astype(np.float32)
    check(Two, lambda s, x, t: F.rope_cos_sin(x, t, mode), want, x, table, atol=1e-5)


def test_softmax_scale():
    x = rand(3, 20)
    z = f64(x) * 0.5
    want = np.exp(z - z.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    check(One, lambda s, x: F.softmax(x, scale=0.5), want, x, atol=1e-6)


def test_argmax_and_greedy_sample():
    x = rand(1, 50)
    want = np.array([np.argmax(x[0])], dtype=np.int32)
    got = check(One, lambda s, x: F.argmax(x), want, x, atol=0)
    assert got.dtype == np.int32
    check(One, lambda s, x: F.sample(x, 0.0, 40, 0.95, 1, 0, 0), want, x, atol=0)


def test_copy_of_views_and_cast():
    x = rand(6, 4)
    check(One, lambda s, x: F.copy(x.T), f64(x).T, x, atol=0)
    check(One, lambda s, x: F.copy(x[1:5:2]), f64(x)[1:5:2], x, atol=0)
    check(One, lambda s, x: F.copy(x[2]), f64(x)[2], x, atol=0)
    got = check(One, lambda s, x: F.copy(x, iron.f16), f64(x.astype(np.float16)), x, atol=0)
    assert got.dtype == np.float16


def test_elementwise_and_matmul():
    a, b = rand(3, 8), rand(3, 8)
    check(Two, lambda s, a, b: a + b, f64(a) + f64(b), a, b, atol=1e-6)
    check(Two, lambda s, a, b: a - b, f64(a) - f64(b), a, b, atol=1e-6)
    check(Two, lambda s, a, b: a * b, f64(a) * f64(b), a, b, atol=1e-6)
    d = (np.abs(b) + 0.5).astype(np.float32)
    check(Two, lambda s, a, d: a / d, f64(a) / f64(d), a, d, atol=1e-5)
    row = rand(3, 8)[0:1]
    check(Two, lambda s, a, b: a + b, f64(a) + f64(row), a, row, atol=1e-6)  # a broadcast row
    m = rand(8, 5)
    check(Two, lambda s, r, m: r @ m, f64(row) @ f64(m), row, m, atol=1e-5)


def test_reshape_transpose_gather():
    x = rand(4, 6)
    check(One, lambda s, x: F.copy(x.reshape(6, 4)), f64(x).reshape(6, 4), x, atol=0)
    check(One, lambda s, x: F.copy(x.reshape(2, 2, 6).transpose(1, 0, 2)), f64(x).reshape(2, 2, 6).transpose(1, 0, 2), x, atol=0)
    ids = np.array([3, 0, 2], dtype=np.int32)
    check(Two, lambda s, t, i: F.copy(t[i]), f64(x)[ids], x, ids, atol=0)
    check(One, lambda s, t: F.copy(t[[1, 3]]), f64(x)[[1, 3]], x, atol=0)


def test_attention():
    ctx, heads, kv, hd, rows = 8, 4, 2, 8, 3
    q, k, v = rand(rows, heads, hd), rand(ctx, kv, hd), rand(ctx, kv, hd)
    start = 2
    want = np.zeros((rows, heads, hd))
    for r in range(rows):
        p = start + r
        for h in range(heads):
            kh = h // (heads // kv)
            s = f64(k)[: p + 1, kh] @ f64(q)[r, h] / math.sqrt(hd)
            w = np.exp(s - s.max())
            w /= w.sum()
            want[r, h] = w @ f64(v)[: p + 1, kh]
    check(Three, lambda s, q, k, v: F.attention(q, k, v, start), want, q, k, v, atol=1e-5)


def test_scalar_of_values():
    class G(iron.Graph):
        def body(self, *, a: iron.Scratchpad, b: iron.Scratchpad):
            return F.scalar(a * 2 + 1, b)

    g = G()
    v = g.compile()
    assert v(a=3, b=4).tolist() == [11]
    assert g.reference(a=3, b=4).tolist() == [11]
