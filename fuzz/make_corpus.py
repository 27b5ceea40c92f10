#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora under fuzz/corpus/<target>/: small GGUF and safetensors files,
configs, tokenizers, profiles, chat templates and texts, all generated here (no model file is
copied). With --stories PATH, also a metadata-only copy of stories260K's GGUF header (its config and
tokenizer keys, no tensors; about 10 KB). Rerun it to regenerate; every file stays under 64 KB."""
import argparse
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# GGUF value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
              BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}


def gguf_string(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gguf_value(vtype, value):
    if vtype == STRING:
        return gguf_string(value)
    if vtype == ARRAY:
        etype, items = value
        out = struct.pack("<IQ", etype, len(items))
        for item in items:
            out += gguf_value(etype, item)
        return out
    return struct.pack(SCALAR_FMT[vtype], value)


def gguf(kvs, tensors=(), version=3, alignment=32, raw_kv_bytes=b"", raw_kv_count=0):
    """kvs: [(key, type, value)]; tensors: [(name, dims (ggml order), ggml type, data bytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs) + raw_kv_count)
    out += raw_kv_bytes
    for key, vtype, value in kvs:
        out += gguf_string(key) + struct.pack("<I", vtype) + gguf_value(vtype, value)
    data = b""
    for name, dims, ttype, blob in tensors:
        data += b"\0" * (-len(data) % alignment)
        out += gguf_string(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", ttype, len(data))
        data += blob
    out += b"\0" * (-len(out) % alignment)
    return out + data


# ggml types: id -> (block elements, block bytes)
GGML = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20),
        "Q5_0": (6, 32, 22), "Q5_1": (7, 32, 24), "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144),
        "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210), "I8": (24, 1, 1), "I32": (26, 1, 4),
        "BF16": (30, 1, 2)}


def tensor(name, dims, kind, fill=0x3C):
    tid, block, nbytes = GGML[kind]
    n = 1
    for d in dims:
        n *= d
    size = n // block * nbytes
    blob = bytes((fill + i * 7) & 0xFF for i in range(size))
    return (name, dims, tid, blob)


def llama_kvs(layers=1, dim=32, heads=4, kv_heads=2, ffn=64, ctx=128, vocab=None):
    kvs = [("general.architecture", STRING, "llama"), ("general.name", STRING, "tiny"),
           ("llama.block_count", U32, layers), ("llama.embedding_length", U32, dim),
           ("llama.attention.head_count", U32, heads), ("llama.attention.head_count_kv", U32, kv_heads),
           ("llama.feed_forward_length", U32, ffn), ("llama.context_length", U32, ctx),
           ("llama.rope.freq_base", F32, 10000.0),
           ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5)]
    if vocab is not None:
        kvs.append(("llama.vocab_size", U32, vocab))
    return kvs


def llama_tensors(layers=1, dim=32, kv_dim=16, ffn=64, vocab=32, kind="F32", tied=False):
    ts = [tensor("token_embd.weight", [dim, vocab], kind), tensor("output_norm.weight", [dim], "F32")]
    if not tied:
        ts.append(tensor("output.weight", [dim, vocab], kind))
    for i in range(layers):
        p = f"blk.{i}."
        ts += [tensor(p + "attn_norm.weight", [dim], "F32"), tensor(p + "attn_q.weight", [dim, dim], kind),
               tensor(p + "attn_k.weight", [dim, kv_dim], kind), tensor(p + "attn_v.weight", [dim, kv_dim], kind),
               tensor(p + "attn_output.weight", [dim, dim], kind), tensor(p + "ffn_norm.weight", [dim], "F32"),
               tensor(p + "ffn_gate.weight", [dim, ffn], kind), tensor(p + "ffn_up.weight", [dim, ffn], kind),
               tensor(p + "ffn_down.weight", [ffn, dim], kind)]
    return ts


