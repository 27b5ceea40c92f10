#!/usr/bin/env python3
"""A whole Llama decoder written in Python with iron.functional, checked against the C++ model.

The graph below is the one src/models/decoder.cpp and src/models/llama.cpp record (the same
steps in the same order, the weights in their checkpoint types), loaded from a GGUF file under
the C++ model's paths; its logits for every row of a prompt are compared with the built-in
model's (models::LlamaRunner::score) bit for bit, and its greedy tokens, decoded in a
CarriedLoop (prefill once, then decode steps on the device), with the runner's.

  PYTHONPATH=build/python .venv/bin/python examples/llama.py [MODEL.gguf] [PROMPT]
"""

import math
import sys

import numpy as np

import iron
from iron import functional as F


class Attention(iron.Module):
    def __init__(self, c):
        hd = c["head_dim"]
        # Quantised weights stay as the checkpoint holds them; kernels read them in place.
        self.q = iron.param(c["heads"] * hd, c["dim"], dtype=iron.keep)
        self.k = iron.param(c["kv_heads"] * hd, c["dim"], dtype=iron.keep)
        self.v = iron.param(c["kv_heads"] * hd, c["dim"], dtype=iron.keep)
        self.o = iron.param(c["dim"], c["heads"] * hd, dtype=iron.keep)


class FeedForward(iron.Module):
    def __init__(self, c):
        self.gate = iron.param(c["ffn"], c["dim"], dtype=iron.keep)
        self.up = iron.param(c["ffn"], c["dim"], dtype=iron.keep)
        self.down = iron.param(c["dim"], c["ffn"], dtype=iron.keep)


class Block(iron.Module):
    def __init__(self, c, rows_held):
        self.k_cache = iron.state((rows_held, c["kv_heads"], c["head_dim"]))  # f32 caches
        self.v_cache = iron.state((rows_held, c["kv_heads"], c["head_dim"]))
        self.attn_norm = iron.param(c["dim"])
        self.attn = Attention(c)
        self.ffn_norm = iron.param(c["dim"])
        self.ffn = FeedForward(c)


def rope_table(c, positions):
    """Cosines then sines of each position's angles, as DecoderModel::rope_cos_sin_table."""
    d, half, base = c["head_dim"], c["head_dim"] // 2, c["rope_base"]
    t = np.empty((positions, d), np.float32)
    for i in range(half):
        f = math.pow(base, -2.0 * i / d)
        for p in range(positions):
            a = float(p) * f
            t[p, i], t[p, half + i] = math.cos(a), math.sin(a)
    return t


class Llama(iron.Graph):
    def __init__(self, config, context, chunk, all_logits=False, precision=iron.Precision.HIGHEST):
        super().__init__("llama")
        c = self.c = config
        self.context, self.chunk, self.all_logits, self.precision = context, chunk, all_logits, precision
        self.embed = iron.param(c["vocab"], c["dim"], dtype=iron.keep)
        self.norm = iron.param(c["dim"])
        self.output = self.embed if c["tied_embeddings"] else iron.param(c["vocab"], c["dim"], dtype=iron.keep)
        self.layers = [Block(c, context + chunk) for _ in range(c["layers"])]
        self.rope_table = iron.weight(rope_table(c, context + chunk))

    def heads(self, y, count, x, n):
        return y.reshape(n, count, self.c["head_dim"]).bounded(0, x.valid[0])

    def block(self, b, x, start, n):
        c, p, eps = self.c, self.precision, self.c["rms_eps"]
        h = F.rms_norm(x, c["dim"], b.attn_norm, eps)
        table = self.rope_table[iron.window(start, n)]
        k_rows, v_rows = b.k_cache[iron.window(start, n)], b.v_cache[iron.window(start, n)]
        q_lin, k_lin = F.linear(h, b.attn.q, precision=p), F.linear(h, b.attn.k, precision=p)
        v = F.linear(h, b.attn.v, precision=p, into=v_rows)  # written into the cache in place
        q = F.rope_cos_sin(self.heads(q_lin, c["heads"], x, n), table, c["rope_mode"])
        self.heads(v, c["kv_heads"], x, n)
        F.rope_cos_sin(self.heads(k_lin, c["kv_heads"], x, n), table, c["rope_mode"], into=k_rows)
        attended = F.attention(q, b.k_cache, b.v_cache, start)
        flat = attended.reshape(n, c["heads"] * c["head_dim"]).bounded(0, x.valid[0])
        x = F.linear_residual(flat, b.attn.o, x, precision=p)
        h = F.rms_norm(x, c["dim"], b.ffn_norm, eps)
        gate, up = F.linear(h, b.ffn.gate, precision=p), F.linear(h, b.ffn.up, precision=p)  # in this order
        return F.linear_residual(F.silu_mul(gate, up), b.ffn.down, x, precision=p)

    def body(self, tokens=None, *, rows: iron.Scratchpad = 1, position: iron.Carried, token: iron.Carried,
             step: iron.Carried):
        c = self.c
        prefill = tokens is not None
        n = tokens.shape[0] if prefill else 1
        if prefill:
            x = F.copy(self.embed[tokens[:rows]], iron.f32).bounded(0, rows)
        else:
            x = F.copy(self.embed[iron.at(token)], iron.f32).reshape(1, c["dim"]).bounded(0, 1)
        for b in self.layers:
            x = self.block(b, x, position, n)
        # The last valid row's logits pick the next token.
        last = F.copy(x[iron.at(rows - 1)]) if prefill else x.reshape(c["dim"])
        logits = F.linear(F.rms_norm(last, c["dim"], self.norm, c["rms_eps"]), self.output, precision=self.precision)
        sampled = F.sample(logits, 0.0, 40, 0.95, 0, step, position)  # greedy, as the runner's defaults
        outs = [logits, sampled]
        if prefill and self.all_logits:
            outs.append(F.linear(F.rms_norm(x, c["dim"], self.norm, c["rms_eps"]), self.output))
        next_position = F.scalar(position, rows) if prefill else position + 1
        return (*outs, iron.carry(token=sampled, position=next_position, step=step + 1))


