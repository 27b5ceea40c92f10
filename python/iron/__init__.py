"""IRON from Python: the spec's graph layer over IRON's C++ core.

A graph is a subclass of ``iron.Graph`` whose ``body`` is recorded on handles, once per input
shape, and compiled to one version per shape; ``from iron import functional as F`` mirrors
``torch.nn.functional``. Errors are the spec's exception types (``ValueError``, ``TypeError``,
``IndexError``, ``OSError`` for files) carrying the C++ message.
"""

from . import _iron
from ._iron import (
    AccessPattern,
    Affine,
    Carried,
    CompiledGraph,
    DType,
    Handle,
    Profile,
    Run,
    Scratchpad,
    StateDict,
    at,
    clamp,
    upto,
    window,
)
from .graph import (
    Carry,
    CarriedLoop,
    Graph,
    GraphStats,
    Module,
    Param,
    Precision,
    State,
    Weight,
    carry,
    on_host,
    param,
    state,
    weight,
)
from . import functional
from . import models
from .engine import Engine, Stream
from .conversation import Conversation, Turn
from .encoder import Encoder
from .api import Api

f32, f16, bf16, i8, i32 = DType.f32, DType.f16, DType.bf16, DType.i8, DType.i32
keep = DType.keep  # a param that keeps its checkpoint's (quantised) type

__all__ = [
    "AccessPattern", "Affine", "Api", "Carried", "Carry", "CarriedLoop", "CompiledGraph", "Conversation", "DType", "Encoder", "Engine", "Graph", "GraphStats",
    "Handle", "Module", "Param", "Precision", "Profile", "Run", "Scratchpad", "State", "StateDict", "Stream", "Turn", "Weight",
    "at", "carry",
    "clamp", "functional", "models", "on_host", "param", "state", "upto", "weight", "window",
    "f32", "f16", "bf16", "i8", "i32", "keep",
]
