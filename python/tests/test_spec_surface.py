"""The spec's graph and functional API from Python, called as the spec's signatures call it.

Every name the spec's "Graphs" and "Functional" documents define is called here the way its
signature reads (positional-only, keyword-only and keyword names as the spec has them) on a
small case, and the result is compared with numpy, never with the library's reference(). Where
the project departs on purpose, the test asserts what the project does instead and names the
document that says so; a spec name with no Python binding must be explained in
docs/python-api.md (test_unbound_spec_names_are_explained). test_graph.py and
test_functional.py test the behaviour in depth; this file is the surface's inventory.
"""

import enum
import inspect
import math
import pathlib

import numpy as np
import pytest

import iron
from iron import functional as F
from test_functional import One as Fn  # a graph of one input, a, whose body is fn(self, a)

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"
rng = np.random.default_rng(36)


def rand(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def f64(a):
    return np.asarray(a, dtype=np.float64)


def run(fn, x, **held):
    return Fn(fn, **held).compile(a=(x.shape, x.dtype))(x)


# ---- module attributes: Scratchpad, Carried, carry ----


def test_scratchpad_annotation_in_the_specs_subscripted_form():
    # The spec's Scratchpad is Annotated[T, ...]: a body writes `rows: iron.Scratchpad[int]`.
    class Rows(iron.Graph):
        def body(self, x, *, rows: iron.Scratchpad[int]):
            return x[:rows] * x[:rows]

    x = rand(5, 3)
    v = Rows().compile(x=(5, 3))
    for rows in (1, 4):
        np.testing.assert_allclose(v(x, rows=rows), x[:rows] * x[:rows], rtol=1e-6)


def test_carried_annotation_and_carry():
    class Count(iron.Graph):
        def body(self, x, *, position: iron.Carried[int]):
            return x + x, iron.carry(position=position + 1)

    x = rand(2, 3)
    out, carried = Count().compile(x=(2, 3))(x, position=6)
    np.testing.assert_allclose(out, 2 * x, rtol=1e-6)
    assert carried.position == 7 and carried["position"] == 7


# ---- Precision ----


def test_precision_is_the_specs_str_enum():
    assert issubclass(iron.Precision, enum.StrEnum)
    assert [p.name for p in iron.Precision] == ["HIGHEST", "HIGH", "MEDIUM"]
    x, w = rand(3, 16), rand(8, 16)
    want = f64(x) @ f64(w).T
    for p, atol in ((iron.Precision.HIGHEST, 1e-4), (iron.Precision.HIGH, 1e-2), (iron.Precision.MEDIUM, 0.2)):
        got = run(lambda g, x: F.linear(x, g.w, precision=p), x, w=iron.param(w))
        np.testing.assert_allclose(got, want, atol=atol)


# ---- Profile ----


def test_profile_add_tunables_for_save_load(tmp_path):
    p = iron.Profile()
    p.add("GEMV", tile_n=16)  # an entry for every GEMV
    p.add("GEMV", N=64, tile_n=32)  # more specific: wins where N is 64
    assert p.tunables_for("GEMV", {"K": 64, "N": 64})["tile_n"] == 32
    assert p.tunables_for("GEMV", {"K": 64, "N": 128})["tile_n"] == 16
    path = tmp_path / "cpu.json"  # the spec's path: str | Path
    p.save(path)
    q = iron.Profile.load(path)
    assert q.tunables_for("GEMV", given={"K": 64, "N": 64})["tile_n"] == 32
    assert iron.Profile.load(str(path)).tunables_for("GEMV", {"K": 8, "N": 8})["tile_n"] == 16
    q.add("GEMV", N=64, tile_n=8)  # as specific as an entry, and disagreeing
    with pytest.raises(ValueError):
        q.tunables_for("GEMV", {"K": 64, "N": 64})
    with pytest.raises(TypeError):
        q.add("GEMV", N=64)  # gives no tunable


# ---- param, state, weight, Graph ----


class Mlp(iron.Graph):
    def __init__(self):
        super().__init__("mlp")
        self.up = iron.param(6, 4)  # by shape, bound by load_state_dict
        self.down = iron.param(4, 6)
        self.norm = iron.param(4)

    def body(self, x, skip=None, *, rows: iron.Scratchpad = 3):
        h = F.rms_norm(x[:rows], 4, weight=self.norm, eps=1e-5)
        y = F.linear(F.silu(F.linear(h, self.up)), self.down)
        return y if skip is None else y + skip[:rows]

    def project(self, x):
        return F.linear(x, self.up)


def mlp_numpy(x, t, rows, skip=None):
    x = f64(x[:rows])
    h = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5) * f64(t["model.norm"])
    u = h @ f64(t["model.up"]).T
    y = (u / (1 + np.exp(-u))) @ f64(t["model.down"]).T
    return y if skip is None else y + f64(skip[:rows])


