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


def read_gguf(path):
    """(reader, g, weights): g(key, default) reads '<arch>.<key>' metadata; weights maps each
    tensor name to its float64 array, shaped (ne1, ne0): rows = outputs, cols = inputs."""
    r = GGUFReader(path)
    arch = _field(r, "general.architecture")
    g = lambda k, d=None: _field(r, f"{arch}.{k}", d)
    w = {}
    for t in r.tensors:
        a = dequantize(t.data, t.tensor_type)  # float32
        w[t.name] = np.asarray(a, dtype=np.float64).reshape([int(d) for d in reversed(t.shape)])
    return r, g, w


def load(path):
    r, g, w = read_gguf(path)
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
    if "output.weight" not in w:  # tied embeddings
        w["output.weight"] = w["token_embd.weight"]
    cfg["vocab"] = w["output.weight"].shape[0]
    return {"cfg": cfg, "w": w, "reader": r}


def rmsnorm(x, g, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g


def rope(x, n_rot, base, neox=False, pos_scale=1.0):
    """x: (T, heads, head_dim); rotate pairs of the first n_rot dims by pos * base^(-2i/n_rot).
    Pair i is (2i, 2i+1) in llama.cpp's "normal" mode, (i, i + n_rot/2) in "NEOX" mode (the
    halves, HF's rotate_half). pos_scale multiplies positions (linear RoPE scaling: 1/factor)."""
    T = x.shape[0]
    inv = base ** (-np.arange(0, n_rot, 2, dtype=np.float64) / n_rot)  # (n_rot/2,)
    ang = (np.arange(T, dtype=np.float64) * pos_scale)[:, None] * inv[None, :]  # (T, n_rot/2)
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    ia, ib = ((slice(0, n_rot // 2), slice(n_rot // 2, n_rot)) if neox
              else (slice(0, n_rot, 2), slice(1, n_rot, 2)))
    a, b = x[..., ia], x[..., ib]
    out = x.copy()
    out[..., ia] = a * c - b * s
    out[..., ib] = a * s + b * c
    return out


def attention(q, k, v, mask, scale):
    """q: (T, H, hd), k/v: (T, KV, hd), mask: (T, T) additive. Query head j uses kv head
    j // (H/KV). Returns (T, H*hd)."""
    T, H, _ = q.shape
    k = np.repeat(k, H // k.shape[1], axis=1)
    v = np.repeat(v, H // v.shape[1], axis=1)
    sc = np.einsum("thd,shd->hts", q, k) * scale + mask              # (H, T, T)
    sc = np.exp(sc - sc.max(axis=-1, keepdims=True))
    sc /= sc.sum(axis=-1, keepdims=True)
    return np.einsum("hts,shd->thd", sc, v).reshape(T, -1)


def forward(model, token_ids, rows=None):
    """Logits (T, vocab), or only at the positions in rows."""
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
        att = attention(q, k, v, mask, 1.0 / np.sqrt(hd))
        x = x + att @ w[p + "attn_output.weight"].T
        h = rmsnorm(x, w[p + "ffn_norm.weight"], c["eps"])
        gate = h @ w[p + "ffn_gate.weight"].T
        up = h @ w[p + "ffn_up.weight"].T
        x = x + (gate / (1.0 + np.exp(-gate)) * up) @ w[p + "ffn_down.weight"].T
    if rows is not None:
        x = x[np.asarray(rows)]
    x = rmsnorm(x, w["output_norm.weight"], c["eps"])
    return x @ w["output.weight"].T                                    # (T, vocab)


def log_softmax(logits):
    m = logits.max(axis=-1, keepdims=True)
    lse = m + np.log(np.exp(logits - m).sum(axis=-1, keepdims=True))
    return logits - lse, lse[..., 0]


def generate(model, prompt, n, stop=(), forward_fn=None):
    """Greedy decoding (full recompute each step). Returns (new ids, margins), where
    margin = top-1 logit minus top-2 logit at each step (small = near tie).
    forward_fn: a forward(model, ids, rows) (default: this module's)."""
    forward_fn = forward_fn or forward
    ids, out, margins = list(prompt), [], []
    for _ in range(n):
        last = forward_fn(model, ids, rows=[-1])[0]
        top2 = np.argsort(-last, kind="stable")[:2]
        tok = int(top2[0])
        out.append(tok)
        margins.append(float(last[top2[0]] - last[top2[1]]))
        ids.append(tok)
        if tok in stop:
            break
    return out, margins


def cli(mod, bos, n_default):
    """MODEL.gguf [n_tokens] [id ...]: prints the config and the greedy ids after the prompt
    (default: just BOS)."""
    path = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else n_default
    prompt = [int(a) for a in sys.argv[3:]] or [bos]
    m = mod.load(path)
    print("config:", m["cfg"])
    ids, margins = mod.generate(m, prompt, n)
    print("ids:", " ".join(map(str, ids)))
    print("min margin: %.4g" % min(margins))


if __name__ == "__main__":
    cli(sys.modules[__name__], 1, 60)
