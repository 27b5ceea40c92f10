"""Every functional op and handle operation, compiled and through reference(), against an
independent float64 numpy version of its published definition."""

import math
import subprocess
import sys

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


def bf16_rounded(x):
    """float32 x rounded to bfloat16 (to nearest, ties to even) and back, by its bits alone."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)


BF16 = np.array([[1.0, 1 / 3, -2.5e-3, 1 + 2**-8, 1 + 3 * 2**-8, 65504.0]], np.float32)  # ties both ways


def test_bf16_outputs_are_ml_dtypes_bfloat16():
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed: bf16 outputs are float32")
    v = One(lambda s, x: F.copy(x, iron.bf16)).compile(a=BF16.shape)
    for got in (v(BF16), v(BF16, copy=False)):
        assert got.dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(got.astype(np.float32), bf16_rounded(BF16))
    # And such an array is a bf16 input, read as it is.
    back = One(lambda s, x: F.copy(x, iron.f32)).compile(a=(BF16.shape, ml_dtypes.bfloat16))(v(BF16))
    assert back.dtype == np.float32
    np.testing.assert_array_equal(back, bf16_rounded(BF16))


def test_bf16_outputs_are_float32_without_ml_dtypes():
    # A process where importing ml_dtypes fails, as where it is not installed.
    program = (
        "import sys; sys.modules['ml_dtypes'] = None\n"
        "import numpy as np, iron\n"
        "from iron import functional as F\n"
        "class G(iron.Graph):\n"
        "    def body(self, x): return F.copy(x, iron.bf16)\n"
        f"x = np.array({BF16.tolist()}, np.float32)\n"
        "y = G().compile(x=x.shape)(x)\n"
        "print(y.dtype.name, ' '.join(float(v).hex() for v in y.ravel()))\n")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "float32"
    assert out[1:] == [float(v).hex() for v in bf16_rounded(BF16).ravel()]


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


# ---- batches, encoders, convs and sampling: compiled, against numpy alone ----


class Four(One):
    def body(self, a, b, c, d):
        return self.fn(self, a, b, c, d)


class Five(One):
    def body(self, a, b, c, d, e):
        return self.fn(self, a, b, c, d, e)


def run(graph_cls, fn, *arrays, **held):
    """Compiles fn on the arrays' shapes and dtypes and returns one call's outputs."""
    g = graph_cls(fn, **held)
    names = list(g.signature().parameters)
    return g.compile(**{n: (a.shape, a.dtype) for n, a in zip(names, arrays)})(*arrays)


def ids(*values):
    return np.array(values, dtype=np.int32)


def softmax64(z):
    w = np.exp(z - z.max())
    return w / w.sum()


def attend(q_row, keys, values):
    """softmax(keys @ q_row / sqrt(head_dim)) @ values, in float64."""
    return softmax64(f64(keys) @ f64(q_row) / math.sqrt(q_row.shape[-1])) @ f64(values)


class Conv(iron.Graph):
    """A causal conv whose K - 1 rows carry in one state from call to call (read and write)."""

    def __init__(self, taps, chunk):
        super().__init__("conv")
        k, channels = taps.shape
        self.taps = iron.param(taps)
        self.carried_rows = iron.state((k - 1, channels))
        self.window = iron.state((2, chunk, channels))
        self.tail = iron.state((k - 1, channels))

    def body(self, x, *, rows: iron.Scratchpad = 1):
        state = F.ConvState(self.carried_rows, self.carried_rows, self.window, self.tail)
        return F.causal_conv1d(x[:rows] if x.shape[0] > 1 else x, self.taps, state)


def test_causal_conv1d_carries_its_rows_from_a_chunk_into_steps_and_the_next_chunk():
    k, channels, chunk = 4, 3, 6
    taps, sequence = rand(k, channels), rand(14, channels)
    s64, t64 = f64(sequence), f64(taps)
    # Row t is sum_j taps[j] * x[t - K + 1 + j], the rows before the sequence being zero.
    padded = np.concatenate([np.zeros((k - 1, channels)), s64])
    want = np.stack([sum(t64[j] * padded[t + j] for j in range(k)) for t in range(len(sequence))])

    g = Conv(taps, chunk)
    prompt, decode = g.compile(x=(chunk, channels)), g.compile(x=(1, channels))

    def chunk_of(first, rows):
        x = np.zeros((chunk, channels), np.float32)
        x[:rows] = sequence[first:first + rows]
        return prompt(x, rows=rows)

    got = [chunk_of(0, 5)]                                    # a prompt of 5 rows
    got += [decode(sequence[t:t + 1]) for t in range(5, 9)]   # 4 decode steps
    got.append(chunk_of(9, 5))                                # the next chunk reads the steps' rows
    assert [a.shape[0] for a in got] == [5, 1, 1, 1, 1, 5]
    np.testing.assert_allclose(np.concatenate(got), want, atol=1e-5, rtol=1e-5)


def test_conv_state_takes_states_for_window_and_tail():
    g = Conv(rand(4, 3), 6)
    g.tail = iron.param(rand(3, 3))  # a param where the spec takes a State
    with pytest.raises(TypeError, match="state.tail is an iron.State"):
        g.compile(x=(1, 3))


@pytest.mark.parametrize("window", [0, 2])
def test_segment_attention(window):
    segment, heads, kv_heads, hd = 4, 4, 2, 8
    lengths = ids(3, 4, 0)  # a short sentence, a full one, an empty one
    rows = segment * len(lengths)
    q, k, v = rand(rows, heads, hd), rand(rows, kv_heads, hd), rand(rows, kv_heads, hd)
    want = np.zeros((rows, heads, hd))  # rows past their sentence's length stay zero
    for b, n in enumerate(lengths):
        for r in range(n):
            seen = [b * segment + j for j in range(n) if window == 0 or abs(j - r) < window]
            for h in range(heads):
                kh = h // (heads // kv_heads)
                want[b * segment + r, h] = attend(q[b * segment + r, h], k[seen, kh], v[seen, kh])
    got = run(Four, lambda s, q, k, v, n: F.segment_attention(q, k, v, n, segment, window=window), q, k, v, lengths)
    assert got.shape == want.shape
    np.testing.assert_allclose(f64(got), want, atol=1e-5, rtol=1e-5)


def test_segment_mean():
    segment = 4
    lengths = ids(3, 4, 0)
    x = rand(segment * len(lengths), 5)
    want = np.stack([f64(x)[b * segment:b * segment + n].mean(0) if n else np.zeros(5) for b, n in enumerate(lengths)])
    got = run(Two, lambda s, x, n: F.segment_mean(x, n, segment), x, lengths)
    assert got.shape == (3, 5)
    np.testing.assert_allclose(f64(got), want, atol=1e-6, rtol=1e-6)


class Scatter(iron.Graph):
    """A batched decode's cache write: each row's keys into its slot at its position."""

    def __init__(self, slots_count, slot_rows, width):
        super().__init__("scatter")
        self.slots_count, self.rows_per_slot = slots_count, slot_rows
        self.cache = iron.state((slots_count * slot_rows, width))

    def body(self, slots, positions, keys):
        rows = F.slot_rows(slots, positions, self.slots_count, self.rows_per_slot)
        self.cache[rows] = keys
        return rows, F.copy(self.cache)


def test_slot_rows_place_a_batchs_keys_in_its_slots():
    slots, positions, keys = ids(2, 0, 1), ids(5, 0, 7), rand(3, 2)
    g = Scatter(3, 8, 2)
    v = g.compile(slots=((3,), np.int32), positions=((3,), np.int32), keys=(3, 2))
    rows, cache = v(slots, positions, keys)
    want_rows = slots.astype(np.int64) * 8 + positions
    np.testing.assert_array_equal(rows, want_rows)
    want_cache = np.zeros((24, 2), np.float32)
    want_cache[want_rows] = keys
    np.testing.assert_array_equal(cache, want_cache)
    # A position past its slot is refused before anything runs, naming the input.
    with pytest.raises(IndexError, match="positions"):
        v(slots, ids(5, 8, 7), keys)


@pytest.mark.parametrize("window", [0, 3])
def test_slot_attention(window):
    slot_rows, heads, kv_heads, hd = 6, 4, 2, 8
    positions, slots = ids(2, 5, 0), ids(1, 0, 2)
    q = rand(3, heads, hd)
    k, v = rand(3 * slot_rows, kv_heads, hd), rand(3 * slot_rows, kv_heads, hd)
    want = np.zeros((3, heads, hd))
    for b, (p, slot) in enumerate(zip(positions, slots)):
        first = 0 if window == 0 else max(0, p - window + 1)
        seen = [slot * slot_rows + j for j in range(first, p + 1)]
        for h in range(heads):
            kh = h // (heads // kv_heads)
            want[b, h] = attend(q[b, h], k[seen, kh], v[seen, kh])

    def fn(s, q, k, v, p, slot):
        return F.slot_attention(q, k, v, p, slot, slot_rows, window=window)

    got = run(Five, fn, q, k, v, positions, slots)
    assert got.shape == want.shape
    np.testing.assert_allclose(f64(got), want, atol=1e-5, rtol=1e-5)


def test_sample_settings_layout():
    temperature, top_k, top_p, seed = 0.7, 70000, 0.9, 2**64 - 3
    parts = [int(np.float64(temperature).view(np.uint64)), int(np.float64(top_p).view(np.uint64)), seed]
    want = [(part >> (16 * j)) & 0xFFFF for part in parts for j in range(4)] + [top_k & 0xFFFF, top_k >> 16, 0, 0]
    row = F.sample_settings(temperature, top_k, top_p, seed)
    assert row.dtype == np.int32 and row.shape == (16,)
    assert row.tolist() == want
    for bad in [(-1.0, 40, 0.9, 0), (1.0, -1, 0.9, 0), (1.0, 40, 0.0, 0), (1.0, 40, 1.5, 0), (math.nan, 40, 0.9, 0)]:
        with pytest.raises(ValueError):
            F.sample_settings(*bad)


def sample_batch(logits, settings, steps, positions):
    return run(Four, lambda s, x, st, n, p: F.sample_rows(x, st, n, p), logits, settings, steps, positions)


def test_sample_rows_greedy_and_top_k_1_are_argmax_and_a_seed_repeats():
    rows = 6
    logits = rand(rows, 50)
    settings = np.stack([F.sample_settings(0.0, 40, 0.95, 1), F.sample_settings(0.0, 0, 1.0, 99),
                         F.sample_settings(1.0, 1, 1.0, 5), F.sample_settings(3.0, 1, 0.5, 6),
                         F.sample_settings(1.0, 0, 1.0, 7), F.sample_settings(1.0, 0, 1.0, 7)])
    steps, positions = ids(0, 1, 2, 3, 4, 4), ids(10, 11, 12, 13, 14, 14)
    logits[5] = logits[4]  # rows 4 and 5: the same logits, seed, step and position
    got = sample_batch(logits, settings, steps, positions)
    assert got.dtype == np.int32 and got.shape == (rows,)
    np.testing.assert_array_equal(got[:4], np.argmax(logits[:4], axis=1))
    assert got[4] == got[5]
    np.testing.assert_array_equal(sample_batch(logits, settings, steps, positions), got)  # and again


def test_sample_rows_draw_from_the_settings_distribution():
    # Many rows of one row of logits, each its own seed: the draws' frequencies are the
    # distribution the settings make (within 4 standard deviations of 2000 draws).
    draws = 2000
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    steps, positions = np.zeros(draws, np.int32), np.arange(draws, dtype=np.int32)

    def frequencies(temperature, top_k, top_p):
        settings = np.stack([F.sample_settings(temperature, top_k, top_p, seed) for seed in range(draws)])
        got = sample_batch(np.tile(logits.astype(np.float32), (draws, 1)), settings, steps, positions)
        return np.bincount(got, minlength=4) / draws

    def check_close(got, p):
        assert np.all(np.abs(got - p) <= 4 * np.sqrt(p * (1 - p) / draws) + 1e-9), (got, p)

    check_close(frequencies(1.0, 0, 1.0), softmax64(logits))
    check_close(frequencies(2.0, 0, 1.0), softmax64(logits / 2))
    check_close(frequencies(1.0, 2, 1.0), np.array([0.625, 0.375, 0, 0]))    # the top two
    check_close(frequencies(1.0, 0, 0.9), np.array([0.5, 0.3, 0.15, 0]) / 0.95)  # the smallest set reaching 0.9


def test_sample_rows_draw_as_sample_of_each_row_alone():
    logits = rand(3, 30, scale=2.0)
    settings = [(1.0, 0, 1.0, 11), (0.8, 5, 0.9, 12), (1.5, 0, 0.7, 2**63 + 5)]
    steps, positions = ids(3, 0, 7), ids(4, 9, 1)
    got = sample_batch(logits, np.stack([F.sample_settings(*s) for s in settings]), steps, positions)
    for b, (t, k, p, seed) in enumerate(settings):
        step, position = int(steps[b]), int(positions[b])
        alone = run(One, lambda s, x: F.sample(x, t, k, p, seed, step, position), logits[b:b + 1])
        assert got[b] == alone[0], b


def test_sample_reads_its_settings_row_each_call():
    # One version, any settings: each call draws as sample() with those settings fixed would.
    class Row(iron.Graph):
        def body(self, x, settings, *, step: iron.Scratchpad, position: iron.Scratchpad):
            return F.sample(x, settings, step, position)

    g = Row()
    logits = rand(1, 30, scale=2.0)
    v = g.compile(x=logits.shape, settings=((16,), np.int32))
    for t, k, p, seed in [(0.0, 0, 1.0, 1), (1.0, 0, 1.0, 11), (0.8, 5, 0.9, 12), (1.5, 0, 0.7, 2**63 + 5)]:
        for step, position in [(0, 0), (3, 4), (7, 1)]:
            fixed = run(One, lambda s, x: F.sample(x, t, k, p, seed, step, position), logits)
            got = v(logits, F.sample_settings(t, k, p, seed), step=step, position=position)
            assert got.tolist() == fixed.tolist(), (t, k, p, seed, step, position)
    assert g.versions == 1
    assert g.reference(logits, F.sample_settings(0.0, 0, 1.0, 1), step=0, position=0).tolist() == [np.argmax(logits)]


def test_attention_takes_a_precision():
    # At MEDIUM a decode step over q8_0 caches may round its query to q8_0 blocks too.
    ctx, heads, kv, hd = 8, 4, 2, 64

    class Cached(iron.Graph):
        def __init__(self, precision):
            super().__init__("cached")
            self.k, self.v = iron.state((ctx, kv, hd), "q8_0"), iron.state((ctx, kv, hd), "q8_0")
            self.precision = precision

        def body(self, q, k, v, *, start: iron.Scratchpad):
            self.k[:] = k
            self.v[:] = v
            return F.attention(q, self.k, self.v, start, precision=self.precision)

    q, k, v = rand(1, heads, hd), rand(ctx, kv, hd), rand(ctx, kv, hd)
    got = {}
    for precision in (iron.Precision.HIGHEST, iron.Precision.MEDIUM):
        version = Cached(precision).compile(q=q.shape, k=k.shape, v=v.shape)
        assert version.describe().splitlines()[-1].split(": ")[0].endswith(f" {precision}")
        got[precision] = version(q, k, v, start=5)
    np.testing.assert_allclose(got[iron.Precision.MEDIUM], got[iron.Precision.HIGHEST], atol=0.05)
