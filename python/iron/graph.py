"""Graphs, modules and what they hold, by the spec's names, over iron::Graph.

``body``'s positional parameters are the inputs (one defaulting to None may be left out), its
keyword-only ones annotated ``iron.Scratchpad`` or ``iron.Carried`` the per-call values (a
default makes a scratchpad optional), its return the outputs, then ``iron.carry(...)``. Params,
weights and states are held by attribute path: ``self.layers[3].q`` is ``layers.3.q``.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import os
import typing
from typing import Any

import numpy as np

from . import _iron

# ---- precision ----


class Precision(enum.StrEnum):
    """The roundings a matmul may make beyond its reference's, named as
    ``torch.set_float32_matmul_precision`` names them (``Precision.HIGHEST == "highest"``): each
    level allows the one above's and more, and a matmul takes the fastest kernel its level allows.

    - HIGHEST: f32 partial sums, rounded once to the output's type.
    - HIGH: partial sums rounded to the output's type per K tile (or inputs rounded to bf16).
    - MEDIUM: inputs rounded to a block format (bf16 pairs, int8 blocks) where the device has it.
    """

    HIGHEST = "highest"
    HIGH = "high"
    MEDIUM = "medium"


# ---- dtypes ----

_NUMPY_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "int32": "i32", "int8": "i8"}


def _dtype(d) -> _iron.DType:
    """An iron.DType from a DType, a name ("bf16", "q4_1") or a numpy dtype."""
    if isinstance(d, _iron.DType):
        return d
    if isinstance(d, str):
        return _iron.DType.keep if d == "keep" else _iron.dtype_from_name(d)
    name = np.dtype(d).name
    if name not in _NUMPY_DTYPES:
        raise TypeError(f"dtype {name} is not one IRON holds (float32, float16, bfloat16, int32, int8)")
    return _iron.dtype_from_name(_NUMPY_DTYPES[name])


def _array(a) -> np.ndarray:
    """A C-contiguous array of a type IRON takes: float64 is cast to float32 and int64 to int32,
    as torch's copy_ casts into a float32 or int32 param."""
    a = np.ascontiguousarray(a)
    if a.dtype == np.float64:
        a = a.astype(np.float32)
    elif a.dtype == np.int64:
        a = a.astype(np.int32)
    return a


# ---- what modules hold ----


class _HandleLike:
    """What a body reads as a handle: indexing, + - * / @, reshape, transpose, shape."""

    def _handle(self) -> _iron.Handle:
        raise NotImplementedError

    def __getitem__(self, key):
        return self._handle()[_key(key)]

    def __setitem__(self, key, value):
        self._handle()[_key(key)] = _h(value)

    def reshape(self, *shape):
        return self._handle().reshape(*shape)

    def at(self, tap, shape, **kwargs):
        return self._handle().at(tap, shape, **kwargs)

    def transpose(self, *axes):
        return self._handle().transpose(*axes)

    @property
    def T(self):
        return self._handle().T

    def __add__(self, o):
        return self._handle() + _h(o)

    def __radd__(self, o):
        return _h(o) + self._handle()

    def __sub__(self, o):
        return self._handle() - _h(o)

    def __rsub__(self, o):
        return _h(o) - self._handle()

    def __mul__(self, o):
        return self._handle() * _h(o)

    def __rmul__(self, o):
        return _h(o) * self._handle()

    def __truediv__(self, o):
        return self._handle() / _h(o)

    def __rtruediv__(self, o):
        return _h(o) / self._handle()

    def __matmul__(self, o):
        return self._handle() @ _h(o)

    def __rmatmul__(self, o):
        return _h(o) @ self._handle()


class _Held(_HandleLike):
    _kind = "param"

    def __init__(self, shape, dtype, array=None):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = _dtype(dtype)
        self.array = array
        self._held = None

    def _handle(self):
        if self._held is None:
            raise TypeError(f"a {self._kind} used before its graph declared it (is it held by a graph?)")
        return self._held.handle()

    def __repr__(self):
        return f"iron.{type(self).__name__}({self.shape}, {_iron.dtype_name(self.dtype)})"


class Param(_Held):
    """A weight a graph holds, as torch's nn.Parameter: declared by shape, bound by
    Graph.load_state_dict (or holding an array already)."""


class Weight(_Held):
    """A tensor a graph's body indexes per call (``iron.weight(table)[ids]``)."""

    _kind = "weight"