def byte_unicode():
    """GPT-2's byte-to-character table."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def gpt2_vocab():
    """256 byte characters, a few merges, and ChatML control tokens."""
    bu = byte_unicode()
    tokens = [bu[b] for b in range(256)]
    merges = []
    for a, b in [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), ("\u0120", "w"), ("o", "r"),
                 ("\u0120w", "or"), ("l", "d"), ("\u0120wor", "ld"), ("1", "2"), ("\u0120", "t")]:
        merges.append(a + " " + b)
        tokens.append(a + b)
    types = [1] * len(tokens)
    for special in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]:
        tokens.append(special)
        types.append(3)
    tokens.append("<user_defined>")
    types.append(4)
    return tokens, types, merges


def spm_vocab():
    """SentencePiece: <unk> <s> </s>, 256 byte tokens, then pieces with scores."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    pieces = ["\u2581", "e", "t", "a", "o", "h", "l", "\u2581t", "he", "\u2581the", "ll", "o\u2581",
              "\u2581a", "in", "\u2581h", "el", "\u2581he", "llo", "\u2581hello", "w", "r", "d", "\u2581w",
              "or", "\u2581wor", "ld", "\u2581world", "\u00e9", "\u20ac"]
    tokens += pieces
    types += [1] * len(pieces)
    scores = [0.0] * (3 + 256) + [-float(i) for i in range(len(pieces))]
    return tokens, types, scores


CHATML = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
          "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
          "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def gpt2_tokenizer_kvs(pre="smollm"):
    tokens, types, merges = gpt2_vocab()
    n = len(tokens)
    return [("tokenizer.ggml.model", STRING, "gpt2"), ("tokenizer.ggml.pre", STRING, pre),
            ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
            ("tokenizer.ggml.token_type", ARRAY, (I32, types)),
            ("tokenizer.ggml.merges", ARRAY, (STRING, merges)),
            ("tokenizer.ggml.bos_token_id", U32, n - 4), ("tokenizer.ggml.eos_token_id", U32, n - 4),
            ("tokenizer.ggml.padding_token_id", U32, n - 2), ("tokenizer.chat_template", STRING, CHATML)]


def spm_tokenizer_kvs():
    tokens, types, scores = spm_vocab()
    return [("tokenizer.ggml.model", STRING, "llama"), ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
            ("tokenizer.ggml.scores", ARRAY, (F32, scores)), ("tokenizer.ggml.token_type", ARRAY, (I32, types)),
            ("tokenizer.ggml.bos_token_id", U32, 1), ("tokenizer.ggml.eos_token_id", U32, 2),
            ("tokenizer.ggml.unknown_token_id", U32, 0), ("tokenizer.ggml.add_bos_token", BOOL, True),
            ("tokenizer.ggml.add_space_prefix", BOOL, True)]


def gguf_metadata_only(path, keep_tensors=False):
    """The header of a real GGUF file with its tensors dropped: metadata bytes copied as they are."""
    with open(path, "rb") as f:
        data = f.read()
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", data, 0)
    assert magic == b"GGUF"
    pos = 24

    def skip_string(p):
        (n,) = struct.unpack_from("<Q", data, p)
        return p + 8 + n

    def skip_value(p, vtype):
        if vtype == STRING:
            return skip_string(p)
        if vtype == ARRAY:
            etype, count = struct.unpack_from("<IQ", data, p)
            p += 12
            for _ in range(count):
                p = skip_value(p, etype)
            return p
        return p + struct.calcsize(SCALAR_FMT[vtype])

    for _ in range(n_kv):
        pos = skip_string(pos)
        (vtype,) = struct.unpack_from("<I", data, pos)
        pos = skip_value(pos + 4, vtype)
    return gguf([], version=version, raw_kv_bytes=data[24:pos], raw_kv_count=n_kv)


