#!/usr/bin/env python3
"""A chat in the terminal from Python: iron.Conversation keeps the model's KV cache between
turns, so each answer starts after prefilling only the new message; Ctrl-C stops an answer
(what it said so far stays in the conversation). /save FILE and /load FILE write and read the
JSON `iron chat` writes and reads; /clear starts again.

  PYTHONPATH=build/python .venv/bin/python examples/chat.py [MODEL.gguf] [SYSTEM MESSAGE]
"""

import sys

import iron


def chat(path, system=None, lines=None, out=sys.stdout, temperature=0.7, max_tokens=None):
    # One slot: a single conversation always finds its cache where it left it.
    with iron.Engine(path, parallel=1, context=2048) as engine:
        conversation = iron.Conversation(engine, system=system)
        for line in lines if lines is not None else iter(lambda: input("> "), None):
            command, _, argument = line.strip().partition(" ")
            if command == "/save":
                conversation.save(argument)
            elif command == "/load":
                conversation.load(argument)
                print(f"(loaded {len(conversation.messages)} messages)", file=out)
            elif command == "/clear":
                conversation.clear()
            elif line.strip():
                turn = conversation.say(line, max_tokens, temperature=temperature)
                try:
                    for piece in turn:
                        print(piece, end="", flush=True, file=out)
                except KeyboardInterrupt:
                    turn.cancel()  # the answer so far joins the conversation
                print(file=out)
        return conversation


if __name__ == "__main__":
    try:
        chat(sys.argv[1] if len(sys.argv) > 1 else "models/SmolLM2-135M-Instruct.Q4_1.gguf",
             sys.argv[2] if len(sys.argv) > 2 else None)
    except EOFError:
        print()
