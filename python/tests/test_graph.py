"""The graph layer from Python: examples/mlp.cpp and examples/decoder_step.cpp written from the
spec's signatures, the error contract's rows (tests/contract/error_contract_test.cpp), views,
profiles, check mode, host steps, and two Python threads calling two graphs at once."""

import os
import threading

import numpy as np
import pytest

import iron
from iron import functional as F

rng = np.random.default_rng(1)


def normal(*shape, scale=0.1):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# ---- examples/mlp.cpp ----


class Mlp(iron.Module):
    def __init__(self):
        self.up = iron.param(256, 64)  # (out, in), as torch.nn.Linear stores it
        self.down = iron.param(64, 256)

    def __call__(self, x):
        return F.linear(F.silu(F.linear(x, self.up)), self.down)


class Block(iron.Graph):
    def __init__(self):
        super().__init__("block")
        self.norm = iron.param(64)
        self.mlp = Mlp()

    def body(self, x, *, rows: iron.Scratchpad):
        return x + self.mlp(F.rms_norm(x[:rows], 64, self.norm, 1e-5))


def mlp_weights():
    return {"norm": normal(64, scale=1), "mlp.up": normal(256, 64), "mlp.down": normal(64, 256)}


def test_mlp_example():
    block = Block()
    block.load_state_dict(mlp_weights())
    assert block.held() == ["norm", "mlp.up", "mlp.down"]
    image = block.compile(x=(32, 64))
    x = normal(32, 64, scale=1)
    for rows in (32, 17, 1):
        y = image(x, rows=rows)
        want = block.reference(x, rows=rows)
        assert y.shape == (rows, 64) and want.shape == (rows, 64)
        assert np.abs(y - want).max() <= 1e-4
    assert block.versions == 1


def test_inputs_are_not_copied_and_outputs_are_views_on_request():
    block = Block()
    block.load_state_dict(mlp_weights())
    v = block.compile(x=(4, 64))
    x = normal(4, 64, scale=1)
    a = v(x, rows=4)
    view = v(x, rows=4, copy=False)
    np.testing.assert_array_equal(a, view)
    assert not view.flags.writeable and not view.flags.owndata
    first = view.copy()
    v(x * 2, rows=4, copy=False)  # the view now shows the next call's output
    assert not np.array_equal(view, first)
    # A non-contiguous input is made contiguous (a copy); the result is the same.
    wide = np.zeros((4, 128), np.float32)
    wide[:, ::2] = x
    np.testing.assert_array_equal(v(wide[:, ::2], rows=4), a)


def test_float64_checkpoint_is_cast_as_copy_():
    block = Block()
    block.load_state_dict({k: v.astype(np.float64) for k, v in mlp_weights().items()})
    block.compile(x=(2, 64))(normal(2, 64), rows=2)


class Stack(iron.Graph):
    """Lists of modules bind as layers.0.w, layers.1.w, ...; a module held twice binds once."""

    def __init__(self):
        super().__init__("stack")
        self.layers = [iron.Module() for _ in range(3)]
        for layer in self.layers:
            layer.w = iron.param(8, 8)
        self.tied = self.layers[0].w

    def body(self, x):
        for layer in self.layers:
            x = F.linear(x, layer.w)
        return x


def test_lists_bind_by_index():
    s = Stack()
    ws = [normal(8, 8, scale=0.5) for _ in range(3)]
    # A torch state dict names a tied param at each path; it binds once.
    s.load_state_dict({"tied": ws[0], **{f"layers.{i}.w": w for i, w in enumerate(ws)}})
    assert sorted(s.held()) == ["layers.1.w", "layers.2.w", "tied"]
    x = normal(1, 8, scale=1)
    want = x.astype(np.float64)
    for w in ws:
        want = want @ w.T.astype(np.float64)
    np.testing.assert_allclose(s.compile(x=(1, 8))(x), want, atol=1e-5)