def safetensors(header, data=b"", pad=True):
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-(8 + len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + data


def write(target, name, content):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(content, str):
        content = content.encode()
    assert len(content) < 64 * 1024, (target, name, len(content))
    with open(os.path.join(d, name), "wb") as f:
        f.write(content)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stories", help="stories260K.gguf, for a metadata-only seed")
    args = ap.parse_args()

    # ---- GGUF files ----
    every_type = [("u8", U8, 7), ("i8", I8, -7), ("u16", U16, 700), ("i16", I16, -700), ("u32", U32, 70000),
                  ("i32", I32, -70000), ("f32", F32, 1.5), ("bool", BOOL, True), ("string", STRING, "h\u00e9llo"),
                  ("u64", U64, 2**40), ("i64", I64, -(2**40)), ("f64", F64, 2.25),
                  ("ints", ARRAY, (I32, [1, 2, 3])), ("floats", ARRAY, (F32, [0.5, 1.5])),
                  ("strings", ARRAY, (STRING, ["a", "bc", ""])), ("u64s", ARRAY, (U64, [1, 2**33])),
                  ("nested", ARRAY, (ARRAY, [(I8, [1, -1]), (STRING, ["x"])])),
                  ("general.alignment", U32, 32)]
    dtypes = [tensor(f"t.{k.lower()}", [256, 2], k) for k in GGML]
    gguf_files = {
        "empty_v3.gguf": gguf([]),
        "empty_v2.gguf": gguf([], version=2),
        "every_type.gguf": gguf(every_type),
        "every_dtype.gguf": gguf([("general.alignment", U32, 64)], dtypes, alignment=64),
        "small_f32.gguf": gguf([("a", U32, 1)], [tensor("x", [3, 5], "F32"), tensor("scalar", [], "F32"),
                                                  tensor("zero", [0, 4], "F32")]),
    }
    for name, blob in gguf_files.items():
        write("gguf_reader", name, blob)
    tiny = llama_kvs(vocab=32)
    write("gguf_reader", "tiny_llama_q8.gguf", gguf(tiny, llama_tensors(kind="Q8_0")))
    write("gguf_config", "tiny_llama_f16.gguf", gguf(tiny + [("llama.rope.dimension_count", U32, 8)],
                                                     llama_tensors(kind="F16")))
    write("gguf_config", "tiny_llama_tied_q4.gguf",
          gguf(llama_kvs(layers=2, dim=64, heads=2, kv_heads=1, ffn=64) + [("llama.attention.key_length", U32, 32)],
               llama_tensors(layers=2, dim=64, kv_dim=32, ffn=64, kind="Q4_0", tied=True)))
    write("gguf_config", "llama_with_tokenizer.gguf", gguf(llama_kvs() + spm_tokenizer_kvs(),
                                                           [tensor("token_embd.weight", [32, 288], "F16")]))
    write("gguf_config", "gpt2_arch.gguf", gguf([("general.architecture", STRING, "gpt2")]))
    write("gguf_tokenizer", "spm.gguf", gguf(spm_tokenizer_kvs()) + b"Hello world \xc3\xa9\xe2\x82\xac<s>")
    for pre in ["smollm", "gpt2", "llama-bpe", "qwen2"]:
        write("gguf_tokenizer", f"bpe_{pre}.gguf",
              gguf(gpt2_tokenizer_kvs(pre)) + b"hello world 12345 <|im_start|>\xf0\x9f\x98\x80 \xff")
    if args.stories:
        header = gguf_metadata_only(args.stories)
        for target in ["gguf_reader", "gguf_config", "gguf_tokenizer"]:
            write(target, "stories260K_metadata.gguf", header + b"Once upon a time")

    # ---- safetensors ----
    f32 = struct.pack("<6f", *range(6))
    st = {
        "f32.safetensors": safetensors({"x": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}, f32),
        "meta.safetensors": safetensors({"__metadata__": {"format": "pt"},
                                         "a": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]},
                                         "b": {"dtype": "I64", "shape": [1], "data_offsets": [8, 16]},
                                         "c": {"dtype": "F16", "shape": [0], "data_offsets": [16, 16]}},
                                        bytes(range(16))),
        "unpadded.safetensors": safetensors({"s": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}},
                                            f32[:4], pad=False),
        "misaligned.safetensors": safetensors({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                                               "b": {"dtype": "F32", "shape": [2], "data_offsets": [1, 9]}},
                                              bytes(9)),
    }
    for name, blob in st.items():
        write("safetensors_reader", name, blob)
    write("safetensors_reader", "header_only.json",
          json.dumps({"w": {"dtype": "F16", "shape": [8, 4], "data_offsets": [0, 64]},
                      "v": {"dtype": "I32", "shape": [2], "data_offsets": [64, 72]},
                      "__metadata__": {"k": "v"}}))

    # ---- config.json ----
    smol = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 576,
            "intermediate_size": 1536, "num_attention_heads": 9, "num_hidden_layers": 30,
            "num_key_value_heads": 3, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
            "rope_theta": 100000, "tie_word_embeddings": True, "vocab_size": 49152, "torch_dtype": "bfloat16"}
    write("hf_config", "smollm2_like.json", json.dumps(smol, indent=2))
    write("hf_config", "minilm.json", json.dumps({
        "model_type": "bert", "vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6,
        "num_attention_heads": 12, "intermediate_size": 1536, "max_position_embeddings": 512,
        "type_vocab_size": 2, "hidden_act": "gelu", "layer_norm_eps": 1e-12, "max_seq_length": 256,
        "pooling_mode_mean_tokens": True}))
    write("hf_config", "head_dim.json", json.dumps(dict(smol, head_dim=64, rope_scaling=None)))
    write("hf_config", "minimal.json", json.dumps({k: smol[k] for k in [
        "hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers",
        "max_position_embeddings", "vocab_size"]}))
    write("hf_config", "scaling.json", json.dumps(dict(smol, rope_scaling={"type": "linear", "factor": 2.0})))
    gemma = {"model_type": "gemma3_text", "hidden_size": 640, "intermediate_size": 2048, "num_attention_heads": 4,
             "num_hidden_layers": 18, "num_key_value_heads": 1, "head_dim": 256, "max_position_embeddings": 32768,
             "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "sliding_window": 512,
             "query_pre_attn_scalar": 256, "hidden_activation": "gelu_pytorch_tanh", "vocab_size": 262144,
             "layer_types": ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(18)]}
    write("hf_config", "gemma3_270m.json", json.dumps(gemma, indent=2))
    write("hf_config", "gemma3_multimodal.json", json.dumps({"model_type": "gemma3", "text_config": dict(
        gemma, layer_types=None, sliding_window_pattern=6)}))

    # ---- a saved conversation (iron chat's /save) ----
    write("conversation_json", "three_turns.json", json.dumps({"messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!", "ids": [19556, 17]}, {"role": "user", "content": "Bye"}]}, indent=1))
    write("conversation_json", "empty.json", json.dumps({"messages": []}))

    # ---- request bodies of `iron serve` (first byte: 1 chat, 0 completion) ----
    write("serve_request", "chat_stream.json", "\x01" + json.dumps({
        "model": "m", "messages": [{"role": "system", "content": "Be brief."},
                                   {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
        "stream": True, "stream_options": {"include_usage": True}, "max_tokens": 16, "temperature": 0.7,
        "top_p": 0.9, "top_k": 40, "seed": -5, "stop": ["\n\n", "User:"], "unknown_field": {"a": [1]}}))
    write("serve_request", "completion.json", "\x00" + json.dumps({
        "prompt": ["Once upon a time"], "max_tokens": 8, "temperature": 0, "stop": "girl", "n": 1,
        "seed": 18446744073709551615, "return_tokens": True, "ignore_eos": True}))
    write("serve_request", "wrong_types.json", "\x00" + json.dumps({"prompt": 5, "max_tokens": "8"}))
    write("serve_request", "embeddings.json", "\x02" + json.dumps({
        "model": "m", "input": ["A man is eating food.", "", "\u00e9t\u00e9"], "encoding_format": "base64",
        "user": "u"}))

    # ---- tokenizer.json ----
    tokens, types, merges = gpt2_vocab()
    vocab = {t: i for i, t in enumerate(tokens) if types[i] == 1}
    added = [{"id": i, "content": t, "special": types[i] == 3} for i, t in enumerate(tokens) if types[i] != 1]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    base = {"version": "1.0", "normalizer": None, "added_tokens": added,
            "model": {"type": "BPE", "vocab": vocab, "merges": merges, "ignore_merges": False}}
    config = json.dumps({"bos_token": "<|endoftext|>", "eos_token": {"content": "<|im_end|>"},
                         "add_bos_token": False, "chat_template": CHATML})
    write("tokenizer_json", "gpt2.json", json.dumps(dict(base, pre_tokenizer=byte_level)))
    write("tokenizer_json", "smollm.json", json.dumps(dict(base, pre_tokenizer={
        "type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, byte_level]}))
        + "\0" + config)
    for name, pattern in [("llama3", r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
                          ("qwen2", r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")]:
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
            dict(byte_level, use_regex=False)]}
        pair_merges = [m.split(" ") for m in merges]
        write("tokenizer_json", f"{name}.json",
              json.dumps(dict(base, pre_tokenizer=pre, model=dict(base["model"], merges=pair_merges,
                                                                 ignore_merges=True))))

    # A WordPiece (BERT) tokenizer.json: a small vocabulary with continuation pieces, both
    # post-processor forms.
    wp_tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "it", "'", "s",
                 "un", "##aff", "##able", "!", ".", ":", "1", "##2", "##3", "e", "\u20ac"]
    wp_post = {"type": "TemplateProcessing",
               "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                          {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
               "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                  "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}}
    wordpiece = {"version": "1.0",
                 "added_tokens": [{"id": i, "content": t, "special": True} for i, t in enumerate(wp_tokens[:5])],
                 "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                                "strip_accents": None, "lowercase": True},
                 "pre_tokenizer": {"type": "BertPreTokenizer"}, "post_processor": wp_post,
                 "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                           "max_input_chars_per_word": 100, "vocab": {t: i for i, t in enumerate(wp_tokens)}}}
    write("tokenizer_json", "wordpiece.json", json.dumps(wordpiece))
    write("tokenizer_json", "wordpiece_bert_processing.json", json.dumps(dict(
        wordpiece, post_processor={"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]})))

    # ---- texts for the real tokenizers ----
    texts = {"english.txt": "Once upon a time, there was a little girl named Lily. She loved to play outside.",
             "unicode.txt": "caf\u00e9 \u20ac5 \u65e5\u672c\u8a9e \U0001F600 na\u00efve \u0394\u03b5\u03bb\u03c4\u03b1",
             "whitespace.txt": "  leading\ttabs\n\n\nnewlines   trailing  \r\n",
             "digits.txt": "1234567890 3.14159 2024-01-01 0x1F",
             "special.txt": "<s>hi</s><|im_start|>user\nhello<|im_end|><|endoftext|><0x41>",
             "contractions.txt": "I'm you're he'll they've it's we'd DON'T",
             "empty.txt": "", "space.txt": " "}
    for name, t in texts.items():
        write("tokenizer_encode", name, t)
    write("tokenizer_encode", "invalid_utf8.bin", b"ok \xff\xfe \xc3 \xe2\x82 \xed\xa0\x80 \xf4\x90\x80\x80 \xc0\xaf end")
    write("tokenizer_encode", "bytes.bin", bytes(range(256)))

    # ---- profiles ----
    write("profile_json", "gemm.json", '{"entries": [\n  {"operator":"GEMM","N":576,"tile_n":32},\n'
          '  {"operator":"ProjectionGEMM","epilogue":"silu","tile_n":8}\n]}\n')
    write("profile_json", "mixed.json", json.dumps({"entries": [
        {"operator": "GEMV", "K": 576, "N": 1536, "tile_n": 64},
        {"operator": "Attention", "heads": 9, "kv_heads": 3, "head_dim": 64, "block": 16},
        {"operator": "GEMM", "M": 1, "K": 2, "N": 3, "b_col_maj": True, "precision": "high", "tile_n": 4},
        {"operator": "GEMM", "tile_n": 8}]}))
    write("profile_json", "empty.json", '{"entries": []}')

    # ---- chat templates ----
    write("chat_template", "chatml_default_system.txt", CHATML + "\0Hello, who are you?")
    write("chat_template", "chatml_plain.txt",
          "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}\0hi")
    write("chat_template", "chatml_double_quotes.txt",
          '{% if messages[0]["role"] != "system" %}{{ "<|im_start|>system\\nBe \\"nice\\".<|im_end|>\\n" }}'
          '{% endif %}<|im_start|>')
    write("chat_template", "llama2.txt", "{{ bos_token }}[INST] {{ messages[0]['content'] }} [/INST]\0content")


if __name__ == "__main__":
    sys.exit(main())