def mlp_tree():
    # A nested tree at the prefix "model.", as load_state_dict(tree, path="model.") reads it.
    return {"model": {"up": rand(6, 4), "down": rand(4, 6), "norm": rand(4)}}


def test_graph_signature_load_state_dict_compile_reference():
    g = Mlp()
    params = g.signature().parameters
    assert list(params) == ["x", "skip", "rows"]
    assert params["rows"].kind is inspect.Parameter.KEYWORD_ONLY
    tree = mlp_tree()
    g.load_state_dict(tree, path="model.")
    flat = {f"model.{k}": v for k, v in tree["model"].items()}
    x, skip = rand(5, 4), rand(5, 4)
    v = g.compile(x=((5, 4), np.float32))  # the optional input left out
    np.testing.assert_allclose(v(x), mlp_numpy(x, flat, 3), atol=1e-5)
    np.testing.assert_allclose(v(x, rows=2), mlp_numpy(x, flat, 2), atol=1e-5)
    both = g.compile(x=(5, 4), skip=(5, 4), check=True)
    np.testing.assert_allclose(both(x, skip, rows=5), mlp_numpy(x, flat, 5, skip), atol=1e-5)
    np.testing.assert_allclose(g.reference(x, rows=4), mlp_numpy(x, flat, 4), atol=1e-5)
    # held(): the dotted paths (the spec keys them by id; docs/python-api.md, class Graph).
    assert sorted(g.held()) == ["down", "norm", "up"]
    g.release()
    np.testing.assert_allclose(v(x), mlp_numpy(x, flat, 3), atol=1e-5)  # loads again
    with pytest.raises(ValueError):
        g.load_state_dict(tree, path="model")  # the prefix ends in a dot


def test_graph_inline_records_a_method_in_the_caller():
    class Outer(iron.Graph):
        def __init__(self):
            super().__init__("outer")
            self.mlp = Mlp()

        def body(self, x):
            return self.mlp.inline(self.mlp.project, x)

    g = Outer()
    up = rand(6, 4)
    g.load_state_dict({"mlp": {"up": up, "down": rand(4, 6), "norm": rand(4)}})
    x = rand(2, 4)
    np.testing.assert_allclose(g.compile(x=(2, 4))(x), f64(x) @ f64(up).T, atol=1e-5)
    with pytest.raises(TypeError):
        g.mlp.inline(g.mlp.project, x)  # no body being recorded


def test_param_state_weight_forms():
    # param(*shape, dtype=...), param(array), state(shape, dtype, name), weight(array)[ids].
    assert iron.param(3, 4).shape == (3, 4) and iron.param((3, 4)).shape == (3, 4)
    assert iron.param(2, dtype=np.int32).dtype == iron.i32
    # The default dtype is float32, the spec's bfloat16 (docs/design.md, "Python").
    assert iron.param(2).dtype == iron.f32 and iron.state((2,)).dtype == iron.f32
    table = rand(5, 3)

    class Lookup(iron.Graph):
        def __init__(self):
            super().__init__("lookup")
            self.table = iron.weight(table)
            self.bias = iron.param(rand(3))
            self.acc = iron.state((2, 3), np.float32, name="acc")

        def body(self, ids):
            rows = F.copy(self.table[ids]) + self.table[[4, 0]]  # a 1-D int handle, and fixed rows
            self.acc[0:2] = self.acc[0:2] + rows
            return F.copy(self.acc[0:2])

    g = Lookup()
    v = g.compile(ids=((2,), np.int32))
    ids = np.array([3, 1], np.int32)
    once = table[ids] + table[[4, 0]]
    np.testing.assert_allclose(v(ids), once, rtol=1e-6)
    np.testing.assert_allclose(v(ids), 2 * once, rtol=1e-6)  # the state persists