def test_stats_count_uploads_by_path_at_the_first_call_or_load():
    # Each weight by the path the graph holds it at (three layers' `w` are three entries, not
    # `w: 3`), uploaded at a version's first call or load(), never by compile().
    s = Stack()
    s.load_state_dict({"tied": normal(8, 8), **{f"layers.{i}.w": normal(8, 8) for i in range(3)}})
    small = s.compile(x=(1, 8))
    assert s.stats().uploads == {} and s.stats().versions == 1
    small(normal(1, 8))
    once = {"tied": 1, "layers.1.w": 1, "layers.2.w": 1}
    assert s.stats().uploads == once
    assert "layers.1.w: 1 upload" in str(s.stats())
    s.compile(x=(4, 8))(normal(4, 8))  # a second version shares the uploads
    assert s.stats().uploads == once
    s.release()
    large = s.compile(x=(2, 8))
    assert s.stats().uploads == once
    assert large.load() is large
    assert s.stats().uploads == {path: 2 for path in once}


# ---- examples/decoder_step.cpp ----

VOCAB, DIM, HEADS, HEAD_DIM, CONTEXT = 64, 32, 4, 8, 64


class Decoder(iron.Graph):
    def __init__(self):
        super().__init__("decoder")
        self.embed = iron.param(VOCAB, DIM)
        self.qkv = iron.param(3 * DIM, DIM)
        self.out = iron.param(DIM, DIM)
        self.norm = iron.param(DIM)
        self.keys = iron.state((CONTEXT, HEADS, HEAD_DIM))
        self.values = iron.state((CONTEXT, HEADS, HEAD_DIM))
        self.tokens = iron.state((CONTEXT + 1,), np.int32)

    def body(self, *, token: iron.Carried, position: iron.Carried):
        x = F.copy(self.embed[iron.at(token)]).reshape(1, DIM)
        h = F.linear(F.rms_norm(x, DIM, self.norm, 1e-5), self.qkv)  # (1, 3 * dim): q, k, v
        q = F.copy(h[0, 0:DIM]).reshape(1, HEADS, HEAD_DIM)
        self.keys[position : position + 1] = F.copy(h[0, DIM : 2 * DIM]).reshape(1, HEADS, HEAD_DIM)
        self.values[position : position + 1] = F.copy(h[0, 2 * DIM :]).reshape(1, HEADS, HEAD_DIM)
        attended = F.attention(q, self.keys, self.values, position).reshape(1, DIM)
        x = x + F.linear(attended, self.out)
        logits = F.linear(F.rms_norm(x, DIM, self.norm, 1e-5), self.embed)  # tied classifier
        next_token = F.argmax(logits)
        self.tokens[position + 1 : position + 2] = next_token
        return logits, iron.carry(token=next_token, position=position + 1)


def decoder_weights():
    r = np.random.default_rng(5)
    return {"embed": r.standard_normal((VOCAB, DIM)).astype(np.float32),
            "qkv": (r.standard_normal((3 * DIM, DIM)) * 0.3).astype(np.float32),
            "out": (r.standard_normal((DIM, DIM)) * 0.3).astype(np.float32),
            "norm": r.standard_normal(DIM).astype(np.float32)}


def test_decoder_step_example():
    decoder = Decoder()
    decoder.load_state_dict(decoder_weights())
    step = decoder.compile()  # no tensor: one version is the loop's first run and its body
    loop = iron.CarriedLoop(step, step, depth=2)
    steps = 20
    produced = step.read(decoder.tokens)  # the state the graph holds, as the spec reads it
    device, carried_tokens = [], []
    walk = loop.run(steps, token=7, position=0)
    for k in walk:
        device.append(int(produced[k + 2]))
        carried_tokens.append(walk.carried("token"))  # what the step carries into the next
    host = []
    token, position = 7, 0
    for p in range(steps + 1):
        logits, carried = decoder.reference(token=token, position=position)
        assert logits.shape == (1, VOCAB)
        token, position = carried.token, carried.position
        if p > 0:
            host.append(token)
    assert device == host
    assert carried_tokens == host
    # A direct call returns the logits and the carried values too.
    logits, carried = step(token=3, position=0)
    assert carried["position"] == 1 and 0 <= carried.token < VOCAB


def test_leaving_a_loop_early_waits_out_its_runs():
    decoder = Decoder()
    decoder.load_state_dict(decoder_weights())
    step = decoder.compile()
    loop = iron.CarriedLoop(step, step, depth=4)
    seen = []
    for k in loop.run(50, token=1, position=0):
        seen.append(k)
        if k == 5:
            break
    assert seen == list(range(6))
    with pytest.raises(ValueError, match="depth is at least 1"):
        iron.CarriedLoop(step, step, depth=0)


# ---- the error contract's rows ----


