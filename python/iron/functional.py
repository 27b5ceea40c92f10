"""Functions for a graph's body, under torch.nn.functional's names (iron::functional).

Each records the operator steps that compute it and returns their handle. Weights are a
checkpoint's ``(out, in)``, as ``torch.nn.Linear`` stores them. A handle's own ``+ - * /`` are
steps too, and ``@`` of one row.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from . import _iron
from ._iron import Handle
from .graph import Precision, State
from .graph import _HandleLike, _dtype, _h

_F = _iron.functional


def _opt(x):
    return None if x is None else _h(x)


def linear(x, weight, bias=None, *, precision: Precision = Precision.HIGHEST, into=None, **gemv) -> Handle:
    """Return ``x @ weight.T``, plus ``bias`` on every row if given.

    ``weight`` is ``(out, in)``. One row runs on GEMV (always rounded once from f32 sums); several
    rows on ProjectionGEMM at ``precision``, or GEMM at HIGHEST. With ``into`` (a dense view of as
    many elements, e.g. a KV-cache window) the result is written there. ``**gemv``: GEMV's
    tunables. Raises ValueError for ``x`` of another rank or GEMV tunables for several rows.
    """
    return _F.linear(_h(x), _h(weight), _opt(bias), Precision(precision), gemv, _opt(into))


def linear_residual(x, weight, residual, *, precision: Precision = Precision.HIGHEST) -> Handle:
    """``residual + x @ weight.T`` in one step (the matmul adds it before its one rounding)."""
    return _F.linear_residual(_h(x), _h(weight), _h(residual), Precision(precision))


def rms_norm(x, normalized_shape, weight=None, eps: float | None = None) -> Handle:
    """``x`` over the RMS of its last axis, times ``weight`` if given; ``eps`` None is ``x``'s
    dtype's machine epsilon, as torch's. ValueError if ``normalized_shape`` is not the last axis."""
    n = normalized_shape if isinstance(normalized_shape, int) else normalized_shape[-1]
    return _F.rms_norm(_h(x), int(n), _opt(weight), eps)


def layer_norm(x, normalized_shape, weight=None, bias=None, eps: float = 1e-5) -> Handle:
    """Layer-normalize ``x`` over its last axis, as torch's ``layer_norm``."""
    n = normalized_shape if isinstance(normalized_shape, int) else normalized_shape[-1]
    return _F.layer_norm(_h(x), int(n), _opt(weight), _opt(bias), float(eps))


def silu(x) -> Handle:
    """SiLU, ``x * sigmoid(x)``, as torch's."""
    return _F.silu(_h(x))


def gelu(x, approximate: str = "none") -> Handle:
    """GELU, exact by default as torch's, or by its tanh approximation (``approximate="tanh"``)."""
    return _F.gelu(_h(x), approximate)


def rope(x, angles, mode: str = "adjacent") -> Handle:
    """``x`` ``(rows, head_dim)`` or ``(rows, heads, head_dim)`` turned by RoPE, a row of
    ``angles`` ``(rows, head_dim / 2)`` per row; ``mode`` "adjacent" pairs (2i, 2i+1), "halves"
    (i, i + head_dim / 2)."""
    return _F.rope(_h(x), _h(angles), mode)


def rope_cos_sin(x, table, mode: str = "adjacent", into=None) -> Handle:
    """As rope(), with a table of cosines then sines ``(rows, head_dim)``."""
    return _F.rope_cos_sin(_h(x), _h(table), mode, _opt(into))


def silu_mul(gate, up) -> Handle:
    """``silu(gate) * up`` in one step (a SwiGLU feed-forward's middle)."""
    return _F.silu_mul(_h(gate), _h(up))


def gelu_tanh_mul(gate, up) -> Handle:
    """``gelu(gate, "tanh") * up`` in one step (Gemma's GeGLU feed-forward's middle), with the
    bits of those two steps."""
    return _F.gelu_tanh_mul(_h(gate), _h(up))


def softmax(x, dim: int = -1, *, scale: float = 1.0) -> Handle:
    """Softmax over the last axis of ``scale * x``; entries past its per-call bound are zero."""
    if dim not in (-1, len(_h(x).shape) - 1):
        raise ValueError(f"softmax(): over the last axis only, not dim={dim}")
    return _F.softmax(_h(x), float(scale))