def test_clamp_of_a_per_call_value():
    class Clamped(iron.Graph):
        def body(self, x, *, rows: iron.Scratchpad):
            n = iron.clamp(rows, lo=1, hi=3)  # x a per-call value, as the spec's PerCall | Affine
            return x[:n] + x[:n]

    x = rand(4, 2)
    v = Clamped().compile(x=(4, 2))
    for rows, n in ((0, 1), (2, 2), (9, 3)):
        np.testing.assert_allclose(v(x, rows=rows), 2 * x[:n], rtol=1e-6)
    assert iron.clamp(iron.Affine(5), 0, 3).constant() == 3  # a constant expression folds


def test_on_host_between_steps():
    class Host(iron.Graph):
        def __init__(self):
            super().__init__("host")
            self.buf = iron.state((2, 3))

        def body(self, x):
            iron.on_host(lambda src, dst: np.multiply(src, 3, out=dst), F.silu(x), writes=(self.buf,))
            return self.buf + x

    x = rand(2, 3)
    silu = f64(x) / (1 + np.exp(-f64(x)))
    np.testing.assert_allclose(Host().compile(x=(2, 3))(x), 3 * silu + x, atol=1e-5)
    with pytest.raises(TypeError):
        iron.on_host(print)  # no body being recorded


# ---- CompiledGraph ----


class Counter(iron.Graph):
    def __init__(self):
        super().__init__("counter")
        self.total = iron.state((3,))
        self.scale = iron.param(np.full(3, 2, np.float32))

    def body(self, x):
        self.total[0:3] = self.total[0:3] + x * self.scale
        return F.copy(self.total[0:3])


def test_compiled_graph_read_push_load_upload_release_start():
    g = Counter()
    v = g.compile(x=(3,))
    assert v.load() is v  # the spec's load() returns the version
    v.upload()  # nothing left to upload: a no-op
    x = np.array([1, 2, 3], np.float32)
    np.testing.assert_array_equal(v(x), 2 * x)
    view = v.read(g.total)
    np.testing.assert_array_equal(view, 2 * x)
    view[:] = 100
    v.push(g.total)
    np.testing.assert_array_equal(v(x), 100 + 2 * x)
    # start(run, /, *tensors, **values): the spec's run object is an iron.Run here, whose wait()
    # gives the result (docs/design.md, "start() and Run").
    r = iron.Run()
    v.start(r, x)
    np.testing.assert_array_equal(r.wait(), 100 + 4 * x)
    v.release()
    np.testing.assert_array_equal(v(x), 100 + 6 * x)  # loaded again; the state is the graph's


class Step(iron.Graph):
    def body(self, x=None, *, position: iron.Carried, rows: iron.Scratchpad = 1):
        out = F.scalar(position * 10) if x is None else F.scalar(position * 10, rows)
        return out, iron.carry(position=position + 1)


def test_emit_to_and_carried_loop():
    g = Step()
    body = g.compile()  # takes no tensor: the loop's body, fed by its own Emit
    first = g.compile(x=(2,), feeds=body)
    first.emit_to(body)
    loop = iron.CarriedLoop(first, body, depth=2)
    assert (loop.first, loop.body, loop.depth) == (first, body, 2)
    seen, positions = [], []
    steps = loop.run(4, np.zeros(2, np.float32), position=3, rows=5)  # run(steps, /, *tensors, **values)
    for k in steps:
        seen.append(k)
        positions.append(steps.carried("position"))
    assert seen == [0, 1, 2, 3]
    # first ran at 3 (carrying 4); the body's steps ran at 4, 5, 6, 7.
    assert positions == [5, 6, 7, 8]
    # start() then steps(): start returns first's result here (the spec's returns None;
    # docs/python-api.md, CarriedLoop.start).
    out, carried = loop.start(np.zeros(2, np.float32), position=0, rows=2)
    assert int(np.asarray(out).reshape(-1)[0]) == 0 * 10 + 2 and carried.position == 1
    assert list(loop.steps(2)) == [0, 1]
    with pytest.raises(ValueError):
        iron.CarriedLoop(first, body, depth=0)


# ---- Handle and its views ----


