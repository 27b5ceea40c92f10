#!/usr/bin/env python3
"""Independent numpy reference forward pass for GGUF Gemma 3 text models (float64).

Written from the published architecture (Hugging Face transformers' Gemma3 text model, the
Gemma 3 report) and checked against how llama.cpp's converter writes the GGUF. Weights are
decoded by the `gguf` package (llama_numpy.read_gguf); everything after is float64.

    model = load(path)
    logits = forward(model, ids)                 # (T, vocab)
    logits = forward(model, ids, rows=[-1])      # only the rows asked for (vocab is 262144)
    ids, margins = generate(model, prompt, n)    # greedy

Per block (HF names, then GGUF names):
    h = x                                                      (residual)
    a = rms(h) * w_in                                          input_layernorm / attn_norm
    q = rms_head(Wq a) * w_qn, k = rms_head(Wk a) * w_kn, v = Wv a   q_norm/k_norm over head_dim
    q, k = RoPE_neox(q, k; base)        base: 10000 on sliding layers, rope.freq_base on global
    o = Wo softmax(q k^T / sqrt(query_pre_attn_scalar) + mask) v
    x = h + rms(o) * w_post_attn                               post_attention_layernorm
    f = rms(x) * w_pre_ffw                                     pre_feedforward_layernorm / ffn_norm
    x = x + rms(Wdown (gelu_tanh(Wgate f) * Wup f)) * w_post_ffw   post_feedforward_layernorm
x0 = token_embd[ids] * sqrt(dim); logits = token_embd . (rms(x) * w_out) (tied embeddings).

Facts this relies on, each checked (see README.md):
- HF's Gemma3RMSNorm computes x * (1 + w); llama.cpp's converter adds 1 to every tensor whose
  name ends in "norm.weight" (Gemma3Model.norm_shift), so the GGUF weight is used as stored.
- The converter does not permute Gemma's Q/K rows (llama's converter does), and llama.cpp
  runs Gemma 3 with NEOX RoPE: dim i pairs with i + head_dim/2, as HF's rotate_half.
- Layer i is global (full attention) when (i + 1) % 6 == 0 (HF's layer_types default,
  sliding_window_pattern 6; llama.cpp's set_swa_pattern(6)); the others see the last
  `sliding_window` positions: key j is visible from query t when 0 <= t - j < window.
- The attention scale is 1/sqrt(query_pre_attn_scalar); the GGUF does not store that scalar,
  and llama.cpp uses 1/sqrt(head_dim) (= 1/16, equal to 256^-0.5) for every size but 27B.

CLI: python3 gemma3_numpy.py MODEL.gguf [n_tokens] [id ...]   (default: BOS, 16)
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_numpy as llama  # noqa: E402

GLOBAL_EVERY = 6            # sliding_window_pattern: every 6th layer attends globally
LOCAL_ROPE_BASE = 10000.0   # rope_local_base_freq; not in the GGUF (llama.cpp hard-codes it)


def load(path):
    r, g, w = llama.read_gguf(path)
    arch = llama._field(r, "general.architecture")
    assert arch == "gemma3", f"{path}: architecture {arch!r}, expected gemma3"
    cfg = dict(
        n_layer=int(g("block_count")),
        dim=int(g("embedding_length")),
        ffn=int(g("feed_forward_length")),
        n_head=int(g("attention.head_count")),
        n_kv=int(g("attention.head_count_kv")),
        head_dim=int(g("attention.key_length")),
        eps=float(g("attention.layer_norm_rms_epsilon")),
        rope_base=float(g("rope.freq_base", 1_000_000.0)),
        rope_base_local=LOCAL_ROPE_BASE,
        # Linear RoPE scaling (the 4B+ models, global layers only); absent for 270M.
        rope_scale=float(g("rope.scaling.factor", 1.0) or 1.0),
        sliding_window=int(g("attention.sliding_window")),
        final_softcap=g("final_logit_softcapping"),   # None for Gemma 3
    )
    cfg["query_pre_attn_scalar"] = cfg["head_dim"]
    cfg["global_layers"] = [i for i in range(cfg["n_layer"]) if (i + 1) % GLOBAL_EVERY == 0]
    assert "output.weight" not in w, "Gemma 3 ties the classifier to token_embd"
    cfg["vocab"] = w["token_embd.weight"].shape[0]
    return {"cfg": cfg, "w": w, "reader": r}


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def masks(T, window):
    """Additive causal masks: (global, sliding)."""
    d = np.arange(T)[:, None] - np.arange(T)[None, :]   # query t minus key j
    glob = np.where(d >= 0, 0.0, -np.inf)
    return glob, np.where((d >= 0) & (d < window), 0.0, -np.inf)


def hidden(model, token_ids):
    """The final normed hidden states (T, dim), before the classifier."""
    c, w = model["cfg"], model["w"]
    T, H, KV, hd, eps = len(token_ids), c["n_head"], c["n_kv"], c["head_dim"], c["eps"]
    rms = llama.rmsnorm
    x = w["token_embd.weight"][np.asarray(token_ids)] * math.sqrt(c["dim"])
    glob_mask, local_mask = masks(T, c["sliding_window"])
    scale = 1.0 / math.sqrt(c["query_pre_attn_scalar"])
    for l in range(c["n_layer"]):
        p = f"blk.{l}."
        is_global = l in c["global_layers"]
        base = c["rope_base"] if is_global else c["rope_base_local"]
        pos_scale = 1.0 / c["rope_scale"] if is_global else 1.0
        a = rms(x, w[p + "attn_norm.weight"], eps)
        q = rms((a @ w[p + "attn_q.weight"].T).reshape(T, H, hd), w[p + "attn_q_norm.weight"], eps)
        k = rms((a @ w[p + "attn_k.weight"].T).reshape(T, KV, hd), w[p + "attn_k_norm.weight"], eps)
        v = (a @ w[p + "attn_v.weight"].T).reshape(T, KV, hd)
        q = llama.rope(q, hd, base, neox=True, pos_scale=pos_scale)
        k = llama.rope(k, hd, base, neox=True, pos_scale=pos_scale)
        o = llama.attention(q, k, v, glob_mask if is_global else local_mask, scale)
        x = x + rms(o @ w[p + "attn_output.weight"].T, w[p + "post_attention_norm.weight"], eps)
        f = rms(x, w[p + "ffn_norm.weight"], eps)
        y = gelu_tanh(f @ w[p + "ffn_gate.weight"].T) * (f @ w[p + "ffn_up.weight"].T)
        x = x + rms(y @ w[p + "ffn_down.weight"].T, w[p + "post_ffw_norm.weight"], eps)
    return rms(x, w["output_norm.weight"], eps)


def forward(model, token_ids, rows=None):
    """Logits (len(rows) or T, vocab); rows selects positions (a full-vocab float64 row is 2 MiB)."""
    h = hidden(model, token_ids)
    if rows is not None:
        h = h[np.asarray(rows)]
    logits = h @ model["w"]["token_embd.weight"].T
    cap = model["cfg"]["final_softcap"]
    return logits if not cap else cap * np.tanh(logits / cap)


def generate(model, prompt, n, stop=()):
    return llama.generate(model, prompt, n, stop, forward_fn=forward)


log_softmax = llama.log_softmax

if __name__ == "__main__":
    llama.cli(sys.modules[__name__], 2, 16)
