#!/usr/bin/env python3
"""Eight conversations served at once from Python through iron.Engine: one model, eight KV-cache
slots decoding together (continuous batching, as `iron serve --parallel 8` runs them), each
answer streamed to its own asyncio task as it is generated.

  PYTHONPATH=build/python .venv/bin/python examples/engine_streams.py [MODEL.gguf]

The engine's thread runs the model without the GIL; each `async for` awaits its stream's news on
the event loop, so the eight tasks (and anything else on the loop) run while the model decodes.
"""

import asyncio
import sys
import time

import iron

QUESTIONS = [
    "What is the capital of France?",
    "Name three colours of the rainbow.",
    "Why is the sky blue? One sentence.",
    "Give me a word that rhymes with cat.",
    "What is 12 times 12?",
    "Suggest a name for a pet turtle.",
    "What do bees make?",
    "Say hello in Spanish.",
]


async def ask(engine, question):
    messages = [{"role": "user", "content": question}]
    pieces = []
    async for piece in engine.astream(messages, max_tokens=48, temperature=0):
        pieces.append(piece)  # a web server would send each piece to its client here
    return "".join(pieces).strip()


async def main(path):
    with iron.Engine(path, parallel=8, context=512) as engine:
        t0 = time.perf_counter()
        answers = await asyncio.gather(*(ask(engine, q) for q in QUESTIONS))
        seconds = time.perf_counter() - t0
        for q, a in zip(QUESTIONS, answers):
            print(f"> {q}\n{a}\n")
        stats = engine.stats()
        print(f"{stats['completion_tokens']} tokens in {seconds:.2f} s: "
              f"{stats['completion_tokens'] / seconds:.1f} tokens/s over {len(QUESTIONS)} streams")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
