"""The serving engine from Python: ``iron.Engine("model.gguf", parallel=8)`` runs many requests at
once over one model (continuous batching, the engine ``iron serve`` runs), each answered as a
stream of text while it is generated.

A prompt is a ``str`` (plain text, tokenised as ``iron generate -p`` does), a list of token ids,
or a list of ``{"role", "content"}`` messages (rendered by the model's chat template, with the
assistant's turn opened). The engine's own thread runs the model; it never takes the GIL, and a
reader waits for tokens with the GIL released (threads) or on a file descriptor the event loop
watches (asyncio), so Python code runs while the model decodes.
"""

from __future__ import annotations

import asyncio
import os
from typing import Iterable, Sequence

from . import _iron
from ._closing import Closing
from ._aio import readable
from .graph import Precision


class Stream:
    """One request's text as it is generated. Iterate it with ``for`` (each step waits, the GIL
    released) or ``async for`` (each step awaits the event loop): each item is a non-empty piece
    of text, whole UTF-8 characters, stop strings cut (no piece ever holds one, nor its start).
    Leaving the loop early and dropping the stream, or ``cancel()``, ends the request: its slot
    frees at the engine's next step. Afterwards ``finish_reason`` is "stop" (the end of sequence
    or a stop string), "length" (``max_tokens`` or a full context) or "cancelled"; a request the
    model failed raises its error from the iteration."""

    def __init__(self, stream):
        self._s = stream

    def __iter__(self):
        return self

    def __next__(self) -> str:
        piece = self._s.next_piece()
        if piece is None:
            raise StopIteration
        return piece

    def __aiter__(self):
        return self

    async def __anext__(self) -> str:
        while True:
            piece, over = self._s.poll()
            if piece:
                return piece
            if over:
                raise StopAsyncIteration
            # The engine's thread writes the stream's eventfd when it has news (poll() cleared
            # it first, so news since then is not missed).
            await readable(self._s.fileno())

    def text(self) -> str:
        """The rest of the text, waiting for the end."""
        return "".join(self)

    def cancel(self) -> None:
        """Stops the request after the token being produced (or before it starts)."""
        self._s.cancel()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cancel()

    @property
    def finish_reason(self) -> str | None:
        """How it ended ("stop", "length", "cancelled", "error"); None while it runs."""
        return self._s.finish_reason

    @property
    def tokens(self) -> list[int]:
        """The token ids read so far (the end token's too)."""
        return self._s.tokens

    @property
    def prompt_tokens(self) -> int:
        return self._s.prompt_tokens

    @property
    def stats(self) -> dict:
        """Once it is over: prompt_tokens, prompt_seconds, generated_tokens, generate_seconds
        and stop, as ``iron generate`` prints them."""
        return self._s.stats


class Engine(Closing):
    """A model served to many requests at once: ``parallel`` sequences decode together, each in
    a KV-cache slot of its own (``context`` rows each), and up to ``queue`` more wait (None: 4 x
    parallel; a request that finds the queue full waits for a place). ``close()`` (or leaving a
    ``with`` block) cancels what is in flight."""

    def __init__(self, path: str | os.PathLike, parallel: int = 8, *, context: int = 2048, batch: int = 64,
                 queue: int | None = None, threads: int = 0, device: str = "cpu",
                 precision: Precision | str = Precision.HIGHEST):
        self._e = _iron.engine.Engine.open(os.fspath(path), parallel, context, batch,
                                           -1 if queue is None else queue, threads, device,
                                           Precision(precision))

    @staticmethod
    def _settings(max_tokens, temperature, top_k, top_p, seed, stop, ignore_eos):
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        return (max_tokens, float(temperature), top_k, float(top_p), seed, stops, ignore_eos)

    def stream(self, prompt: str | Sequence[int] | Sequence[dict], max_tokens: int | None = 64, *,
               temperature: float = 0.7, top_k: int = 40, top_p: float = 0.95, seed: int | None = None,
               stop: str | Iterable[str] | None = None, ignore_eos: bool = False) -> Stream:
        """Submit one request and return its Stream. ``max_tokens`` None: until the end of
        sequence or a full context. ``temperature`` 0 is greedy; ``seed`` None draws one (give
        one to repeat an answer). ``stop``: strings the text ends before. ``ignore_eos``: go on
        past the end-of-sequence token. A bad request (an unknown role, a negative max_tokens,
        settings out of range, a prompt longer than the context) raises ValueError here."""
        settings = self._settings(max_tokens, temperature, top_k, top_p, seed, stop, ignore_eos)
        return Stream(self._e.submit(prompt, *settings, True))

    async def astream(self, prompt: str | Sequence[int] | Sequence[dict], max_tokens: int | None = 64, *,
                      temperature: float = 0.7, top_k: int = 40, top_p: float = 0.95, seed: int | None = None,
                      stop: str | Iterable[str] | None = None, ignore_eos: bool = False):
        """``async for piece in engine.astream(...)``: as ``stream()``, but a full queue is
        waited for on a worker thread, never on the event loop."""
        settings = self._settings(max_tokens, temperature, top_k, top_p, seed, stop, ignore_eos)
        s = self._e.submit(prompt, *settings, False)
        if s is None:
            s = await asyncio.get_running_loop().run_in_executor(None, lambda: self._e.submit(prompt, *settings, True))
        with Stream(s) as stream:
            async for piece in stream:
                yield piece

    def generate(self, prompts: Iterable, max_tokens: int | None = 64, *, temperature: float = 0.7,
                 top_k: int = 40, top_p: float = 0.95, seed: int | None = None,
                 stop: str | Iterable[str] | None = None, ignore_eos: bool = False) -> list[str]:
        """Run every prompt, ``parallel`` at a time batched, and return their texts in order;
        the GIL is released until all are done."""
        settings = self._settings(max_tokens, temperature, top_k, top_p, seed, stop, ignore_eos)
        return self._e.generate(list(prompts), *settings)

    def stats(self) -> dict:
        """queued, active, prompt_tokens, completion_tokens, sequences and tokens_per_second
        (generated over the last 10 s): what ``iron serve``'s /metrics reports."""
        return self._e.stats()

    @property
    def parallel(self) -> int:
        return self._e.parallel

    @property
    def context(self) -> int:
        return self._e.context

    def close(self) -> None:
        self._e.close()