class State(_Held):
    """Device-resident state a graph holds (a KV cache), zero at first."""

    _kind = "state"


def param(*shape, dtype=np.float32) -> Param:
    """Declare a weight a graph holds, as torch's ``nn.Parameter``.

    Declared by shape for ``Graph.load_state_dict`` to bind, or ``param(array)`` holding
    ``array``. The default dtype is float32, as the C++ API's (the spec's is bfloat16; see
    docs/design.md); ``dtype=iron.keep`` keeps a checkpoint's quantised type.
    """
    if len(shape) == 1 and isinstance(shape[0], np.ndarray):
        a = _array(shape[0])
        return Param(a.shape, a.dtype, a)
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return Param(shape, dtype)


def state(shape, dtype=np.float32, name=None) -> State:
    """Declare device-resident state a graph holds (zero at first); float32 by default. ``name``
    is taken for the spec's signature and unused: the attribute path names a state."""
    del name  # the attribute path names it
    return State(shape if isinstance(shape, (tuple, list)) else (shape,), dtype)


def weight(array) -> Weight:
    """Return a tensor a graph's body indexes per call (``iron.weight(table)[ids]``)."""
    a = _array(array)
    return Weight(a.shape, a.dtype, a)


def _h(x):
    """A C++ handle of a handle, a held param/weight/state, or a Graph input."""
    if isinstance(x, _iron.Handle):
        return x
    if isinstance(x, _HandleLike):
        return x._handle()
    raise TypeError(f"expected a handle, got {type(x).__name__}")


def _key(key):
    """A key with held things as handles (table[ids] with ids a param)."""
    if isinstance(key, tuple):
        return tuple(_h(k) if isinstance(k, _HandleLike) else k for k in key)
    return _h(key) if isinstance(key, _HandleLike) else key


class Module:
    """A container of params, weights, states and child modules, addressed by attribute path
    like a torch state dict. Any object a graph holds is walked the same way; deriving from
    Module only says so."""