def argmax(logits) -> Handle:
    """The index of the largest entry of a row of logits, as a one-element int32."""
    return _F.argmax(_h(logits))


def _sample_fixed(logits, temperature: float, top_k: int, top_p: float, seed: int, step, position) -> Handle:
    return _F.sample(_h(logits), float(temperature), int(top_k), float(top_p), int(seed), step, position)


def _sample_row(logits, settings, step, position) -> Handle:
    return _F.sample(_h(logits), _h(settings), step, position)


def sample(logits, *args, **kwargs) -> Handle:
    """A token drawn from a row of logits (one-element int32): the ``top_k`` most likely (0:
    all), cut to the smallest set reaching ``top_p``, softmax at ``temperature`` (0: greedy),
    one draw keyed by ``seed`` mixed with the per-call ``step`` and ``position``.

    ``sample(logits, temperature, top_k, top_p, seed, step, position)`` fixes the settings when
    the graph is compiled; ``sample(logits, settings, step, position)`` reads them each call from
    ``settings``, a ``(16,)`` int32 handle (an input fed a sample_settings() row, or a state), so
    one version serves any settings and draws as the fixed ones would.
    """
    row = "settings" in kwargs or (bool(args) and isinstance(args[0], (Handle, _HandleLike)))
    return (_sample_row if row else _sample_fixed)(logits, *args, **kwargs)


def scalar(*terms) -> Handle:
    """The sum of per-call expressions as a one-element int32 (a carried value of two values)."""
    return _F.scalar([_iron.Affine(t) if isinstance(t, (int, _iron.PerCall)) else t for t in terms])


def attention(q, k_cache, v_cache, start, scale: float | None = None, window: int = 0, *,
              precision: Precision = Precision.HIGHEST) -> Handle:
    """Causal grouped-query attention of ``q`` ``(rows, heads, head_dim)`` over the caches
    ``(ctx, kv_heads, head_dim)``; row r of q sits at position ``start + r``. ``scale`` None is
    ``1 / sqrt(head_dim)``; a sliding ``window`` > 0 attends to that many positions. At MEDIUM the
    CPU may round a decode step's queries to q8_0 blocks over q8_0 caches (int8 products)."""
    return _F.attention(_h(q), _h(k_cache), _h(v_cache), start, scale, int(window), Precision(precision))


def copy(x, dtype=None) -> Handle:
    """A dense copy of any view (strided, gathered), optionally cast to ``dtype``."""
    return _F.copy(_h(x), None if dtype is None else _dtype(dtype))


def segment_attention(q, k, v, lengths, segment: int, scale: float | None = None, window: int = 0, *,
                      precision: Precision = Precision.HIGHEST) -> Handle:
    """An encoder's bidirectional attention over a padded batch of segments (one sentence each).

    ``q`` ``(rows, heads, head_dim)``, ``k`` and ``v`` ``(rows, kv_heads, head_dim)``, the rows in
    segments of ``segment``. Row r of segment b attends to rows ``[b * segment, b * segment +
    lengths[b])``, where ``lengths`` ``(rows / segment,)`` int32 is read per call (each held to
    ``[0, segment]``); rows at or past their segment's length are zero. ``scale`` None is ``1 /
    sqrt(head_dim)``. A ``window`` W > 0 lets a row see only the rows less than W from it on either
    side (a bidirectional sliding window). At MEDIUM the CPU may round q, k, v and the weights to
    bf16. Raises ValueError for shapes that do not fit.
    """
    return _F.segment_attention(_h(q), _h(k), _h(v), _h(lengths), int(segment), scale, int(window),
                                Precision(precision))


def segment_mean(x, lengths, segment: int) -> Handle:
    """Mean pooling over a padded batch: ``x`` ``(rows, N)`` in segments of ``segment`` rows.

    Row b of the result ``(rows / segment, N)`` is the mean of the first ``lengths[b]`` rows of
    segment b (``lengths`` as segment_attention()'s); an empty segment gives zeros.
    """
    return _F.segment_mean(_h(x), _h(lengths), int(segment))


