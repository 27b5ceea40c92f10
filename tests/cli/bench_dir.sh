#!/usr/bin/env bash
# `iron bench` on a Hugging Face decoder directory (config.json and model.safetensors, no
# tokenizer): it measures, and its memory line counts the directory's safetensors as the mapped
# file (it asked the file system for the size of the directory itself and failed after measuring).
#   bench_dir.sh IRON
set -euo pipefail
iron=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# A tiny Llama with random f32 weights, written with Python's standard library alone.
python3 - "$dir" <<'PY'
import json, os, random, struct, sys
d = sys.argv[1]
vocab, dim, ffn, layers, heads = 64, 64, 128, 2, 4
shapes = {"model.embed_tokens.weight": (vocab, dim), "model.norm.weight": (dim,), "lm_head.weight": (vocab, dim)}
for i in range(layers):
    p = "model.layers.%d." % i
    for n in ("q", "k", "v", "o"):
        shapes[p + "self_attn.%s_proj.weight" % n] = (dim, dim)
    shapes[p + "mlp.gate_proj.weight"] = (ffn, dim)
    shapes[p + "mlp.up_proj.weight"] = (ffn, dim)
    shapes[p + "mlp.down_proj.weight"] = (dim, ffn)
    shapes[p + "input_layernorm.weight"] = (dim,)
    shapes[p + "post_attention_layernorm.weight"] = (dim,)
rng = random.Random(7)
header, data = {}, bytearray()
for name, shape in shapes.items():
    count = 1
    for s in shape:
        count *= s
    norm = name.endswith("norm.weight")
    values = [1.0] * count if norm else [rng.uniform(-0.1, 0.1) for _ in range(count)]
    begin = len(data)
    data += struct.pack("<%df" % count, *values)
    header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [begin, len(data)]}
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(os.path.join(d, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + data)
json.dump({"model_type": "llama", "num_hidden_layers": layers, "hidden_size": dim, "num_attention_heads": heads,
           "num_key_value_heads": heads, "intermediate_size": ffn, "vocab_size": vocab,
           "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "tie_word_embeddings": False}, open(os.path.join(d, "config.json"), "w"))
PY
out=$("$iron" bench -m "$dir" -p 16 -n 8 -r 1 -t 1 2>&1) || { echo "$out"; echo "FAIL: iron bench on a directory failed"; exit 1; }
echo "$out"
mib=$(python3 -c "import os, sys; print('%.1f' % (os.path.getsize(sys.argv[1]) / 1048576))" "$dir/model.safetensors")
grep -q "mapped file $mib MiB" <<<"$out" || { echo "FAIL: expected 'mapped file $mib MiB' (model.safetensors)"; exit 1; }
echo "ok: iron bench measured the directory; mapped file $mib MiB"
