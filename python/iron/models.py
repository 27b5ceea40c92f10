"""Models from checkpoints: ``iron.models.load("model.gguf")`` and a streaming ``generate``,
over the C++ models::LlamaRunner that ``iron generate`` runs (Llama family, Gemma 3, Qwen2)."""

from __future__ import annotations

import os
import queue
import threading
from typing import Iterable, NamedTuple, Sequence

import numpy as np

from . import _iron
from .graph import Precision


class Model:
    """A loaded model: ``generate(prompt)`` yields its text as it is generated."""

    def __init__(self, runner):
        self._runner = runner
        self.stats: dict | None = None

    @property
    def context(self) -> int:
        return self._runner.context

    def tokenize(self, prompt: str, *, chat: bool = False) -> list[int]:
        """The prompt's token ids: a chat turn in the model's template, or plain text."""
        return self._runner.prompt_ids(prompt, chat)

    def detokenize(self, ids) -> str:
        return self._runner.decode(list(ids)).decode("utf-8", "replace")

    def generate(self, prompt: str | list[int], max_tokens: int = 128, *, chat: bool = False,
                 ids: bool = False, stop_at_end: bool = True):
        """Yield the text of each token as it lands (whole UTF-8 characters), or its id with
        ``ids=True``; stops at the end of sequence, ``max_tokens``, or a full context. Leaving
        the loop early stops the decode. Afterwards ``stats`` holds the prompt and generation
        token counts and seconds, and why it stopped."""
        prompt_ids = list(prompt) if not isinstance(prompt, str) else self.tokenize(prompt, chat=chat)
        # The runner calls back on the thread that runs it; the tokens reach this generator
        # through a queue, so the caller's loop runs while the device decodes the next ones.
        q: queue.SimpleQueue = queue.SimpleQueue()
        done = object()

        def on_token(token, text):
            q.put(token if ids else text)

        def work():
            try:
                self.stats = self._runner.generate(prompt_ids, max_tokens, on_token, stop_at_end)
                q.put(done)
            except BaseException as e:  # handed to the caller's thread
                q.put(e)

        thread = threading.Thread(target=work, name="iron-generate", daemon=True)
        thread.start()
        pending = b""
        try:
            while True:
                item = q.get()
                if item is done:
                    break
                if isinstance(item, BaseException):
                    raise item
                if ids:
                    if item >= 0:
                        yield item
                    continue
                pending += item
                if pending:
                    yield pending.decode("utf-8", "replace")
                    pending = b""
        finally:
            if thread.is_alive():
                self._runner.interrupt()
            thread.join()


class Sampling(NamedTuple):
    """How a row's next token is drawn: ``temperature`` 0 is greedy (the seed unread); ``top_k``
    0 keeps every token; any 64-bit ``seed``, mixed with the row's ``step`` and position."""

    temperature: float = 0.0
    top_k: int = 40
    top_p: float = 0.95
    seed: int = 0


class Prompt(NamedTuple):
    """A prompt for ``BatchDecoder.prefill``: ``ids`` written into cache slot ``slot`` from
    ``position``; the token after its last drawn with ``sampling`` and the counter ``step``."""

    slot: int
    ids: Sequence[int]
    position: int = 0
    sampling: Sampling = Sampling()
    step: int = 0


class Row(NamedTuple):
    """A row of ``BatchDecoder.step``: ``token`` goes in at ``position`` of cache slot ``slot``;
    the next token is drawn with ``sampling`` and the counter ``step`` (the sequence's own: 1 at
    the step after its prefill, + 1 a step)."""

    slot: int
    position: int
    token: int
    step: int
    sampling: Sampling = Sampling()


def _sampling(s) -> tuple:
    s = Sampling(*s) if not isinstance(s, Sampling) else s
    return (float(s.temperature), int(s.top_k), float(s.top_p), int(s.seed))


