"""Sentence embeddings from Python: ``iron.Encoder("models/all-MiniLM-L6-v2")`` opens a sentence
encoder (a BERT-family directory, or EmbeddingGemma's: what ``iron embed`` runs) and
``embed(texts)`` returns one float32 row per text, ``iron embed``'s vectors bit for bit.

Texts are tokenised, sorted by length into buckets and batched as ``iron embed`` does (a text's
vector is the same in any batch); the GIL is released while they run.
"""

from __future__ import annotations

import os
from typing import Iterable

import numpy as np

from . import _iron
from .graph import Precision


def is_sentence_encoder(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a sentence encoder's directory (config.json says ``bert``, or a Gemma 3
    attending both ways): what ``iron serve`` and ``iron.Api`` open as an encoder."""
    return _iron.encoder.is_sentence_encoder(os.fspath(path))


class Encoder:
    """A sentence encoder from a Hugging Face directory (config.json, model.safetensors,
    tokenizer.json and the sentence-transformers files). ``threads`` 0: every core the process
    may run on. ``normalize`` None: as the model's modules.json says. ``batch``: sentences per
    call at most. A decoder, a missing file or a module this library does not run is a
    ValueError or OSError naming it."""

    def __init__(self, path: str | os.PathLike, *, threads: int = 0, device: str = "cpu",
                 precision: Precision | str = Precision.HIGHEST, normalize: bool | None = None, batch: int = 32):
        self._e = _iron.encoder.Encoder.open(os.fspath(path), threads, device, Precision(precision), normalize, batch)

    def embed(self, texts: str | Iterable[str], prompt_name: str | None = None,
              dimensions: int | None = None) -> np.ndarray:
        """The vectors of ``texts``: an array (len(texts), dim) of float32, or (dim,) for one
        ``str``. ``prompt_name``: the model's prompt put before each text (EmbeddingGemma's
        "query", "document", ...; "none": none; None: the model's default). ``dimensions``: keep
        the first N values (Matryoshka), normalised again when the model normalises."""
        one = isinstance(texts, str)
        batch = [texts] if one else list(texts)
        vectors = self._e.embed(batch, prompt_name, dimensions or 0)
        return vectors[0] if one else vectors

    def ids(self, text: str, prompt_name: str | None = None) -> list[int]:
        """The token ids ``text`` runs as (the prompt's among them), cut to ``max_seq_length``."""
        return self._e.ids(text, prompt_name)

    @property
    def dim(self) -> int:
        """The vectors' size."""
        return self._e.dim

    @property
    def normalizes(self) -> bool:
        return self._e.normalizes

    @property
    def family(self) -> str:
        """"bert" or "gemma3"."""
        return self._e.family

    @property
    def max_seq_length(self) -> int:
        """Tokens a text is cut to, its first and last included."""
        return self._e.max_seq_length

    @property
    def prompts(self) -> dict[str, str]:
        """The model's prompts by name (config_sentence_transformers.json)."""
        return self._e.prompts

    @property
    def default_prompt_name(self) -> str | None:
        return self._e.default_prompt_name
