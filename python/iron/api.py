"""``iron serve``'s OpenAI API without HTTP: ``iron.Api(model)`` answers a request given as its
method, path, headers and body with the status, headers and body ``iron serve`` would send, or a
stream of server-sent events. Any Python web framework can put it behind its own transport (Ray
Serve does: ``iron.ray``); the routes, the checks, the error objects and the response shapes are
``iron serve``'s own C++ code (tools/serve/api.cpp), not a copy.

::

    api = iron.Api("models/SmolLM2-135M-Instruct.Q4_1.gguf", parallel=8)
    r = api.handle("POST", "/v1/chat/completions", body=b'{"messages": [...], "stream": true}')
    for chunk in r.stream: ...                   # b"data: {...}\\n\\n", ..., b"data: [DONE]\\n\\n"
    r = await api.ahandle("POST", "/v1/completions", body=...)   # from an event loop
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from dataclasses import dataclass, field
from typing import Iterable

from . import _iron
from ._closing import Closing
from ._aio import readable
from .graph import Precision


class BodyStream:
    """A streamed answer's body: server-sent events as bytes, each chunk whole events. Iterate it
    with ``for`` (waits with the GIL released) or ``async for`` (awaits the event loop, woken by
    the engine's thread). Leaving it early, ``cancel()`` or leaving a ``with`` block ends the
    request: its slot frees at the engine's next step."""

    def __init__(self, stream):
        self._s = stream

    def __iter__(self):
        return self

    def __next__(self) -> bytes:
        while True:
            chunk, over = self._s.next(0.05)
            if chunk:
                return chunk
            if over:
                raise StopIteration

    def __aiter__(self):
        return self

    async def __anext__(self) -> bytes:
        while True:
            chunk, over = self._s.poll()
            if chunk:
                return chunk
            if over:
                raise StopAsyncIteration
            # A fifth of a second at most, so that a long silence is answered by a ": waiting"
            # comment (which shows whether the client is still there).
            await readable(self._s.fileno(), 0.2)

    def cancel(self) -> None:
        self._s.cancel()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cancel()


@dataclass
class Response:
    """An answer: ``status``, ``content_type``, other ``headers`` (Retry-After, Cache-Control),
    and either the whole ``body`` or a ``stream`` ("text/event-stream")."""
    status: int
    content_type: str
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    stream: BodyStream | None = None


class Api(Closing):
    """The OpenAI API over one model, as ``iron serve -m PATH`` serves it: a decoder answers
    ``POST /v1/chat/completions`` and ``/v1/completions`` (``parallel`` sequences decoding
    together, ``queue`` more waiting, None: 4 x parallel; ``context`` KV-cache rows each;
    ``batch`` prompt tokens a prefill call takes), a sentence encoder's directory
    ``POST /v1/embeddings``; both ``GET /v1/models``, ``/health`` and ``/metrics``.
    ``api_key``: every route but /health asks for ``Authorization: Bearer KEY``. ``model_name``:
    what /v1/models lists (None: the file's name). A model that cannot be opened raises here."""

    def __init__(self, path: str | os.PathLike, parallel: int = 8, *, context: int = 4096, batch: int = 64,
                 queue: int | None = None, threads: int = 0, device: str = "cpu",
                 precision: Precision | str = Precision.HIGHEST, api_key: str | None = None,
                 model_name: str | None = None):
        path = os.fspath(path)
        if parallel < 1:
            raise ValueError(f"parallel is at least 1, not {parallel}")
        name = model_name or os.path.basename(os.path.normpath(path))
        self._a = _iron.api.Api.open(path, parallel, context, batch, -1 if queue is None else queue, threads,
                                     device, Precision(precision), api_key or "", name)
        # ahandle()'s threads: one for each request that may wait on the model (every slot and
        # queue place) and a few for /health and /metrics beside them, as `iron serve` has.
        self._workers = parallel + (4 * parallel if queue is None or queue < 0 else queue) + 4
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    def handle(self, method: str, path: str, headers: Iterable[tuple[str, str]] = (), body: bytes = b"") -> Response:
        """Answers one request (GIL released). Returns when the answer is whole (a completion's
        at its end) or, for a streamed one, once it is queued."""
        status, content_type, extra, content, stream = self._a.handle(method, path, list(headers), bytes(body))
        return Response(status, content_type, list(extra), content, BodyStream(stream) if stream else None)

    async def ahandle(self, method: str, path: str, headers: Iterable[tuple[str, str]] = (),
                      body: bytes = b"") -> Response:
        """``handle()`` on a thread of the Api's own, so that the event loop goes on while a
        whole completion or an embeddings call runs."""
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(self._workers, thread_name_prefix="iron-api")
        headers = list(headers)
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, lambda: self.handle(method, path, headers, body))

    @property
    def kind(self) -> str:
        """"decoder" (completions) or "encoder" (embeddings)."""
        return self._a.kind

    def drain(self) -> None:
        """Stops taking completions and embeddings (503), as ``iron serve`` after SIGTERM;
        /health answers 503 from then on."""
        self._a.drain()

    @property
    def draining(self) -> bool:
        return self._a.draining

    @property
    def open_answers(self) -> int:
        """Answers not yet given to the end (streams still being read among them)."""
        return self._a.open_answers

    @property
    def in_flight(self) -> int:
        """Sequences queued or decoding."""
        return self._a.in_flight

    def close(self) -> None:
        """Cancels what is in flight; the model goes when the last stream reading it does."""
        self._a.close()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
