#!/usr/bin/env python3
"""Independent numpy reference forward pass for GGUF Llama models (float64).

Weights are read with gguf.GGUFReader and decoded with gguf.quants.dequantize
(code outside this project); every activation, matmul, softmax and norm is then
computed in float64.

    model = load(path)
    logits = forward(model, token_ids)          # (T, vocab), full-sequence causal
    ids, margins = generate(model, prompt, n)   # greedy

Architecture (llama.cpp "llama", RoPE "normal" mode):
    x = token_embd[ids]
    per block: x += Wo . attn(RoPE(Wq . rms(x)), RoPE(Wk . rms(x)), Wv . rms(x))
               x += Wdown . (silu(Wgate . rms(x)) * (Wup . rms(x)))
    logits = (output or token_embd) . rms(x)
RoPE rotates adjacent pairs (2i, 2i+1) by pos * base^(-2i/n_rot); GGUF stores
Q/K rows already permuted for that mode, so no un-permutation is done here.

CLI: python3 llama_numpy.py MODEL.gguf [n_tokens] [id ...]   (default: BOS, 60)
"""
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def _field(reader, key, default=None):
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def load(path):
    r = GGUFReader(path)
    arch = _field(r, "general.architecture")
    g = lambda k, d=None: _field(r, f"{arch}.{k}", d)
    cfg = dict(
        n_layer=int(g("block_count")),
        dim=int(g("embedding_length")),
        ffn=int(g("feed_forward_length")),
        n_head=int(g("attention.head_count")),
        n_kv=int(g("attention.head_count_kv", g("attention.head_count"))),
        eps=float(g("attention.layer_norm_rms_epsilon")),
        rope_base=float(g("rope.freq_base", 10000.0)),
    )
    cfg["head_dim"] = int(g("attention.key_length", cfg["dim"] // cfg["n_head"]))
    cfg["n_rot"] = int(g("rope.dimension_count", cfg["head_dim"]))
    w = {}
    for t in r.tensors:
        # dequantize returns float32 shaped (ne1, ne0): rows = outputs, cols = inputs.
        a = dequantize(t.data, t.tensor_type)
        w[t.name] = np.asarray(a, dtype=np.float64).reshape([int(d) for d in reversed(t.shape)])
    if "output.weight" not in w:  # tied embeddings
        w["output.weight"] = w["token_embd.weight"]
    cfg["vocab"] = w["output.weight"].shape[0]
    return {"cfg": cfg, "w": w, "reader": r}


def rmsnorm(x, g, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g


def rope(x, n_rot, base):
    """x: (T, heads, head_dim); rotate adjacent pairs of the first n_rot dims."""
    T = x.shape[0]
    inv = base ** (-np.arange(0, n_rot, 2, dtype=np.float64) / n_rot)  # (n_rot/2,)
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]       # (T, n_rot/2)
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., 0:n_rot:2], x[..., 1:n_rot:2]
    out = x.copy()
    out[..., 0:n_rot:2] = a * c - b * s
    out[..., 1:n_rot:2] = a * s + b * c
    return out


def forward(model, token_ids):
    c, w = model["cfg"], model["w"]
    T, H, KV, hd = len(token_ids), c["n_head"], c["n_kv"], c["head_dim"]
    x = w["token_embd.weight"][np.asarray(token_ids)]                  # (T, dim)
    mask = np.triu(np.full((T, T), -np.inf), k=1)
    for l in range(c["n_layer"]):
        p = f"blk.{l}."
        h = rmsnorm(x, w[p + "attn_norm.weight"], c["eps"])
        q = rope((h @ w[p + "attn_q.weight"].T).reshape(T, H, hd), c["n_rot"], c["rope_base"])
        k = rope((h @ w[p + "attn_k.weight"].T).reshape(T, KV, hd), c["n_rot"], c["rope_base"])
        v = (h @ w[p + "attn_v.weight"].T).reshape(T, KV, hd)
        k = np.repeat(k, H // KV, axis=1)   # query head j uses kv head j // (H/KV)
        v = np.repeat(v, H // KV, axis=1)
        sc = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + mask     # (H, T, T)
        sc = np.exp(sc - sc.max(axis=-1, keepdims=True))
        sc /= sc.sum(axis=-1, keepdims=True)
        att = np.einsum("hts,shd->thd", sc, v).reshape(T, H * hd)
        x = x + att @ w[p + "attn_output.weight"].T
        h = rmsnorm(x, w[p + "ffn_norm.weight"], c["eps"])
        gate = h @ w[p + "ffn_gate.weight"].T
        up = h @ w[p + "ffn_up.weight"].T
        x = x + (gate / (1.0 + np.exp(-gate)) * up) @ w[p + "ffn_down.weight"].T
    x = rmsnorm(x, w["output_norm.weight"], c["eps"])
    return x @ w["output.weight"].T                                    # (T, vocab)


def log_softmax(logits):
    m = logits.max(axis=-1, keepdims=True)
    lse = m + np.log(np.exp(logits - m).sum(axis=-1, keepdims=True))
    return logits - lse, lse[..., 0]


def generate(model, prompt, n, stop=()):
    """Greedy decoding (full recompute each step). Returns (new ids, margins), where
    margin = top-1 logit minus top-2 logit at each step (small = near tie)."""
    ids, out, margins = list(prompt), [], []
    for _ in range(n):
        last = forward(model, ids)[-1]
        top2 = np.argsort(-last, kind="stable")[:2]
        tok = int(top2[0])
        out.append(tok)
        margins.append(float(last[top2[0]] - last[top2[1]]))
        ids.append(tok)
        if tok in stop:
            break
    return out, margins


if __name__ == "__main__":
    path = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    prompt = [int(a) for a in sys.argv[3:]] or [1]
    m = load(path)
    print("config:", m["cfg"])
    ids, margins = generate(m, prompt, n)
    print("ids:", " ".join(map(str, ids)))
    print("min margin: %.4g" % min(margins))