class Carry(dict):
    """The next value of each carried value, by name (also as attributes)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class _CarryDecl:
    def __init__(self, items):
        self.items = items


def carry(**next_values) -> _CarryDecl:
    """Return with a graph's outputs the next value of each carried value:
    ``return logits, iron.carry(token=sampled, position=position + 1)``."""
    return _CarryDecl(next_values)


def on_host(fn, *reads, writes=()) -> None:
    """Run ``fn(*reads, *writes)`` on the host between the steps around it, with numpy views of
    ``reads`` (cut to their bounds, read-only) then ``writes`` (parts of states, writable),
    valid during the call. A graph with one has no device loop."""
    _iron.on_host(fn, [_h(r) for r in reads], [_h(w) for w in writes])


_SKIP = (str, bytes, int, float, bool, complex, type(None), _iron.Handle, _iron.PerCall, _iron.Affine,
         _iron.Profile)


def _walk_declare(g, cpp, mod, name, value, seen, parent_is_root):
    """Declares `value`, held at `name` of C++ module `mod`, and what it holds."""
    if isinstance(value, _Held):
        if id(value) in seen:
            value_held = seen[id(value)]
            mod.tie(name, value_held._held)
            return
        seen[id(value)] = value
        if isinstance(value, Param):
            value._held = (mod.param_value(name, value.array) if value.array is not None
                           else mod.param(name, list(value.shape), value.dtype))
        elif isinstance(value, Weight):
            value._held = mod.weight(name, value.array)
        else:
            value._held = mod.state(name, list(value.shape), value.dtype)
        return
    if isinstance(value, np.ndarray):
        raise TypeError(f"{g.name}: {name} is an array, not a weight: wrap it in iron.param")
    if isinstance(value, _SKIP) or inspect.isroutine(value) or inspect.isclass(value) or inspect.ismodule(value):
        return
    if isinstance(value, (list, tuple, dict)):
        items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
        if not any(_holds(v) for _, v in items):
            return
        if id(value) in seen:
            return
        seen[id(value)] = value
        child = cpp.child(name) if parent_is_root else cpp.child_of(mod, name)
        for k, v in items:
            _walk_declare(g, cpp, child, str(k), v, seen, False)
        return
    if hasattr(value, "__dict__") and _holds(value):
        if id(value) in seen:
            return
        seen[id(value)] = value
        child = cpp.child(name) if parent_is_root else cpp.child_of(mod, name)
        for k, v in vars(value).items():
            if not k.startswith("_"):
                _walk_declare(g, cpp, child, k, v, seen, False)


def _holds(value, depth=0) -> bool:
    """Whether `value` holds a param, weight or state at any depth."""
    if depth > 32:
        return False
    if isinstance(value, _Held):
        return True
    if isinstance(value, _SKIP) or inspect.isroutine(value) or inspect.isclass(value):
        return False
    if isinstance(value, (list, tuple)):
        return any(_holds(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return any(_holds(v, depth + 1) for v in value.values())
    if hasattr(value, "__dict__") and not inspect.ismodule(value):
        return any(_holds(v, depth + 1) for k, v in vars(value).items() if not k.startswith("_"))
    return False


def _flatten(tree, prefix=""):
    """(dotted path, array) of a dict of arrays, nested dicts joined by dots."""
    for k, v in tree.items():
        if isinstance(v, dict):
            yield from _flatten(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", _array(v)


def _value_kind(ann):
    """The class a per-call value's annotation names: iron.Scratchpad or iron.Carried, bare or
    in the spec's subscripted form (``iron.Scratchpad[int]``, an ``Annotated`` alias), else
    the annotation as it is."""
    if typing.get_origin(ann) is typing.Annotated:
        marks = ann.__metadata__
        if "scratchpad" in marks or _iron.Scratchpad in marks:
            return _iron.Scratchpad
        if "carried" in marks or _iron.Carried in marks:
            return _iron.Carried
    return ann


@dataclasses.dataclass(frozen=True)
class GraphStats:
    """What ``Graph.stats()`` reports: the versions compiled, the arena's scratch and states,
    every version's outputs (bytes), and each weight uploaded by the path the graph holds it at
    with how often (once, unless ``release()`` freed it since; none before a version's first
    call or ``load()``). ``str()`` gives the report as text."""

    versions: int
    scratch_bytes: int
    state_bytes: int
    output_bytes: int
    uploads: dict[str, int]
    text: str = dataclasses.field(repr=False)

    def __str__(self) -> str:
        return self.text


class Graph(Module):
    """A graph: a subclass whose ``body`` is recorded on handles, once per input shape.

    ``body``'s positional parameters are the inputs (one defaulting to None may be left out),
    its keyword-only ones the per-call values (annotated ``iron.Scratchpad`` or
    ``iron.Carried``), its return the outputs (then ``iron.carry(...)``). Weights and states
    are what it holds, by attribute path (``self.layers[3].q`` is ``layers.3.q``). Held as
    another graph's attribute, its params are that graph's at that path, and calling it in
    that graph's body records its body there. Its ``profile`` attribute, an ``iron.Profile`` or
    a file or directory of ``<device>.json``, gives its steps' tunables, in its own versions and
    where another graph calls or inlines it (that graph's profile gives the rest).

    Where it departs from the spec's Graph: Graph.record is not bound (its Recording is the C++
    planner's input; a version's ``describe()`` and the graph's ``stats()`` show what was recorded
    and planned). ``compile()`` takes ``device``, a name, and ``threads`` where the spec takes
    ``dev``, a Device object, and ``full_elf``: the packaging is derived (one program a version,
    one dispatch a step under ``check=True`` or around a host step), so there is nothing to choose.
    ``reference(dev=...)`` is not taken either: there is no Python Device, and the reference runs
    on the host. ``held()`` gives the dotted paths, where the spec's gives ``{id: (path, object)}``.
    """

    def __init__(self, name: str | None = None):
        """A graph named ``name`` (its class's name by default), as the C++ Graph(name)."""
        self.name = name or type(self).__name__

    @property
    def name(self) -> str:
        """The graph's name in messages and logs (its class's name unless given)."""
        return vars(self).get("_name") or type(self).__name__

    @name.setter
    def name(self, value: str) -> None:
        self._name = value

    # -- what body takes --

    def signature(self) -> inspect.Signature:
        """Return the inputs and per-call values ``body`` takes, ``self`` left out."""
        sig = inspect.signature(type(self).body, eval_str=True)
        return sig.replace(parameters=list(sig.parameters.values())[1:])

    def _parameters(self):
        if "_params" in vars(self):
            return self._params
        inputs, optional, values = [], set(), []
        for p in self.signature().parameters.values():
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                inputs.append(p.name)
                if p.default is None:
                    optional.add(p.name)
                elif p.default is not p.empty:
                    raise TypeError(f"{self.name}: input {p.name} may default to None only")
            elif p.kind == p.KEYWORD_ONLY:
                ann = _value_kind(p.annotation)
                if ann is _iron.Carried:
                    if p.default is not p.empty:
                        raise TypeError(f"{self.name}: carried value {p.name} takes no default")
                    values.append((p.name, "carried", None))
                elif ann is _iron.Scratchpad:
                    values.append((p.name, "scratchpad", None if p.default is p.empty else int(p.default)))
                else:
                    raise TypeError(f"{self.name}: per-call value {p.name} must be annotated "
                                    "iron.Scratchpad or iron.Carried")
            else:
                raise TypeError(f"{self.name}: body takes no *args or **kwargs ({p.name})")
        self._params = (inputs, optional, values)
        return self._params

    # -- the C++ graph, declared on first use --

    def _graph(self):
        cpp = vars(self).get("_cpp")
        if cpp is not None:
            return cpp
        inputs, optional, values = self._parameters()
        cpp = _iron._Graph(self.name, self)
        for n in inputs:
            cpp.input(n, n in optional)
        for n, kind, default in values:
            if kind == "carried":
                cpp.carried(n)
            else:
                cpp.scratchpad(n, default)
        seen: dict[int, Any] = {}
        for k, v in vars(self).items():
            if not k.startswith("_"):
                if isinstance(v, Graph):
                    v._parameters()  # a child graph's body is recorded in this one's
                _walk_declare(self, cpp, cpp, k, v, seen, True)
        self._cpp = cpp
        profile = vars(self).get("profile")
        if isinstance(profile, _iron.Profile):
            cpp.set_profile(profile)
        elif isinstance(profile, (str, os.PathLike)):
            cpp.set_profile_path(os.fspath(profile))
        return cpp

    def _iron_body(self, inputs, values):
        """Called by the C++ graph while it records: body on these handles and values."""
        _, _, decls = self._parameters()
        result = self.body(*inputs, **{d[0]: v for d, v in zip(decls, values)})
        items = list(result) if isinstance(result, (tuple, list)) else [result]
        carried = []
        if items and isinstance(items[-1], _CarryDecl):
            for n, v in items.pop().items.items():
                if isinstance(v, _iron.PerCall):
                    v = _iron.Affine(v)
                elif isinstance(v, int):
                    v = _iron.Affine(v)
                elif isinstance(v, _HandleLike):
                    v = v._handle()
                carried.append((n, v))
        return [_h(t) for t in items], carried

    def __call__(self, *inputs, **values):
        """Called in another graph's body: records this graph's body there."""
        _, _, decls = self._parameters()
        given = dict(values)
        args = {}
        for n, kind, default in decls:
            if n in given:
                args[n] = given.pop(n)
            elif default is not None:
                args[n] = default
        if given:
            raise TypeError(f"{self.name}: no per-call value {sorted(given)}")
        return self._record_under_own_profile(f"{self.name}: a call of a graph", self.body, *inputs, **args)

    def _own_profile(self) -> _iron.Profile:
        """``profile`` as an iron.Profile: one given, or the CPU's of a file or directory of
        ``<device>.json`` (loaded once); an empty one where there is none."""
        profile = vars(self).get("profile")
        if isinstance(profile, _iron.Profile):
            return profile
        if isinstance(profile, (str, os.PathLike)):
            path = os.fspath(profile)
            loaded = vars(self).get("_profile_loaded")
            if loaded is None or loaded[0] != path:
                loaded = self._profile_loaded = (path, _iron._profile_for_device(path, "cpu"))
            return loaded[1]
        if profile is not None:
            raise TypeError(f"{self.name}: profile is an iron.Profile or a file or directory of <device>.json, "
                            f"not {type(profile).__name__}")
        return _iron.Profile()

    def _record_under_own_profile(self, what, fn, /, *args, **kwargs):
        """``fn(*args, **kwargs)`` recorded into the graph being recorded under this graph's profile
        (where it has one); TypeError naming ``what`` when no body is being recorded."""
        return _iron._record_under(self._own_profile(), what, lambda: fn(*args, **kwargs))

    # -- weights --

    def load_state_dict(self, tree, *, path: str = "") -> None:
        """Bind each param held, at any depth, to its tensor in ``tree``: a dict of arrays
        (nested dicts joined by dots), an ``iron.StateDict`` (a checkpoint's tensors in their own,
        maybe quantised, types) or a safetensors/GGUF file's path, at ``path`` plus the
        param's dotted path, cast as torch's ``copy_``. One ValueError names every missing,
        extra, wrong-shape and wrong-kind path; an unreadable file is an OSError."""
        cpp = self._graph()
        if isinstance(tree, (str, os.PathLike)):
            cpp.load_checkpoint(os.fspath(tree), path)
        elif isinstance(tree, _iron.StateDict):
            cpp.load_tensors(tree, path)
        else:
            cpp.load_state_dict(list(_flatten(tree)), path)

    def held(self) -> list[str]:
        """The dotted path of each param, weight and state held."""
        return list(self._graph().held_paths())

    # -- versions --

    def compile(self, *, check: bool = False, threads: int = 0, device: str = "", feeds=None, **shapes):
        """Compile and return the version for these input shapes: each input's shape, or
        ``(shape, dtype)``. ``check`` runs each step on its own and raises at the first outside
        its tolerance; ``threads`` caps the CPU device's threads (0: every CPU this process may
        use); ``device`` is "cpu" or "vulkan" (empty: where the graph's versions are, else the
        CPU); ``feeds`` is the version this one's Emit starts (by default itself). The version is
        called with numpy arrays and per-call values by name."""
        cpp = self._graph()
        inputs, optional, _ = self._parameters()
        missing = [n for n in inputs if n not in shapes and n not in optional]
        unknown = [n for n in shapes if n not in inputs]
        if missing or unknown:
            raise TypeError(f"{self.name}: shapes for {missing} missing"
                            + (f"; {unknown} are not inputs" if unknown else ""))
        given = []
        for n in inputs:
            s = shapes.get(n)
            if s is None:
                continue
            if isinstance(s, (tuple, list)) and len(s) == 2 and isinstance(s[0], (tuple, list)):
                shape, dtype = s
            else:
                shape, dtype = s, np.float32
            given.append((n, [int(d) for d in shape], _dtype(dtype)))
        return cpp.compile(given, check, threads, device, feeds)

    def reference(self, *tensors, **values):
        """Run the body on the host, each step through its operator's reference(): numpy
        arrays of the outputs cut to their bounds on every axis, as a version's call returns
        them (then the Carry, if the graph carries)."""
        return self._graph().reference(*[_array(t) for t in tensors], **values)

    @property
    def versions(self) -> int:
        return self._graph().versions

    def stats(self) -> GraphStats:
        """The versions compiled, the arena's bytes and each weight's uploads by the path the
        graph holds it at; ``str()`` of it is the C++ report."""
        return GraphStats(**self._graph().stats())

    def release(self) -> None:
        """Free the memory this graph's versions and arena hold; a later call loads them again."""
        self._graph().release()

    def inline(self, method, /, *args, **kwargs):
        """Record ``method(*args, **kwargs)``, one of this graph's methods, into the graph being
        recorded: its steps join that graph's, under this graph's profile where it has one (else
        under that graph's). TypeError when no graph's body is being recorded."""
        return self._record_under_own_profile(f"{self.name}: inline()", method, *args, **kwargs)

    def body(self, *args, **kwargs):  # pragma: no cover - subclasses define it
        raise NotImplementedError(f"{type(self).__name__} defines no body")


class CarriedLoop:
    """A graph's carried values looped on the device: ``first`` runs once from the host, then
    ``body`` step after step, each run's Emit writing the next run's values, with up to
    ``depth`` runs ahead of the host. Iterating waits with the GIL released. ``first``,
    ``body`` and ``depth`` are kept as attributes, as the spec's are."""

    def __init__(self, first, body, depth: int = 2):
        """Programs first's Emit to feed body, and body's to feed itself."""
        if depth < 1:
            raise ValueError(f"depth is at least 1, got {depth}")
        self._loop = _iron._CarriedLoop(first, body, depth)
        self.first, self.body = first, body

    def start(self, *tensors, **values):
        """Runs ``first`` on these tensors and values, waits for it, and returns its result."""
        return self._loop.start(*tensors, **values)

    def steps(self, steps: int):
        """Yields each step's index once that run is complete; ``carried(name)`` on what it
        returns gives what a carried value became in the step last yielded."""
        return self._loop.steps(steps)

    def run(self, steps: int, /, *tensors, **values):
        """start(), then ``steps`` steps."""
        self.start(*tensors, **values)
        return self.steps(steps)

    @property
    def depth(self) -> int:
        return self._loop.depth
