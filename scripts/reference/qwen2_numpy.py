#!/usr/bin/env python3
"""Independent numpy reference forward pass for GGUF Qwen2 / Qwen2.5 models (float64).

Written from the published architecture (Hugging Face transformers' Qwen2 model) and checked
against how llama.cpp's converter writes the GGUF (see README.md, "Qwen2: facts checked").
Weights are decoded by the `gguf` package (gguf.quants.dequantize, code outside this project)
to float32 and widened to float64; every activation, matmul, softmax and norm is float64.

    model = load(path)
    logits = forward(model, ids)                 # (T, vocab)
    logits = forward(model, ids, rows=[-1])      # only the rows asked for (vocab is 151936)
    ids, margins = generate(model, prompt, n)    # greedy

Per block (HF names, then GGUF names):
    a = rms(x) * w_in                                    input_layernorm / attn_norm
    q = Wq a + bq, k = Wk a + bk, v = Wv a + bv          q_proj/k_proj/v_proj with bias / attn_q.bias...
    q, k = RoPE_neox(q, k; rope_theta)                   dim i pairs with i + head_dim/2 (rotate_half)
    x = x + Wo softmax(q k^T / sqrt(head_dim) + causal) v      (no bias on o_proj)
    f = rms(x) * w_post                                  post_attention_layernorm / ffn_norm
    x = x + Wdown (silu(Wgate f) * Wup f)
logits = W_out . (rms(x) * w_norm); W_out is output.weight, or token_embd when the file has none.
Query head h reads key/value head h // (n_head / n_kv).

CLI: python3 qwen2_numpy.py MODEL.gguf [n_tokens] [id ...]   (default: <|endoftext|>, 16)
"""
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_numpy as llama  # noqa: E402  (rmsnorm, rope, attention, log_softmax, generate, cli)


def load(path):
    """The config and the weights. token_embd stays float32 (only its gathered rows are widened,
    which is exact); every other tensor is widened to float64."""
    r = GGUFReader(path)
    arch = llama._field(r, "general.architecture")
    assert arch == "qwen2", f"{path}: architecture {arch!r}, expected qwen2"
    g = lambda k, d=None: llama._field(r, f"qwen2.{k}", d)
    w = {}
    for t in r.tensors:
        a = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
        a = a.reshape([int(d) for d in reversed(t.shape)])
        w[t.name] = a if t.name == "token_embd.weight" else a.astype(np.float64)
    cfg = dict(
        n_layer=int(g("block_count")),
        dim=int(g("embedding_length")),
        ffn=int(g("feed_forward_length")),
        n_head=int(g("attention.head_count")),
        n_kv=int(g("attention.head_count_kv")),
        eps=float(g("attention.layer_norm_rms_epsilon")),
        rope_base=float(g("rope.freq_base")),
        context=int(g("context_length")),
    )
    cfg["head_dim"] = cfg["dim"] // cfg["n_head"]
    assert g("rope.scaling.type") in (None, "none"), "RoPE scaling is not in this reference"
    cfg["tied"] = "output.weight" not in w
    cfg["vocab"] = w["token_embd.weight"].shape[0]
    return {"cfg": cfg, "w": w, "reader": r}


def hidden(model, token_ids, neox=True):
    """The final normed hidden states (T, dim). neox=False pairs adjacent dims instead (only for
    the check that the GGUF wants NEOX pairs: README.md)."""
    c, w = model["cfg"], model["w"]
    T, H, KV, hd, eps = len(token_ids), c["n_head"], c["n_kv"], c["head_dim"], c["eps"]
    rms = llama.rmsnorm
    x = w["token_embd.weight"][np.asarray(token_ids)].astype(np.float64)
    mask = np.triu(np.full((T, T), -np.inf), k=1)
    for l in range(c["n_layer"]):
        p = f"blk.{l}."
        a = rms(x, w[p + "attn_norm.weight"], eps)
        q = (a @ w[p + "attn_q.weight"].T + w[p + "attn_q.bias"]).reshape(T, H, hd)
        k = (a @ w[p + "attn_k.weight"].T + w[p + "attn_k.bias"]).reshape(T, KV, hd)
        v = (a @ w[p + "attn_v.weight"].T + w[p + "attn_v.bias"]).reshape(T, KV, hd)
        q = llama.rope(q, hd, c["rope_base"], neox=neox)
        k = llama.rope(k, hd, c["rope_base"], neox=neox)
        o = llama.attention(q, k, v, mask, 1.0 / np.sqrt(hd))
        x = x + o @ w[p + "attn_output.weight"].T
        f = rms(x, w[p + "ffn_norm.weight"], eps)
        gate = f @ w[p + "ffn_gate.weight"].T
        x = x + (gate / (1.0 + np.exp(-gate)) * (f @ w[p + "ffn_up.weight"].T)) @ w[p + "ffn_down.weight"].T
    return rms(x, w["output_norm.weight"], eps)


def forward(model, token_ids, rows=None, neox=True):
    """Logits (len(rows) or T, vocab)."""
    h = hidden(model, token_ids, neox)
    if rows is not None:
        h = h[np.asarray(rows)]
    w = model["w"]
    out = w["token_embd.weight"] if model["cfg"]["tied"] else w["output.weight"]
    return h @ np.asarray(out, dtype=np.float64).T


def generate(model, prompt, n, stop=()):
    return llama.generate(model, prompt, n, stop, forward_fn=forward)


log_softmax = llama.log_softmax

if __name__ == "__main__":
    llama.cli(sys.modules[__name__], 151643, 16)