def python_logits(path, ids):
    """The logits of every row of `ids` from the Python decoder, as LlamaRunner::score runs it."""
    weights, config = iron._iron.models.llama_checkpoint(str(path))
    context = min(2048, config["context"])
    chunk = max(len(ids), 8)
    context = max(context, chunk)
    model = Llama(config, context, chunk, all_logits=True)
    model.load_state_dict(weights)
    version = model.compile(tokens=((chunk,), np.int32))
    tokens = np.zeros(chunk, np.int32)
    tokens[: len(ids)] = ids
    logits, sampled, every, carried = version(tokens, position=0, rows=len(ids), token=0, step=0)
    return every


def python_generate(path, ids, steps):
    """Greedy tokens after `ids` from the Python decoder: one prefill call, then `steps` decode
    steps in a CarriedLoop on the device (each carries its token into the next, and the host
    reads it once that step is complete)."""
    weights, config = iron._iron.models.llama_checkpoint(str(path))
    context = min(2048, config["context"])
    chunk = min(64, context)
    model = Llama(config, context, chunk)
    model.load_state_dict(weights)
    prefill = model.compile(tokens=((chunk,), np.int32))
    decode = model.compile()
    loop = iron.CarriedLoop(prefill, decode, depth=4)
    tokens = np.zeros(chunk, np.int32)
    tokens[: len(ids)] = ids
    logits, first, carried = loop.start(tokens, rows=len(ids), position=0, token=0, step=0)
    out = [int(first[0])]
    # Step k decodes the token at position len(ids) + k and carries the one it samples.
    walk = loop.steps(steps)
    out += [walk.carried("token") for _ in walk]
    return out


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "../shared/models/stories260K.gguf"
    prompt = sys.argv[2] if len(sys.argv) > 2 else "Once upon a time, there was a little girl"
    builtin = iron.models.load(path)
    ids = builtin.tokenize(prompt)
    want = builtin._runner.score(ids)
    got = python_logits(path, ids)
    same = got.shape == want.shape and got.tobytes() == want.tobytes()
    print(f"{len(ids)} rows x {want.shape[1]} logits: Python decoder vs the C++ model: "
          f"{'identical, bit for bit' if same else 'DIFFERENT'} (max |diff| {np.abs(got - want).max():.3g})")
    ours = python_generate(path, ids, 15)
    theirs = list(builtin.generate(ids, max_tokens=16, ids=True, stop_at_end=False))
    print(f"greedy tokens, Python decoder in a CarriedLoop: {ours}\n"
          f"greedy tokens, iron.models (the C++ runner):    {theirs}")
    return 0 if same and ours == theirs else 1


if __name__ == "__main__":
    sys.exit(main())
