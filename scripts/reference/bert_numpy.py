#!/usr/bin/env python3
"""Independent numpy reference forward pass for BERT-family sentence encoders (float64), such as
all-MiniLM-L6-v2.

Written from the published architecture (Devlin et al., "BERT", 2019; Hugging Face transformers'
BertModel; sentence-transformers' Pooling and Normalize modules), reading the safetensors file
itself (its 8-byte header length, JSON header and little-endian tensors); everything after is
float64.

    model = load(model_dir)
    vector = embed(model, ids)        # ids: [CLS] ... [SEP], as the tokenizer gives them

Per sentence of T ids (one sentence alone: no padding, so no mask):
    x = LN(word[ids] + position[0..T-1] + token_type[0])          embeddings.*
    per layer (post-norm):
        q, k, v = x Wq^T + bq, x Wk^T + bk, x Wv^T + bv, split into heads of dim/heads
        a = softmax(q k^T / sqrt(head_dim)) v, heads joined        attention.self
        x = LN(x + a Wo^T + bo)                                    attention.output
        x = LN(x + gelu(x Wi^T + bi) Wd^T + bd)                    intermediate, output
    gelu(u) = u/2 (1 + erf(u / sqrt 2)) (hidden_act "gelu", the exact form)
    LN(y) = (y - mean) / sqrt(var + eps) * w + b over the hidden axis, eps = layer_norm_eps
pooled = mean of x over the T rows (pooling_mode_mean_tokens; sentence-transformers' mean over
the attention mask, which for one unpadded sentence is every row), or x[0] for cls pooling;
then x / max(|x|, 1e-12) when modules.json lists Normalize.

CLI: python3 bert_numpy.py MODEL_DIR id ...   (prints the vector's first values and its norm)
"""
import json
import math
import os
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dt = np.dtype(DTYPES[info["dtype"]]).newbyteorder("<")
        out[name] = np.frombuffer(data[begin:end], dtype=dt).reshape(info["shape"]).astype(np.float64)
    return out


def load(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    assert config["model_type"] == "bert" and config.get("hidden_act", "gelu") == "gelu"
    w = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    w = {k[5:] if k.startswith("bert.") else k: v for k, v in w.items()}
    normalize, cls = False, False
    modules = os.path.join(model_dir, "modules.json")
    if os.path.exists(modules):
        for m in json.load(open(modules)):
            if m["type"].endswith("Normalize"):
                normalize = True
            if m["type"].endswith("Pooling"):
                pooling = json.load(open(os.path.join(model_dir, m["path"], "config.json")))
                cls = pooling.get("pooling_mode_cls_token", False)
    return {"config": config, "w": w, "normalize": normalize, "cls": cls}


def layer_norm(y, w, b, eps):
    mean = y.mean(axis=-1, keepdims=True)
    var = ((y - mean) ** 2).mean(axis=-1, keepdims=True)
    return (y - mean) / np.sqrt(var + eps) * w + b


_erf = np.vectorize(math.erf)


def gelu(u):
    return 0.5 * u * (1.0 + _erf(u / math.sqrt(2.0)))


def encode(model, ids):
    """The last layer's rows (T, dim) for one sentence."""
    c, w = model["config"], model["w"]
    eps, heads = c["layer_norm_eps"], c["num_attention_heads"]
    T, dim = len(ids), c["hidden_size"]
    hd = dim // heads
    x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:T]
         + w["embeddings.token_type_embeddings.weight"][0])
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    for i in range(c["num_hidden_layers"]):
        p = "encoder.layer.%d." % i

        def lin(name, y):
            return y @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        q = lin("attention.self.query", x).reshape(T, heads, hd).transpose(1, 0, 2)
        k = lin("attention.self.key", x).reshape(T, heads, hd).transpose(1, 0, 2)
        v = lin("attention.self.value", x).reshape(T, heads, hd).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        s /= s.sum(axis=-1, keepdims=True)
        a = (s @ v).transpose(1, 0, 2).reshape(T, dim)
        x = layer_norm(x + lin("attention.output.dense", a), w[p + "attention.output.LayerNorm.weight"],
                       w[p + "attention.output.LayerNorm.bias"], eps)
        f = gelu(lin("intermediate.dense", x))
        x = layer_norm(x + lin("output.dense", f), w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
    return x


def embed(model, ids, normalize=None):
    x = encode(model, ids)
    pooled = x[0] if model["cls"] else x.mean(axis=0)
    if model["normalize"] if normalize is None else normalize:
        pooled = pooled / max(np.linalg.norm(pooled), 1e-12)
    return pooled


if __name__ == "__main__":
    m = load(sys.argv[1])
    ids = [int(t) for t in sys.argv[2:]] or [101, 7592, 2088, 102]
    raw = embed(m, ids, normalize=False)
    print("first values", raw[:6], "norm", np.linalg.norm(raw))