class Net(iron.Graph):
    def __init__(self):
        super().__init__("net")
        self.cache = iron.state((4, 3))

    def body(self, x, *, rows: iron.Scratchpad, at_row: iron.Scratchpad = 0):
        self.cache[at_row] = F.copy(x[0])
        return F.silu(x[:rows])


class Lookup(iron.Graph):
    def __init__(self):
        super().__init__("lookup")
        self.table = iron.weight(np.zeros((5, 2), np.float32))

    def body(self, ids):
        return F.copy(self.table[ids])


def test_error_contract_rows(tmp_path):
    v = Net().compile(x=(2, 3))
    x = np.zeros((2, 3), np.float32)
    rows = [
        (ValueError, "input 'x' is (3, 3) f32; this version takes (2, 3) f32", lambda: v(np.zeros((3, 3), np.float32), rows=1)),
        (ValueError, "input 'x' is (2, 3) f16", lambda: v(np.zeros((2, 3), np.float16), rows=1)),
        (TypeError, "per-call value 'rows' is missing", lambda: v(x)),
        (TypeError, "no per-call value 'colums' (it takes: rows, at_row)", lambda: v(x, rows=1, colums=2)),
        (ValueError, "rows=2147483648 is outside 30 bits", lambda: v(x, rows=1 << 31)),
        (IndexError, "bound rows of axis 0", lambda: v(x, rows=3)),
        (IndexError, "index at_row of axis 0 of cache(4, 3) f32 is 4, outside [0, 4)", lambda: v(x, rows=1, at_row=4)),
        (IndexError, "id 5 at position 2 of input 'ids' is outside table's 5 rows [0, 5)",
         lambda: Lookup().compile(ids=((3,), np.int32))(np.array([0, 4, 5], np.int32))),
        (OSError, "cannot open", lambda: Net().load_state_dict(str(tmp_path / "absent.gguf"))),
        (TypeError, "per-call value 'rows' is an int", lambda: v(x, rows="1")),
        (TypeError, "expected an array", lambda: v("x", rows=1)),
    ]
    bad_op = tmp_path / "op.json"
    bad_op.write_text('{"entries": [{"operator": "Conv7", "tile_n": 8}]}')
    bad_field = tmp_path / "field.json"
    bad_field.write_text('{"entries": [{"operator": "GEMM", "tile_q": 8}]}')
    fifo = tmp_path / "model.fifo"
    os.mkfifo(fifo)
    rows += [
        (ValueError, "no operator 'Conv7' in the catalog", lambda: iron.Profile.load(str(bad_op))),
        (ValueError, "GEMM declares no field 'tile_q'", lambda: iron.Profile.load(str(bad_field))),
        (OSError, "is a FIFO, not a regular file", lambda: iron.models.load(fifo)),
    ]
    for kind, phrase, fn in rows:
        with pytest.raises(kind) as e:
            fn()
        assert phrase in str(e.value), (phrase, str(e.value))


def test_load_state_dict_names_every_fault():
    block = Block()
    w = mlp_weights()
    w["mlp.up"] = normal(255, 64)
    del w["norm"]
    w["extra.thing"] = normal(3)
    with pytest.raises(ValueError) as e:
        block.load_state_dict(w)
    msg = str(e.value)
    assert "missing norm" in msg and "extra extra.thing" in msg and "mlp.up" in msg, msg


def test_signature_errors():
    class Bad(iron.Graph):
        def body(self, x, *, n):
            return x

    with pytest.raises(TypeError, match="iron.Scratchpad or iron.Carried"):
        Bad().compile(x=(1, 4))

    class NoShape(iron.Graph):
        def body(self, x, y=None):
            return x if y is None else x + y

    g = NoShape()
    with pytest.raises(TypeError, match=r"shapes for \['x'\] missing"):
        g.compile(y=(1, 4))
    a = normal(1, 4)
    np.testing.assert_array_equal(g.compile(x=(1, 4))(a), a)  # the optional input left out
    np.testing.assert_allclose(g.compile(x=(1, 4), y=(1, 4))(a, a), 2 * a)
    assert g.versions == 2

    class HoldsArray(iron.Graph):
        def __init__(self):
            super().__init__()
            self.w = np.zeros(3, np.float32)

        def body(self, x):
            return x

    with pytest.raises(TypeError, match="wrap it in iron.param"):
        HoldsArray().compile(x=(1, 3))


