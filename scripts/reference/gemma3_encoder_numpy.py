#!/usr/bin/env python3
"""Independent numpy reference for EmbeddingGemma-style sentence encoders (float64): Gemma 3's
blocks attending both ways, then the sentence-transformers modules. Also writes the tiny random
encoder the C++ tests build from the same formula, and its golden vectors.

Written from the published architecture (Hugging Face transformers' Gemma3TextModel with
use_bidirectional_attention; sentence-transformers' Pooling, Dense and Normalize modules),
reading the safetensors files itself (bert_numpy.read_safetensors); everything after the
embedding rows is float64.

    model = load(model_dir)
    vector = embed(model, ids)        # ids: <bos> ... <eos>, as the tokenizer gives them

Per sentence of T ids (alone: no padding), HF names:
    x = embed_tokens[ids] * sqrt(dim)
    per layer:
        a = rms(x) * (1 + w_input_layernorm)
        q = rms_head(Wq a) * (1 + w_q_norm), k = rms_head(Wk a) * (1 + w_k_norm), v = Wv a
        q, k = RoPE_halves(q, k; position 0..T-1; base rope_local_base_freq on sliding layers,
               rope_theta on full ones)
        o = softmax(q k^T / sqrt(query_pre_attn_scalar) + mask) v, query head h reading kv head
            h / (heads / kv_heads)
        mask: full layers see every token; sliding layers see key j from query i when
              |i - j| < sliding_window // 2 + 1 (transformers' Gemma3TextConfig halves the
              window for bidirectional attention, then its overlay keeps distances below it)
        x = x + rms(Wo o) * (1 + w_post_attention_layernorm)
        f = rms(x) * (1 + w_pre_feedforward_layernorm)
        x = x + rms(Wdown (gelu_tanh(Wgate f) * Wup f)) * (1 + w_post_feedforward_layernorm)
    x = rms(x) * (1 + w_norm)
pooled = mean of x's T rows (prompt included); then each Dense module y W^T (+ b); then
y / max(|y|, 1e-12) when modules.json lists Normalize. rms(y) = y / sqrt(mean(y^2) + eps).

CLI: python3 gemma3_encoder_numpy.py MODEL_DIR id ...   (prints the vector's first values)
     python3 gemma3_encoder_numpy.py --tiny                (writes tests/golden/tiny_gemma3_encoder.json)
"""
import json
import math
import os
import struct
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import bert_numpy  # noqa: E402


def load(model_dir):
    config = json.load(open(os.path.join(model_dir, "config.json")))
    assert config["model_type"] in ("gemma3_text", "gemma3") and config.get("use_bidirectional_attention")
    w = bert_numpy.read_safetensors(os.path.join(model_dir, "model.safetensors"))
    w = {k[6:] if k.startswith("model.") else k: v for k, v in w.items()}
    dense, normalize = [], False
    for m in json.load(open(os.path.join(model_dir, "modules.json"))):
        if m["type"].endswith("Dense"):
            t = bert_numpy.read_safetensors(os.path.join(model_dir, m["path"], "model.safetensors"))
            dense.append((t["linear.weight"], t.get("linear.bias")))
        elif m["type"].endswith("Normalize"):
            normalize = True
        elif m["type"].endswith("Pooling"):
            p = json.load(open(os.path.join(model_dir, m["path"], "config.json")))
            assert p["pooling_mode_mean_tokens"] and p.get("include_prompt", True)
    return {"config": config, "w": w, "dense": dense, "normalize": normalize}


def rms(y, w, eps):
    return y / np.sqrt((y * y).mean(axis=-1, keepdims=True) + eps) * (1.0 + w)


def gelu_tanh(u):
    return 0.5 * u * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (u + 0.044715 * u ** 3)))


