"""A chat that keeps its KV cache between turns: ``iron.Conversation(engine, system=...)``, the
conversation ``iron chat`` holds (models::Conversation), over an ``iron.Engine``.

Each turn renders the whole conversation with the model's chat template and prefills only what
the engine's cache slot does not hold yet; the model's own answers are rendered from the token
ids it generated, so a conversation saved and loaded again continues exactly.
"""

from __future__ import annotations

import asyncio
import json
import os

from . import _iron
from .engine import Engine, Stream


class Turn(Stream):
    """One answer as it is generated: an ``iron.Stream`` (``for`` or ``async for`` over its
    pieces, ``text()``, ``cancel()``, ``finish_reason``, ``tokens``). The answer joins the
    conversation when the turn ends: when it is read to the end, or (cancelled, or let go of
    before its end) at the conversation's next use, as far as it got."""

    @property
    def stats(self) -> dict | None:
        """Once the turn ended (None before): prefilled (prompt tokens the cache did not hold),
        cached (tokens the cache holds for the conversation), generated, answer_seconds,
        dropped_messages (the oldest messages dropped so that the turn fit the context) and
        stop ("end of sequence", "token limit", "context full", "interrupted")."""
        return self._s.stats


class Conversation:
    """A chat with the model ``engine`` serves. ``system``: a system message first (None or
    "": none). Each turn prefills only what the cache does not hold yet: the engine gives it
    the free slot that holds most of the conversation, which is the last turn's slot unless
    another request took it meanwhile (an engine of ``parallel=1`` serving one conversation
    always finds it; one shared by many streams may prefill more). One turn at a time: a
    second ``say()`` before the first's answer is read to its end (or cancelled) raises
    ValueError. A model without a tokenizer is a ValueError."""

    def __init__(self, engine: Engine, system: str | None = None):
        if not isinstance(engine, Engine):
            raise TypeError(f"a Conversation runs over an iron.Engine, not {type(engine).__name__}")
        self._engine = engine
        self._c = _iron.engine.Conversation.open(engine._e, system or "")

    @staticmethod
    def _settings(max_tokens, temperature, top_k, top_p, seed):
        return (max_tokens, float(temperature), top_k, float(top_p), seed)

    def say(self, text: str, max_tokens: int | None = None, *, temperature: float = 0.7, top_k: int = 40,
            top_p: float = 0.95, seed: int | None = None) -> Turn:
        """Add the user's message ``text`` and return the answer's Turn, generated meanwhile.
        ``max_tokens`` None: until the model ends its turn or the context is full. Sampling as
        ``Engine.stream`` (``temperature`` 0 is greedy; ``seed`` None draws one). When the
        conversation and room for the answer do not fit the context, the oldest messages after
        the system message are dropped; a message that cannot fit even alone, or settings out
        of range, raise ValueError and leave the conversation as it was. Waits (the GIL
        released) while the engine's queue is full."""
        return Turn(self._c.say(text, *self._settings(max_tokens, temperature, top_k, top_p, seed), True))

    async def asay(self, text: str, max_tokens: int | None = None, *, temperature: float = 0.7, top_k: int = 40,
                   top_p: float = 0.95, seed: int | None = None) -> Turn:
        """``turn = await conversation.asay(...)``, then ``async for piece in turn``: as
        ``say()``, but a full queue is waited for on a worker thread, never on the event loop."""
        settings = self._settings(max_tokens, temperature, top_k, top_p, seed)
        t = self._c.say(text, *settings, False)
        if t is None:
            t = await asyncio.get_running_loop().run_in_executor(None, lambda: self._c.say(text, *settings, True))
        return Turn(t)

    def reply(self, text: str, max_tokens: int | None = None, **sampling) -> str:
        """``say(text, ...)``'s whole answer, once it is generated."""
        return self.say(text, max_tokens, **sampling).text()

    @property
    def messages(self) -> list[dict]:
        """The conversation so far: ``{"role", "content"}`` dicts (system, user, assistant), an
        assistant's with the token ``ids`` it was generated as. A copy; a turn still being read
        shows its user message, and its answer once it ends."""
        return self._c.messages()

    @property
    def system(self) -> str | None:
        """The system message (None: none). Setting it (None or "" removes it) keeps the rest."""
        m = self._c.messages()
        return m[0]["content"] if m and m[0]["role"] == "system" else None

    @system.setter
    def system(self, text: str | None) -> None:
        self._c.set_system(text or "")

    @property
    def cached_tokens(self) -> int:
        """Tokens of this conversation the engine's cache holds."""
        return self._c.cached_tokens()

    def clear(self) -> None:
        """A new conversation (the system message kept); the next turn prefills it anew."""
        self._c.clear()

    def to_json(self) -> str:
        """The conversation as JSON, ``{"messages": [...]}`` as ``messages`` gives them: the
        file ``iron chat``'s /save writes."""
        return self._c.to_json()

    def load_json(self, conversation: str | dict) -> None:
        """Replace the conversation with one ``to_json()`` (or ``iron chat``'s /save) wrote, as
        text or as the dict it parses to; the next turn prefills it whole. The input is checked
        as the untrusted data it is: anything but that shape (not JSON, no "messages" list, an
        unknown role, a system message not first, an id outside the vocabulary) is a ValueError
        naming the message and what is wrong, and the conversation stays as it was."""
        if isinstance(conversation, dict):
            conversation = json.dumps(conversation)
        elif not isinstance(conversation, str):
            raise TypeError(f"a saved conversation is a str or a dict, not {type(conversation).__name__}")
        self._c.load_json(conversation)

    def save(self, path: str | os.PathLike) -> None:
        """Write ``to_json()`` to the file ``path``."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_json())

    def load(self, path: str | os.PathLike) -> None:
        """``load_json()`` of the file ``path`` (OSError when it cannot be read)."""
        with open(path, encoding="utf-8") as f:
            self.load_json(f.read())