# ---- profiles, precision, check mode, host steps ----


def test_profile_and_ambiguity(tmp_path):
    p = iron.Profile()
    p.add("GEMV", tile_n=16)
    path = tmp_path / "cpu.json"
    p.save(str(path))
    q = iron.Profile.load(str(path))
    assert len(q) == 1
    assert q.tunables_for("GEMV", K=64, N=64)["tile_n"] == 16
    q.add("GEMV", tile_n=32)  # as specific as the first, and disagreeing
    with pytest.raises(ValueError):
        q.tunables_for("GEMV", K=64, N=64)
    with pytest.raises(TypeError, match="declares no field"):
        p.add("GEMV", tile_q=1)


def test_profile_takes_the_specs_class_and_mapping():
    class GEMV:  # stands for the operator's class: a profile reads its name
        pass

    p = iron.Profile()
    p.add(GEMV, tile_n=16)
    assert p.tunables_for(GEMV, {"K": 64, "N": 64})["tile_n"] == 16
    assert p.tunables_for("GEMV", {"K": 64}, N=64)["tile_n"] == 16
    p.add(GEMV, tile_n=32)
    with pytest.raises(ValueError, match="ambiguous"):
        p.tunables_for(GEMV, {"K": 64, "N": 64})
    with pytest.raises(TypeError, match="mapping"):
        p.tunables_for(GEMV, 64)


def test_read_and_push_take_the_state_the_graph_holds():
    class Counter(iron.Graph):
        def __init__(self):
            super().__init__("counter")
            self.total = iron.state((4,))

        def body(self, x):
            self.total[0:4] = self.total[0:4] + x
            return F.copy(self.total[0:4])

    g = Counter()
    v = g.compile(x=(4,))
    one = np.ones(4, np.float32)
    v(one)
    v(one)
    total = v.read(g.total)  # the attribute itself, not its ._held
    assert np.array_equal(total, np.full(4, 2, np.float32))
    total[:] = 10
    v.push(g.total)
    assert np.array_equal(v(one), np.full(4, 11, np.float32))
    with pytest.raises(TypeError, match="param, weight or state"):
        v.read(one)


def test_precision_and_check_mode():
    x, w = normal(4, 32, scale=1), normal(16, 32, scale=1)

    class Proj(iron.Graph):
        def __init__(self, precision):
            super().__init__("proj")
            self.w = iron.param(w)
            self.precision = precision

        def body(self, x):
            return F.linear(x, self.w, precision=self.precision)

    # The spec's StrEnum: a name serves as well as the member, and gives the same bits.
    assert iron.Precision.HIGHEST == "highest" and iron.Precision("medium") is iron.Precision.MEDIUM
    assert isinstance(iron.Precision.HIGH, str)
    assert [p.value for p in iron.Precision] == ["highest", "high", "medium"]
    assert np.array_equal(Proj("medium").compile(x=(4, 32))(x), Proj(iron.Precision.MEDIUM).compile(x=(4, 32))(x))
    with pytest.raises(ValueError, match="fastest"):
        Proj("fastest").compile(x=(4, 32))

    want = x.astype(np.float64) @ w.T.astype(np.float64)
    # check=True compares every step with its operator's reference, raising outside tolerance.
    got = Proj(iron.Precision.HIGHEST).compile(x=(4, 32), check=True)(x)
    np.testing.assert_allclose(got, want, atol=1e-4)
    got = Proj(iron.Precision.MEDIUM).compile(x=(4, 32))(x)  # bf16 inputs: rounded further
    np.testing.assert_allclose(got, want, atol=0.1)
    assert np.abs(got - want).max() > 1e-6


def test_on_host_with_a_python_callable():
    seen = []

    class Host(iron.Graph):
        def __init__(self):
            super().__init__("host")
            self.buf = iron.state((1, 4))

        def body(self, x):
            y = F.silu(x)

            def double(src, dst):
                seen.append(src.copy())
                dst[...] = 2 * src

            iron.on_host(double, y, writes=(self.buf,))
            return F.copy(self.buf)

    g = Host()
    x = normal(1, 4, scale=1)
    silu = x / (1 + np.exp(-x))
    np.testing.assert_allclose(g.compile(x=(1, 4))(x), 2 * silu, atol=1e-6)
    np.testing.assert_allclose(seen[-1], silu, atol=1e-6)