def rope(x, base):
    """x (T, heads, d), rotating dim i with i + d/2 (rotate_half) by position * base^(-2i/d)."""
    T, _, d = x.shape
    inv = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    angle = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
    cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    a, b = x[..., :d // 2], x[..., d // 2:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def encode(model, ids):
    c, w = model["config"], model["w"]
    eps, heads, kv = c["rms_norm_eps"], c["num_attention_heads"], c["num_key_value_heads"]
    d, dim, T = c["head_dim"], c["hidden_size"], len(ids)
    window = c["sliding_window"] // 2 + 1
    x = w["embed_tokens.weight"][ids] * math.sqrt(dim)
    distance = np.abs(np.arange(T)[:, None] - np.arange(T)[None, :])
    for i in range(c["num_hidden_layers"]):
        p = "layers.%d." % i
        sliding = c["layer_types"][i] == "sliding_attention"
        a = rms(x, w[p + "input_layernorm.weight"], eps)
        q = rms((a @ w[p + "self_attn.q_proj.weight"].T).reshape(T, heads, d), w[p + "self_attn.q_norm.weight"], eps)
        k = rms((a @ w[p + "self_attn.k_proj.weight"].T).reshape(T, kv, d), w[p + "self_attn.k_norm.weight"], eps)
        v = (a @ w[p + "self_attn.v_proj.weight"].T).reshape(T, kv, d)
        base = c["rope_local_base_freq"] if sliding else c["rope_theta"]
        q, k = rope(q, base), rope(k, base)
        out = np.zeros((T, heads, d))
        for h in range(heads):
            g = h // (heads // kv)
            s = q[:, h, :] @ k[:, g, :].T / math.sqrt(c["query_pre_attn_scalar"])
            if sliding:
                s = np.where(distance < window, s, -np.inf)
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            out[:, h, :] = (s / s.sum(axis=-1, keepdims=True)) @ v[:, g, :]
        o = out.reshape(T, heads * d) @ w[p + "self_attn.o_proj.weight"].T
        x = x + rms(o, w[p + "post_attention_layernorm.weight"], eps)
        f = rms(x, w[p + "pre_feedforward_layernorm.weight"], eps)
        f = (gelu_tanh(f @ w[p + "mlp.gate_proj.weight"].T) * (f @ w[p + "mlp.up_proj.weight"].T)) @ \
            w[p + "mlp.down_proj.weight"].T
        x = x + rms(f, w[p + "post_feedforward_layernorm.weight"], eps)
    return rms(x, w["norm.weight"], eps)


def embed(model, ids):
    y = encode(model, ids).mean(axis=0)
    for weight, bias in model["dense"]:
        y = y @ weight.T + (bias if bias is not None else 0.0)
    if model["normalize"]:
        y = y / max(np.linalg.norm(y), 1e-12)
    return y


# ---- the tiny random encoder (the C++ tests write the same files: tests/models/gemma3_encoder_test.cpp) ----

TINY_CONFIG = {
    "model_type": "gemma3_text", "use_bidirectional_attention": True, "hidden_size": 64,
    "num_hidden_layers": 3, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
    "intermediate_size": 96, "vocab_size": 300, "max_position_embeddings": 64, "sliding_window": 8,
    "layer_types": ["sliding_attention", "sliding_attention", "full_attention"], "rope_theta": 1000000.0,
    "rope_local_base_freq": 10000.0, "query_pre_attn_scalar": 32, "rms_norm_eps": 1e-6,
    "hidden_activation": "gelu_pytorch_tanh",
}
TINY_DENSE = [("2_Dense", 64, 128, False), ("3_Dense", 128, 48, True)]


def tiny_values(name, count):
    """Element k of the tensor `name`: 0.5 sin(0.7 k + s) as float32, s the sum of the name's bytes
    divided by 10 (the C++ test computes the same)."""
    s = sum(name.encode()) / 10.0
    return (0.5 * np.sin(0.7 * np.arange(count, dtype=np.float64) + s)).astype(np.float32)


def tiny_tensors():
    c = TINY_CONFIG
    dim, d, ffn = c["hidden_size"], c["head_dim"], c["intermediate_size"]
    shapes = {"embed_tokens.weight": [c["vocab_size"], dim], "norm.weight": [dim]}
    for i in range(c["num_hidden_layers"]):
        p = "layers.%d." % i
        shapes.update({p + "input_layernorm.weight": [dim], p + "post_attention_layernorm.weight": [dim],
                       p + "pre_feedforward_layernorm.weight": [dim], p + "post_feedforward_layernorm.weight": [dim],
                       p + "self_attn.q_proj.weight": [c["num_attention_heads"] * d, dim],
                       p + "self_attn.k_proj.weight": [c["num_key_value_heads"] * d, dim],
                       p + "self_attn.v_proj.weight": [c["num_key_value_heads"] * d, dim],
                       p + "self_attn.o_proj.weight": [dim, c["num_attention_heads"] * d],
                       p + "self_attn.q_norm.weight": [d], p + "self_attn.k_norm.weight": [d],
                       p + "mlp.gate_proj.weight": [ffn, dim], p + "mlp.up_proj.weight": [ffn, dim],
                       p + "mlp.down_proj.weight": [dim, ffn]})
    return {n: tiny_values(n, int(np.prod(s))).reshape(s) for n, s in shapes.items()}


def write_safetensors(path, tensors):
    header, offset = {}, 0
    for name, t in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    blob = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        for t in tensors.values():
            f.write(t.astype("<f4").tobytes())


def write_tiny(model_dir):
    """The model's files but the tokenizer (the tests feed ids)."""
    json.dump(TINY_CONFIG, open(os.path.join(model_dir, "config.json"), "w"))
    write_safetensors(os.path.join(model_dir, "model.safetensors"), tiny_tensors())
    modules = [{"type": "sentence_transformers.models.Transformer", "path": ""},
               {"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"}]
    os.makedirs(os.path.join(model_dir, "1_Pooling"), exist_ok=True)
    json.dump({"pooling_mode_mean_tokens": True}, open(os.path.join(model_dir, "1_Pooling", "config.json"), "w"))
    for path, n_in, n_out, bias in TINY_DENSE:
        os.makedirs(os.path.join(model_dir, path), exist_ok=True)
        json.dump({"in_features": n_in, "out_features": n_out, "bias": bias},
                  open(os.path.join(model_dir, path, "config.json"), "w"))
        t = {"linear.weight": tiny_values(path + "/linear.weight", n_out * n_in).reshape(n_out, n_in)}
        if bias:
            t["linear.bias"] = tiny_values(path + "/linear.bias", n_out)
        write_safetensors(os.path.join(model_dir, path, "model.safetensors"), t)
        modules.append({"type": "sentence_transformers.models.Dense", "path": path})
    modules.append({"type": "sentence_transformers.models.Normalize", "path": "4_Normalize"})
    json.dump(modules, open(os.path.join(model_dir, "modules.json"), "w"))


def tiny_golden():
    # Sentences of 1 to 40 ids: shorter than the window (5 either way), longer, up to 64 rows'
    # buckets; ids from 0 to 299.
    rng = np.random.default_rng(11)
    sentences = [[2, 1], [2, 77, 1]] + [[2] + rng.integers(0, 300, n).tolist() + [1] for n in (3, 6, 9, 15, 23, 38)]
    with tempfile.TemporaryDirectory() as d:
        write_tiny(d)
        model = load(d)
        cases = [{"ids": ids, "vector": [float(v) for v in embed(model, ids)]} for ids in sentences]
    path = os.path.join(ROOT, "tests", "golden", "tiny_gemma3_encoder.json")
    with open(path, "w") as f:
        json.dump({"source": "scripts/reference/gemma3_encoder_numpy.py --tiny (float64)", "cases": cases}, f)
        f.write("\n")
    print("wrote %s: %d sentences" % (path, len(cases)))


if __name__ == "__main__":
    if sys.argv[1:] == ["--tiny"]:
        tiny_golden()
    else:
        m = load(sys.argv[1])
        ids = [int(t) for t in sys.argv[2:]] or [2, 818, 5279, 1]
        print("first values", embed(m, ids)[:6])