def slot_rows(slots, positions, slots_count: int, slot_rows: int) -> Handle:
    """Where each row of a batched decode sits in a cache of ``slots_count`` regions of ``slot_rows``
    rows: ``slots[b] * slot_rows + positions[b]`` as ``(B,)`` int32.

    ``slots`` and ``positions`` are ``(B,)`` int32 inputs; before each call the host checks they lie
    in ``[0, slots_count)`` and ``[0, slot_rows)`` (IndexError otherwise). These are the rows a
    scatter writes a call's keys to: ``cache[F.slot_rows(...)] = k``.
    """
    return _F.slot_rows(_h(slots), _h(positions), int(slots_count), int(slot_rows))


def slot_attention(q, k_cache, v_cache, positions, slots, slot_rows: int, scale: float | None = None,
                   window: int = 0, *, precision: Precision = Precision.HIGHEST) -> Handle:
    """A batched decode's attention, each row in its own cache slot.

    ``q`` ``(B, heads, head_dim)``; row b sits at position ``positions[b]`` of slot ``slots[b]``
    (both ``(B,)`` int32, read per call) of the caches ``(slots * slot_rows, kv_heads, head_dim)``,
    and attends to its slot's keys up to its position (the last ``window`` of them when > 0), as
    attention() of that slot alone at that start computes it, bit for bit. ``scale`` None is ``1 /
    sqrt(head_dim)``; ``precision`` as attention()'s.
    """
    return _F.slot_attention(_h(q), _h(k_cache), _h(v_cache), _h(positions), _h(slots), int(slot_rows), scale,
                             int(window), Precision(precision))


def sample_rows(logits, settings, steps, positions) -> Handle:
    """A batch of draws, ``(B,)`` int32: each row of ``logits`` ``(B, vocab)`` drawn with its own row of
    ``settings`` ``(B, 16)`` int32 (a sample_settings() row each), its counter ``steps[b]`` and its
    ``positions[b]`` (both ``(B,)`` int32), as sample() of that row alone would draw it."""
    return _F.sample_rows(_h(logits), _h(settings), _h(steps), _h(positions))


def sample_settings(temperature: float, top_k: int, top_p: float, seed: int) -> np.ndarray:
    """The row of 16 int32 words sample_rows() reads a row's settings from, as a numpy array.

    Each word holds 16 bits, lowest first, so every word is exact in float32: words 0-3 are the
    float64 bits of ``temperature``, 4-7 those of ``top_p``, 8-11 the 64-bit ``seed``, 12-13
    ``top_k``, 14-15 zero. The settings travel bit for bit, so a row draws as the same settings
    given to sample() at compile time. Raises ValueError unless ``temperature`` >= 0, ``0 <= top_k
    < 2**31`` and ``0 < top_p <= 1``.
    """
    return _F.sample_settings(float(temperature), int(top_k), float(top_p), int(seed))


@dataclasses.dataclass
class ConvState:
    """What a short causal conv carries between calls: ``ConvState(read, write, window, tail)``.

    ``read`` is where the ``K - 1`` rows before a call's first are, and ``write`` where the ``K - 1``
    ending it go (both handles; the same state for both carries them from call to call);
    ``window`` ``(2, chunk, channels)`` and ``tail`` ``(K - 1, channels)`` are the states
    (``iron.State``) a call stages them in.
    """

    read: Handle
    write: Handle
    window: State
    tail: State


def _state(x, what: str):
    """The C++ state an iron.State holds, for ConvState's window and tail."""
    if not isinstance(x, State):
        raise TypeError(f"causal_conv1d(): {what} is an iron.State, not {type(x).__name__}")
    x._handle()  # a TypeError naming it if no graph declared it
    return x._held


def causal_conv1d(x, taps, state: ConvState) -> Handle:
    """Return ``x`` ``(rows, channels)`` through a depth-wise causal filter of ``K`` taps.

    Each channel has its own column of ``taps`` ``(K, channels)``: output row t is ``sum_k taps[k] *
    x[t - K + 1 + k]``. The ``K - 1`` rows before ``x``'s first are read from ``state.read``, and
    the ``K - 1`` rows ending this call (counting those read) are written to ``state.write`` for the
    next call. When ``x``'s rows are bounded per call (``x[:n]``) the call is a prompt chunk of at
    most ``chunk`` rows; otherwise ``x`` is one row, a decode step. Raises ValueError for shapes
    that do not fit and TypeError for a window or tail that is not a declared ``iron.State``.
    """
    return _F.causal_conv1d(_h(x), _h(taps), _h(state.read), _h(state.write), _state(state.window, "state.window"),
                            _state(state.tail, "state.tail"))
