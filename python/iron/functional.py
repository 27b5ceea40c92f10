"""Functions for a graph's body, under torch.nn.functional's names (iron::functional).

Each records the operator steps that compute it and returns their handle. Weights are a
checkpoint's ``(out, in)``, as ``torch.nn.Linear`` stores them. A handle's own ``+ - * /`` are
steps too, and ``@`` of one row.
"""

from __future__ import annotations

from . import _iron
from ._iron import Handle
from .graph import Precision
from .graph import _dtype, _h

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


def sample(logits, temperature: float, top_k: int, top_p: float, seed: int, step, position) -> Handle:
    """A token drawn from a row of logits (one-element int32): the ``top_k`` most likely (0:
    all), cut to the smallest set reaching ``top_p``, softmax at ``temperature`` (0: greedy),
    one draw keyed by ``seed`` mixed with the per-call ``step`` and ``position``."""
    return _F.sample(_h(logits), float(temperature), int(top_k), float(top_p), int(seed), step, position)


def scalar(*terms) -> Handle:
    """The sum of per-call expressions as a one-element int32 (a carried value of two values)."""
    return _F.scalar([_iron.Affine(t) if isinstance(t, (int, _iron.PerCall)) else t for t in terms])


def attention(q, k_cache, v_cache, start, scale: float | None = None, window: int = 0) -> Handle:
    """Causal grouped-query attention of ``q`` ``(rows, heads, head_dim)`` over the caches
    ``(ctx, kv_heads, head_dim)``; row r of q sits at position ``start + r``. ``scale`` None is
    ``1 / sqrt(head_dim)``; a sliding ``window`` > 0 attends to that many positions."""
    return _F.attention(_h(q), _h(k_cache), _h(v_cache), start, scale, int(window))


def copy(x, dtype=None) -> Handle:
    """A dense copy of any view (strided, gathered), optionally cast to ``dtype``."""
    return _F.copy(_h(x), None if dtype is None else _dtype(dtype))