def test_affine_arithmetic_and_clamp():
    class Window(iron.Graph):
        def body(self, x, *, start: iron.Scratchpad):
            return F.copy(x[iron.clamp(start * 2 + 1, 0, 6)])

    g = Window()
    v = g.compile(x=(8, 3))
    x = normal(8, 3, scale=1)
    for start in (0, 1, 2, 5):
        np.testing.assert_array_equal(v(x, start=start), x[min(start * 2 + 1, 6)])


# ---- threads ----


def test_two_threads_call_two_graphs_at_once():
    blocks = [Block(), Block()]
    for b in blocks:
        b.load_state_dict(mlp_weights())
    versions = [b.compile(x=(8, 64)) for b in blocks]
    xs = [normal(8, 64, scale=1) for _ in blocks]
    wants = [b.reference(x, rows=8) for b, x in zip(blocks, xs)]
    errors = []

    def work(i):
        try:
            for _ in range(200):
                y = versions[i](xs[i], rows=8)
                if np.abs(y - wants[i]).max() > 1e-4:
                    errors.append(f"thread {i}: wrong output")
                    return
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_handle_at_walks_in_place():
    class Walk(iron.Graph):
        def __init__(self):
            super().__init__("walk")
            self.cache = iron.weight(np.arange(24, dtype=np.float32).reshape(4, 6))

        def body(self, x, *, n: iron.Scratchpad):
            # Column 1 of every row, then the leading n of them: a strided walk, copied dense.
            col = self.cache.at(iron.AccessPattern(1, [4], [6]), [4], bounds={0: n})
            return F.copy(col) + x

    g = Walk()
    v = g.compile(x=(4,))
    x = np.zeros(4, np.float32)
    np.testing.assert_array_equal(v(x, n=4), [1, 7, 13, 19])
    np.testing.assert_array_equal(v(x, n=2), [1, 7])
    np.testing.assert_array_equal(g.reference(x, n=2), [1, 7])


def test_nothing_past_a_walks_length_is_returned():
    class Walk(iron.Graph):
        def body(self, x, *, n: iron.Scratchpad):
            return F.copy(x.at(iron.AccessPattern(0, [4, 8], [8, 1]), (4, 8), bounds={0: 4}, length=n))

    g = Walk()
    v = g.compile(x=(4, 8))
    x = np.arange(1, 33, dtype=np.float32).reshape(4, 8)
    # A longer call first: the device moves only `length` entries, so a shorter call after it
    # would find the longer one's past its length; results are cut to the length instead.
    np.testing.assert_array_equal(v(x, n=3), x[:, :3])
    for copy in (True, False):
        got = v(x, n=1, copy=copy)
        np.testing.assert_array_equal(got, x[:, :1])
        assert got.flags.c_contiguous == copy  # a copy is dense; a view walks the version's memory
    np.testing.assert_array_equal(g.reference(x, n=1), x[:, :1])


def test_an_error_raised_in_body_arrives_as_itself():
    class Raises(iron.Graph):
        def body(self, x):
            raise KeyError("from body")

    with pytest.raises(KeyError, match="from body"):
        Raises().compile(x=(1, 4))


def test_a_child_graph_records_in_its_parent():
    class Inner(iron.Graph):
        def __init__(self):
            super().__init__("inner")
            self.w = iron.param(4, 4)

        def body(self, x, *, rows: iron.Scratchpad):
            return F.linear(x[:rows], self.w)

    class Outer(iron.Graph):
        def __init__(self):
            super().__init__("outer")
            self.inner = Inner()

        def body(self, x, *, n: iron.Scratchpad):
            return F.silu(self.inner(x, rows=n))

    g = Outer()
    w = normal(4, 4, scale=1)
    g.load_state_dict({"inner.w": w})
    x = normal(3, 4, scale=1)
    y = (x[:2].astype(np.float64) @ w.T.astype(np.float64))
    np.testing.assert_allclose(g.compile(x=(3, 4))(x, n=2), y / (1 + np.exp(-y)), atol=1e-5)


def test_a_graph_without_super_init_and_shapes_with_dtypes():
    class Plain(iron.Graph):
        def body(self, ids):
            return F.copy(ids)

    g = Plain()
    assert g.name == "Plain"
    v = g.compile(ids=[(3,), np.int32])
    ids = np.array([4, 5, 6], np.int32)
    got = v(ids)
    assert got.dtype == np.int32 and got.tolist() == [4, 5, 6]