class BatchDecoder:
    """Several sequences decoded together, the host choosing every row: what ``iron.Engine``
    runs beneath its scheduler (C++ models::BatchDecoder), for a Python program that keeps its
    own (beam search, several continuations of one prompt, its own sampling over ``logits``).

    The model's cache has ``slots`` slots of ``context`` rows, each holding one sequence;
    ``prefill()`` writes prompts into slots, ``step()`` runs one row per sequence in one call,
    each row reading only its own slot. The host holds each sequence's place (slot, position,
    step counter). At highest precision a row's token and logits are those it gets decoded
    alone, whatever else shares the call (up to 8 rows); calls run with the GIL released.
    Opened as ``iron.Engine`` opens a model; ``batch``: prompt rows a prefill call takes."""

    def __init__(self, path: str | os.PathLike, slots: int = 4, *, context: int = 2048, batch: int = 64,
                 threads: int = 0, device: str = "cpu", precision: Precision | str = Precision.HIGHEST):
        self._b = _iron.models.BatchDecoder.open(os.fspath(path), slots, context, batch, threads, device,
                                                 Precision(precision))

    @property
    def slots(self) -> int:
        """Cache slots: sequences the decoder holds at once."""
        return self._b.slots

    @property
    def context(self) -> int:
        """Rows of each slot: the positions a sequence may take."""
        return self._b.context

    @property
    def vocab_size(self) -> int:
        """Tokens of the vocabulary: the logits' columns."""
        return self._b.vocab_size

    def tokenize(self, prompt: str, *, chat: bool = False) -> list[int]:
        """The prompt's token ids: a chat turn in the model's template, or plain text (BOS
        first where the model adds one)."""
        return self._b.prompt_ids(prompt, chat)

    def detokenize(self, ids: Iterable[int]) -> str:
        """The text of ``ids`` (bytes that are not UTF-8 shown as U+FFFD)."""
        return self._b.decode([int(i) for i in ids]).decode("utf-8", "replace")

    def is_end(self, token: int) -> bool:
        """Whether ``token`` ends a sequence (the model's end of sequence or of turn)."""
        return self._b.is_end(int(token))

    def prefill(self, prompts: Prompt | Iterable[Prompt]) -> int | list[int]:
        """Write each prompt into its slot and return the token drawn after its last id (one
        Prompt: an int; several: a list, in order). Several prompts share calls, each cut into
        the same parts it would be alone, so what it leaves in its slot does not depend on the
        others. A slot or a position outside the cache is an IndexError; sampling settings out
        of range a ValueError."""
        one = isinstance(prompts, Prompt)
        items = [prompts] if one else [p if isinstance(p, Prompt) else Prompt(*p) for p in prompts]
        got = self._b.prefill([(int(p.slot), int(p.position), [int(i) for i in p.ids], _sampling(p.sampling),
                                int(p.step)) for p in items])
        return got[0] if one else got

    def step(self, rows: Iterable[Row]) -> list[int]:
        """One call of every row: each row's next token, in order. A row's place in the list
        does not change what it draws. A slot or a position outside the cache is an IndexError
        before anything runs."""
        items = [r if isinstance(r, Row) else Row(*r) for r in rows]
        return self._b.step([(int(r.slot), int(r.position), int(r.token), int(r.step), _sampling(r.sampling))
                             for r in items])

    @property
    def logits(self) -> np.ndarray | None:
        """The last call's logits, float32 ``(rows, vocab)``, a copy: after ``step()`` one row
        per row, in order; after ``prefill()`` a row per prompt whose last id went in the last
        call (one prompt: its last id's). None before any call."""
        return self._b.logits()


def load(path: str | os.PathLike, *, context: int = 2048, batch: int = 64, temperature: float = 0.0,
         top_k: int = 40, top_p: float = 0.95, seed: int = 0, threads: int = 0, device: str = "cpu",
         precision: Precision | str = Precision.HIGHEST) -> Model:
    """Open a GGUF file or a Hugging Face directory (config.json, model.safetensors,
    tokenizer.json) of the Llama family or Gemma 3, with ``iron generate``'s defaults: greedy
    (temperature 0), a context of 2048 (held to the model's), prompt chunks of 64 rows."""
    return Model(_iron.models.Runner.open(os.fspath(path), context, batch, temperature, top_k, top_p,
                                          seed, threads, device, Precision(precision)))