def test_handle_views():
    x = rand(4, 6)

    def views(g, h):
        assert h.shape == (4, 6) and h.T.shape == (6, 4)
        a = F.copy(h.T)                                   # T: transpose(1, 0)
        b = F.copy(h.transpose(1, 0)) - F.copy(h.transpose((1, 0)))  # both call forms: zeros
        c = h.reshape(6, 4) + h.reshape((6, 4))           # no data moves
        d = F.copy(h[1:3, ::2]).reshape(6) + F.copy(h[3])  # basic indexing; a row
        return a, b, c, d

    a, b, c, d = Fn(views).compile(a=(4, 6))(x)
    np.testing.assert_array_equal(a, x.T)
    np.testing.assert_array_equal(b, np.zeros((6, 4)))
    np.testing.assert_allclose(c, 2 * x.reshape(6, 4), rtol=1e-6)
    np.testing.assert_allclose(d, x[1:3, ::2].reshape(6) + x[3], rtol=1e-6)


def test_handle_per_call_indexing_and_valid():
    class Keys(iron.Graph):
        def body(self, keys, *, pos: iron.Scratchpad, n: iron.Scratchpad):
            column = keys[:, pos]  # a per-call value on one axis
            rows = keys[:n]
            assert 0 in rows.valid  # the spec's Mapping[int, Affine] of per-call bounds
            return F.copy(column), F.copy(rows)

    keys = rand(3, 5)
    v = Keys().compile(keys=(3, 5))
    col, rows = v(keys, pos=4, n=2)
    np.testing.assert_array_equal(col, keys[:, 4])
    np.testing.assert_array_equal(rows, keys[:2])


def test_handle_at_with_bounds_repeat_and_length():
    cache = np.arange(32, dtype=np.float32).reshape(4, 8)

    class Walk(iron.Graph):
        def __init__(self):
            super().__init__("walk")
            self.cache = iron.weight(cache)

        def body(self, x, *, n: iron.Scratchpad, k: iron.Scratchpad):
            # tap, shape, then the keyword-only bounds, repeat, length of the spec's at().
            cols = self.cache.at(iron.AccessPattern(2, [4], [8]), [4], bounds={0: n})
            lead = self.cache.at(iron.AccessPattern(0, [4, 8], [8, 1]), (4, 8), bounds={0: 4}, length=k)
            # repeat is itself the bound on the view's first axis, so bounds leaves that axis
            # (docs/design.md, "Handle::at(pattern, shape, bounds, repeat, length)").
            reps = self.cache.at(iron.AccessPattern(0, [4, 8], [8, 1]), (4, 8), repeat=n)
            return F.copy(cols) + x[:n], F.copy(lead), F.copy(reps)

    v = Walk().compile(x=(4,))
    x = rand(4)
    cols, lead, reps = v(x, n=3, k=5)
    np.testing.assert_allclose(cols, cache[:3, 2] + x[:3], rtol=1e-6)
    np.testing.assert_array_equal(lead, cache[:, :5])
    np.testing.assert_array_equal(reps, cache[:3])


def test_handle_arithmetic_and_matmul_of_a_row():
    a, b, w = rand(1, 4), rand(1, 4), rand(4, 3)

    class Ops(iron.Graph):
        def __init__(self):
            super().__init__("ops")
            self.w = iron.param(w)

        def body(self, a, b):
            return a + b, a - b, a * b, a / b, a @ self.w

    got = Ops().compile(a=(1, 4), b=(1, 4))(a, b)
    for g, want in zip(got, (a + b, a - b, a * b, f64(a) / f64(b), f64(a) @ f64(w))):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


# ---- functional ----


def test_linear_under_the_specs_keywords():
    w, bias = rand(5, 4), rand(5)
    for rows in (1, 3):
        x = rand(rows, 4)
        got = run(lambda g, x: F.linear(x, weight=g.w, bias=g.b, precision=iron.Precision.HIGHEST), x,
                  w=iron.param(w), b=iron.param(bias))
        np.testing.assert_allclose(got, f64(x) @ f64(w).T + f64(bias), atol=1e-5)
    x = rand(4)  # the spec's (in,) row, on GEMV
    np.testing.assert_allclose(run(lambda g, x: F.linear(x, g.w, precision=iron.Precision.HIGH), x, w=iron.param(w)),
                               f64(w) @ f64(x), atol=1e-5)
    with pytest.raises(ValueError):
        run(lambda g, x: F.linear(x, g.w, precision=iron.Precision.HIGHEST), rand(2, 2, 4), w=iron.param(w))