def test_compile_feeds_another_version():
    class Count(iron.Graph):
        def body(self, x=None, *, position: iron.Carried):
            if x is None:
                return F.scalar(position), iron.carry(position=position + 1)
            return F.copy(x), iron.carry(position=position + 10)

    g = Count()
    step = g.compile()
    first = g.compile(x=(1, 4), feeds=step)  # its carried values become step's
    first(np.zeros((1, 4), np.float32), position=5)
    value, carried = step()  # no value from the host: step starts where first left it
    assert value.tolist() == [15] and carried.position == 16
    with pytest.raises(TypeError):
        g.compile(x=(1, 4), feeds="step")


def test_start_runs_a_call_while_python_goes_on():
    block = Block()
    block.load_state_dict(mlp_weights())
    v = block.compile(x=(32, 64))
    x = normal(32, 64, scale=1)
    want = v(x, rows=17)
    run = iron.Run()
    assert not run.done()
    assert v.start(run, x.copy(), rows=17) is None  # the run holds the array it reads
    np.testing.assert_array_equal(run.wait(), want)
    assert run.done()
    want = v(x, rows=5)
    v.start(run, x, rows=5)  # a run may be started again
    np.testing.assert_array_equal(run.wait(copy=False), want)
    v.start(iron.Run(), x, rows=3)  # dropped unwaited: it waits out its call first
    with pytest.raises(TypeError, match="iron.Run"):
        v.start(x, rows=5)
    with pytest.raises(ValueError, match="never started"):
        iron.Run().wait()


def test_started_runs_run_in_order_on_the_device_thread():
    seen = threading.Event()
    went_on = []

    class Count(iron.Graph):
        def __init__(self):
            super().__init__("count")
            self.held = iron.state((1,))

        def body(self, *, position: iron.Carried):
            # A host step of a started run runs on the device's thread: it waits for Python to go
            # on past start(), which a start() that waited would never do.
            iron.on_host(lambda held: went_on.append(seen.wait(10)), self.held)
            return F.scalar(position), iron.carry(position=position + 1)

    g = Count()
    v = g.compile()
    runs = [iron.Run() for _ in range(3)]
    v.start(runs[0], position=5)
    for r in runs[1:]:
        v.start(r)  # each run starts where the one before it left its carried value
    seen.set()
    assert [r.wait()[1].position for r in runs] == [6, 7, 8]
    assert went_on == [True, True, True]


def test_a_started_runs_error_arrives_at_wait():
    g = Block()
    g.load_state_dict(mlp_weights())
    v = g.compile(x=(32, 64))
    run = iron.Run()
    v.start(run, normal(32, 64), rows=33)  # past the 32 rows x has
    with pytest.raises(IndexError, match="rows"):
        run.wait()
    np.testing.assert_array_equal(v(normal(32, 64), rows=0), np.zeros((0, 64), np.float32))


@pytest.mark.parametrize("how", ["call", "inline", "directory"])
def test_a_child_graphs_profile_applies_where_it_is_called_or_inlined(tmp_path, how):
    p = iron.Profile()
    p.add("GEMM", N=8, tile_n=2)
    p.save(str(tmp_path / "cpu.json"))

    class Inner(iron.Graph):
        def __init__(self):
            super().__init__("inner")
            self.w = iron.param(8, 4)
            self.profile = str(tmp_path) if how == "directory" else p

        def body(self, x):
            return self.project(x)

        def project(self, x):
            return F.linear(x, self.w)

    class Outer(iron.Graph):
        def __init__(self):
            super().__init__("outer")
            self.inner = Inner()
            self.w = iron.param(8, 4)  # the outer's own matmul, under no profile

        def body(self, x, y):
            a = self.inner.inline(self.inner.project, x) if how == "inline" else self.inner(x)
            return a, F.linear(y, self.w)

    g = Outer()
    w = normal(8, 4, scale=1)
    g.load_state_dict({"inner.w": w, "w": w})
    steps = g.compile(x=(3, 4), y=(3, 4)).describe().splitlines()[1:]
    assert [("tile_n=2" in s) for s in steps] == [True, False], steps
    with pytest.raises(TypeError, match="records into a graph's body"):
        g.inner.inline(g.inner.project, None)
