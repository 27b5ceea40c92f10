"""Models from checkpoints: ``iron.models.load("model.gguf")`` and a streaming ``generate``,
over the C++ models::LlamaRunner that ``iron generate`` runs (Llama family, Gemma 3, Qwen2)."""

from __future__ import annotations

import os
import queue
import threading

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


def load(path: str | os.PathLike, *, context: int = 2048, batch: int = 64, temperature: float = 0.0,
         top_k: int = 40, top_p: float = 0.95, seed: int = 0, threads: int = 0, device: str = "cpu",
         precision: Precision | str = Precision.HIGHEST) -> Model:
    """Open a GGUF file or a Hugging Face directory (config.json, model.safetensors,
    tokenizer.json) of the Llama family or Gemma 3, with ``iron generate``'s defaults: greedy
    (temperature 0), a context of 2048 (held to the model's), prompt chunks of 64 rows."""
    return Model(_iron.models.Runner.open(os.fspath(path), context, batch, temperature, top_k, top_p,
                                          seed, threads, device, Precision(precision)))