def test_norms_under_the_specs_keywords():
    x, w, b = rand(3, 8), rand(8), rand(8)
    x64 = f64(x)
    rms = x64 / np.sqrt(np.mean(x64 * x64, -1, keepdims=True) + 1e-6) * f64(w)
    got = run(lambda g, x: F.rms_norm(x, normalized_shape=(8,), weight=g.w, eps=1e-6), x, w=iron.param(w))
    np.testing.assert_allclose(got, rms, atol=1e-5)
    # eps None: float32's machine epsilon, as torch's.
    eps = float(np.finfo(np.float32).eps)
    np.testing.assert_allclose(run(lambda g, x: F.rms_norm(x, 8), x),
                               x64 / np.sqrt(np.mean(x64 * x64, -1, keepdims=True) + eps), atol=1e-5)
    mean, var = x64.mean(-1, keepdims=True), x64.var(-1, keepdims=True)
    ln = (x64 - mean) / np.sqrt(var + 1e-5) * f64(w) + f64(b)
    got = run(lambda g, x: F.layer_norm(x, [8], weight=g.w, bias=g.b, eps=1e-5), x, w=iron.param(w), b=iron.param(b))
    np.testing.assert_allclose(got, ln, atol=1e-5)
    with pytest.raises(ValueError):
        run(lambda g, x: F.rms_norm(x, 4), x)  # not the last axis


def test_activations():
    x = rand(2, 6, scale=2)
    x64 = f64(x)
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(run(lambda g, x: F.silu(x), x), x64 / (1 + np.exp(-x64)), atol=1e-5)
    np.testing.assert_allclose(run(lambda g, x: F.gelu(x), x), 0.5 * x64 * (1 + erf(x64 / math.sqrt(2))), atol=1e-5)
    tanh = 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3)))
    np.testing.assert_allclose(run(lambda g, x: F.gelu(x, approximate="tanh"), x), tanh, atol=1e-5)


def test_rope_turns_adjacent_pairs():
    x, angles = rand(3, 8), rand(3, 4)

    class Rope(iron.Graph):
        def body(self, x, angles):
            return F.rope(x, angles)

    got = Rope().compile(x=(3, 8), angles=(3, 4))(x, angles)
    c, s = np.cos(f64(angles)), np.sin(f64(angles))
    even, odd = f64(x[:, 0::2]), f64(x[:, 1::2])
    want = np.empty((3, 8))
    want[:, 0::2], want[:, 1::2] = even * c - odd * s, even * s + odd * c
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_conv_state_and_causal_conv1d_decode_steps():
    k, channels = 3, 4
    taps, seq = rand(k, channels), rand(5, channels)

    class Conv(iron.Graph):
        def __init__(self):
            super().__init__("conv")
            self.taps = iron.param(taps)
            self.rows = iron.state((k - 1, channels))
            self.window = iron.state((2, 2, channels))
            self.tail = iron.state((k - 1, channels))

        def body(self, x):
            state = F.ConvState(read=self.rows, write=self.rows, window=self.window, tail=self.tail)
            return F.causal_conv1d(x, self.taps, state=state)

    v = Conv().compile(x=(1, channels))
    got = np.concatenate([v(seq[t:t + 1]) for t in range(len(seq))])
    padded = np.concatenate([np.zeros((k - 1, channels)), f64(seq)])
    want = np.stack([sum(f64(taps[j]) * padded[t + j] for j in range(k)) for t in range(len(seq))])
    np.testing.assert_allclose(got, want, atol=1e-5)


# ---- what Python does not bind, and says why ----

# Each spec name Python leaves out (or takes in another form), with words that docs/python-api.md
# uses where it explains it.
UNBOUND = {
    "Profile.make": "Profile.make",
    "Profile.dims": "Profile.dims",
    "Profile.matches": "Profile.matches",
    "Graph.record": "Graph.record",
    "Graph.compile(dev=, full_elf=)": "full_elf",
    "Graph.reference(dev=)": "reference(dev=",
    "CompiledGraph.callable": "CompiledGraph.callable",
    "CompiledGraph(recording, plan, ...)": "CompiledGraph(recording",
    "CompiledGraph.load/upload(release, piece_bytes)": "piece_bytes",
    "Handle.whole": "Handle.whole",
    "Handle.ref": "Handle.ref",
    "Handle.buffer/layout": "Handle.layout",
    "Handle.at(tuple of taps)": "tuple of patterns",
}


@pytest.mark.parametrize("name", sorted(UNBOUND))
def test_unbound_spec_names_are_explained(name):
    doc = (DOCS / "python-api.md").read_text()
    assert UNBOUND[name] in doc, f"docs/python-api.md does not say why {name} is not bound"
