#!/usr/bin/env python3
"""Writes the tokenizer golden files the C++ tests compare against.

Requires: pip install gguf tokenizers numpy (jinja2 optional, for the chat template check).

tests/golden/tokenizer_smollm2.json
    SmolLM2-135M-Instruct's tokenizer rebuilt with the Hugging Face `tokenizers` package from
    the GGUF's own vocabulary and merges, with SmolLM2's pre-tokenizer (Digits with
    individual_digits, then ByteLevel without prefix space) and its 17 special tokens; the
    texts below encoded by it, and the chat template rendered by jinja2.
tests/golden/tokenizer_stories260k.json
    stories260K's SentencePiece vocabulary run through a plain re-implementation of llama.cpp's
    SPM algorithm (below; a quadratic one, unlike the C++), checked first against known facts:
    BOS + "Zoo" and the 60 greedy ids of ../shared/models/SOURCES.md.
tests/golden/tokenizer_qwen2.json (when the Qwen2.5-Coder-0.5B GGUF is present)
    Qwen2.5's tokenizer rebuilt with `tokenizers` from the GGUF's vocabulary and merges, with
    Qwen2's pre-tokenizer (its Split regex, as Qwen's tokenizer.json writes it, then ByteLevel
    without a regex) and its added tokens (control ones special, user-defined ones not, as the
    GGUF types them); no normalizer, as llama.cpp runs the GGUF (Qwen's own tokenizer.json has
    an NFC normalizer: where NFC changes a text, ids_nfc holds what that tokenizer gives). The chat
    template rendered by jinja2 for several conversations.
tests/golden/tokenizer_gemma3.json (when the Gemma 3 GGUF is present)
    Gemma 3's vocabulary assembled into a SentencePiece ModelProto (pip install sentencepiece
    protobuf) and encoded by Google's own `sentencepiece` library; every text is also checked
    against llama-cpp-python (pip install llama-cpp-python), which reads the GGUF itself.

Usage: python3 scripts/tokenizer_golden.py [--smollm2 GGUF] [--stories GGUF] [--gemma3 GGUF]
                                           [--qwen2 GGUF] [--only NAME] [--tokenizer-json DIR]
"""
import argparse
import json
import os

import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

TEXTS = [
    "",
    " ",
    "Hello world",
    "Hello, World! How are you today?",
    "  leading spaces and trailing   ",
    "multiple   spaces\tand\ttabs",
    "line one\nline two\n\nline four\r\nwindows\n",
    "don't I'll we've she'd THEY'RE it's 'sx 'Re",
    "numbers: 12345 3.14 1,000,000 -42 0x1F 2024-05-01",
    "x  1 and  22 and\t333",
    "\u00bd \u00b2 \u0663\u0664 \u2167 \u2460",
    "h\u00e9llo w\u00f6rld caf\u00e9 na\u00efve \u00c5ngstr\u00f6m",
    "e\u0301 combining accent",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059\u3002\u4e2d\u6587\u5b57\u7b26",
    "\ud55c\uad6d\uc5b4 \u0420\u0443\u0441\u0441\u043a\u0438\u0439 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u05e2\u05d1\u05e8\u05d9\u05ea",
    "emoji \U0001f916\U0001f389\U0001f44d\U0001f3fd and \u2764\ufe0f flags \U0001f1eb\U0001f1f7",
    "def f(x):\n\treturn x * 2  # double\n\nclass A:\n    def g(self):\n        pass\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "MixedCASE camelCase snake_case SCREAMING_CASE",
    "a\x1cb\x1fc\x0bd\x0ce",
    "no\u00a0break\u3000ideographic\u2009thin",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "text<|endoftext|>more<|im_end|>",
    "<|im_start|><|im_start|>",
    "https://example.com/path?q=1&r=two#frag",
    "Once upon a time, there was a little girl named Lily. She loved to play outside.",
    "\n\n\n",
    "   \n   x",
    "!!!??? ...",
]


def random_texts(n=120, seed=1234):
    """Deterministic random strings over an alphabet chosen to stress the pre-tokenizer: runs of
    spaces and newlines, digits, apostrophes, letters of several scripts, marks, emoji."""
    import random
    rng = random.Random(seed)
    alphabet = (list("abcXYZ  \t\n\r'sdlmtvre0123456789.,!?-_()[]{}<>/\\\"#") +
                ["\u00e9", "\u00df", "\u0301", "\u00a0", "\u3000", "\u65e5", "\u672c",
                 "\u0416", "\u0663", "\u00bd", "\U0001f600", "\u2028", "\x1c", "\u200b",
                 "<|im_start|>", "<|im_end|>"])
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(n)]


def gguf_arrays(path):
    r = gguf.GGUFReader(path)

    def arr(key):
        f = r.fields[key]
        return [f.parts[i] for i in f.data]

    def scalar(key):
        f = r.fields.get(key)
        if f is None:
            return None
        if f.types[0] == gguf.GGUFValueType.STRING:
            return bytes(f.parts[f.data[0]]).decode("utf-8")
        return f.parts[f.data[0]][0]

    tokens = [bytes(p).decode("utf-8") for p in arr("tokenizer.ggml.tokens")]
    types = [int(p[0]) for p in arr("tokenizer.ggml.token_type")]
    merges = ([bytes(p).decode("utf-8") for p in arr("tokenizer.ggml.merges")]
              if "tokenizer.ggml.merges" in r.fields else [])
    scores = ([float(p[0]) for p in arr("tokenizer.ggml.scores")]
              if "tokenizer.ggml.scores" in r.fields else [])
    return tokens, types, merges, scores, scalar


def smollm2(path, json_dir):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    tokens, types, merges, _, scalar = gguf_arrays(path)
    assert scalar("tokenizer.ggml.pre") == "smollm"
    vocab = {t: i for i, t in enumerate(tokens)}
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=pairs))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == 3])
    cases = []
    for text in TEXTS + random_texts():
        ids = tok.encode(text, add_special_tokens=False).ids
        assert tok.decode(ids, skip_special_tokens=False) == text, text
        cases.append({"text": text, "ids": ids})
    template = scalar("tokenizer.chat_template")
    chat = None
    try:
        import jinja2
        env = jinja2.Environment()
        messages = [{"role": "user", "content": "Hi"}]
        chat = {
            "messages": messages,
            "rendered": env.from_string(template).render(messages=messages,
                                                         add_generation_prompt=True),
        }
    except ImportError:
        print("jinja2 missing: no chat template golden")
    if json_dir:  # a tokenizer.json for trying the C++ loader by hand; never committed
        os.makedirs(json_dir, exist_ok=True)
        tok.save(os.path.join(json_dir, "tokenizer.json"))
    return {"source": "tokenizers %s on the GGUF vocabulary" % __import__("tokenizers").__version__,
            "cases": cases, "chat": chat}


class SentencePieceBpe:
    """llama.cpp's SPM encoding, written plainly: merge the best-scoring adjacent pair (leftmost
    on ties) until none is a token, then spell unknown characters with <0xNN> byte tokens."""

    def __init__(self, tokens, types, scores):
        self.pieces = {t: i for i, t in reversed(list(enumerate(tokens))) if types[i] in (1, 4)}
        self.scores = scores
        self.bytes = {int(t[3:5], 16): i for i, t in enumerate(tokens) if types[i] == 6}
        self.tokens, self.types = tokens, types

    def encode_text(self, text):
        syms = list(text)
        while True:
            best = None
            for i in range(len(syms) - 1):
                tid = self.pieces.get(syms[i] + syms[i + 1])
                if tid is not None and (best is None or self.scores[tid] > best[0]):
                    best = (self.scores[tid], i)
            if best is None:
                break
            i = best[1]
            syms[i:i + 2] = [syms[i] + syms[i + 1]]
        out = []
        for s in syms:
            if s in self.pieces:
                out.append(self.pieces[s])
            else:
                out += [self.bytes[b] for b in s.encode("utf-8")]
        return out

    def encode(self, text, bos=True):
        # Special tokens written in the text (control, unknown), longest first at each position.
        specials = sorted([(t, i) for i, t in enumerate(self.tokens) if self.types[i] in (2, 3, 4)],
                          key=lambda x: -len(x[0]))
        out = [1] if bos else []
        after_special, start, i = True, 0, 0

        def flush(seg):
            nonlocal after_special
            if seg:
                s = (" " if after_special else "") + seg
                out.extend(self.encode_text(s.replace(" ", "\u2581")))
                after_special = False

        while i < len(text):
            hit = next(((t, tid) for t, tid in specials if text.startswith(t, i)), None)
            if hit is None:
                i += 1
                continue
            flush(text[start:i])
            out.append(hit[1])
            after_special = True
            i += len(hit[0])
            start = i
        flush(text[start:])
        return out

    def decode(self, ids):
        out = b""
        for t in ids:
            if self.types[t] == 6:
                out += bytes([int(self.tokens[t][3:5], 16)])
            else:
                out += self.tokens[t].replace("\u2581", " ").encode("utf-8")
        return out.decode("utf-8", errors="replace")


PATTERNS = {
    "gpt2": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
    "llama-bpe": (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
    "qwen2": (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
              r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
}


def pretokenizers():
    """The words each pre-tokenizer regex cuts the texts into, by the `tokenizers` package's
    regex engine (Split with the pattern, as the models' tokenizer.json files write it)."""
    from tokenizers import Regex, pre_tokenizers

    extra = ["a\n  b\r\n\r\n  c \n", "(abc) [x]\n\ny", "\tabc 'S 'LL", "1234567 x12y", "  \n"]
    out = {"source": "tokenizers %s" % __import__("tokenizers").__version__}
    for name, pattern in PATTERNS.items():
        split = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
        out[name] = [{"text": t, "words": [w for w, _ in split.pre_tokenize_str(t)]}
                     for t in TEXTS + extra + random_texts(n=60, seed=99)]
    return out


# Texts for Gemma 3 beyond TEXTS: its vocabulary's user-defined pieces (runs of spaces, tabs and
# newlines, HTML tags), control tokens written as plain text, byte fallback, many scripts.
GEMMA3_TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello",
    " Hello",
    "  two leading spaces",
    "a\tb\t\tc\t\t\t\td",
    "x" + " " * 40 + "y",
    "\n" * 35 + "end",
    "    indented\n        more\n\t\ttabbed\n",
    "if (x) {\n\treturn 1;\n}\n\n\n// done",
    "import numpy as np\n\ndef main() -> None:\n    print(np.arange(10))\n",
    "<table><tr><td>cell</td></tr></table>",
    "<h1>Title</h1><p>para <b>bold</b> <em>it</em></p><br/>",
    "<div class=\"x\"><span>hi</span></div>",
    "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
    "<bos><eos><pad><unk><mask>[multimodal]<start_of_image>",
    "<unused0> <unused6241>",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u8fd9\u662f\u4e00\u4e2a\u6d4b\u8bd5\u3002",
    "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c \u30ab\u30bf\u30ab\u30ca",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 123",
    "\u05e9\u05dc\u05d5\u05dd \u0928\u092e\u0938\u094d\u0924\u0947 \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35",
    "\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5 \u041f\u0440\u0438\u0432\u0435\u0442 \u10d2\u10d0\u10db\u10d0\u10e0\u10ef\u10dd\u10d1\u10d0",
    "\U0001f600\U0001f601\U0001f602\U0001f923 \U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466",
    "\U0001f44b\U0001f3fb\U0001f44b\U0001f3ff \U0001f3f3\ufe0f\u200d\U0001f308 \u2764\ufe0f\u200d\U0001f525",
    "rare: \U0001d49c\U0001d4b7 \U00010348 \U0001f9ec \u2603 \U000e0041 \U0010fffd",
    "controls: \x00\x01\x02\x07\x08\x1b[0m\x7f end",
    "\u200b\u200c\u200d\u2060\ufeff zero widths",
    "\ufffd replacement and \U0001f98a fox",
    "123 4567 89012 3.14159 -0.5e-10 1e6 0x7fff 1_000_000",
    "2024-12-01T05:10:00Z, $1,234.56, 50%, #42, @user, a&b",
    "!!!???...;;;:::---___===+++***///\\\\|||~~~```",
    "https://example.com/a/b?c=d&e=f#g mailto:someone@example.org",
    "The year 1999 and 2000; pi=3.14; e=2.718.",
    "Ma\u00f1ana \u00fcber na\u00efve fa\u00e7ade \u0153uvre \u00c6sir \u0141\u00f3d\u017a",
    "mixed: English \u4e2d\u6587 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 \ud55c\uad6d\uc5b4 \u0440\u0443\u0441\u0441\u043a\u0438\u0439 \U0001f30d",
    "trailing newline\n",
    "\r\n\r\nwindows\r\n",
    " \n \n \t \t ",
    "\u2581 literal lower one eighth block \u2581\u2581",
    "$$\\int_0^1 x^2\\,dx = \\frac{1}{3}$$",
    "SELECT * FROM users WHERE id = 42 AND name LIKE '%bob%';",
    '{"key": [1, 2, {"nested": null}], "b": true}',
]


# Texts for Qwen2.5 beyond TEXTS (and GEMMA3_TEXTS): code in several languages (the Coder
# model's material), CJK, emoji, every special token, whitespace runs, digit runs, contractions.
QWEN2_TEXTS = [
    "#include <stdio.h>\nint main(void) {\n    printf(\"%d\\n\", 42);\n    return 0;\n}\n",
    "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}",
    "const f = async (a, b) => { await g(a ?? b); return a?.c || `t${b}`; };",
    "SELECT id, COUNT(*) AS n FROM t GROUP BY id HAVING n > 10 ORDER BY n DESC;",
    "<|fim_prefix|>def add(a, b):\n    <|fim_suffix|>\n    return c<|fim_middle|>",
    "<|repo_name|>iron\n<|file_sep|>src/main.cpp\nint x;<|file_sep|>",
    "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
    "<|object_ref_start|>a<|object_ref_end|><|box_start|>(1,2)<|box_end|><|quad_start|><|quad_end|>",
    "<|vision_start|><|image_pad|><|video_pad|><|vision_pad|><|vision_end|>",
    "<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n",
    "<|endoftext|><|endoftext|>x<|endoftext|>",
    "<|im_start <|im_end| im_start|> <|endoftext",
    "[PAD151665] [PAD151700]",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u8fd9\u662f\u4e00\u4e2a\u6d4b\u8bd5\u3002\u6211\u4eec\u7528 Python \u5199\u4ee3\u7801\u3002",
    "\u8bf7\u7528\u4e2d\u6587\u56de\u7b54\uff1a1+1\u7b49\u4e8e\u51e0\uff1f\u7b54\uff1a\u7b49\u4e8e2\u3002",
    "\u3053\u3093\u306b\u3061\u306f\u3001\u4e16\u754c\uff01\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a\u3002\uff11\uff12\uff13",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8\uc785\ub2c8\ub2e4. \uc22b\uc790 123.",
    "\U0001f600\U0001f601\U0001f602\U0001f923 \U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 \U0001f44b\U0001f3fb",
    "\U0001f680\U0001f525\u2728\U0001f4af\u2705\u274c \U0001f1fa\U0001f1f8\U0001f1ef\U0001f1f5",
    "0 1 12 123 1234 12345 123456 1234567890 3.14159 -0.5e-10 0xdeadBEEF 1_000_000",
    "\uff10\uff11\uff12 \u0660\u0661\u0662 \u0966\u0967 \u2070\u00b9\u00b2 \u2153 \u216b",
    "x" + " " * 17 + "y" + "\t" * 5 + "z" + "\n" * 7 + "w",
    "    \n\n    \t\n  \r\n\r\n   end   ",
    " " * 33,
    "\n" * 12,
    "a\u00a0\u00a0b\u2003\u2003c\u3000\u3000d",
    "I'm sure they're here, we've seen 'em; it'll be OK, she'd say. IT'S HE'LL WE'D",
    "can't won't shouldn't y'all ma'am rock'n'roll O'Neil",
    "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX.",
    "e\u0301\u00e9 o\u0308\u00f6 A\u030a\u00c5 \u1e9b\u0323 \ufb01",
    "https://github.com/user/repo/blob/main/src/file.py#L10-L20",
    "{\"a\": [1, 2.5, null, true], \"b\": {\"c\": \"d\"}}",
    "$$\\sum_{i=1}^{n} i = \\frac{n(n+1)}{2}$$",
    "// comment\n/* block */\n# hash\n-- dash\n<!-- html -->",
    "if x == 1:\n\tpass\nelif x != 2:\n\t\treturn None\nelse:\n    raise ValueError('bad')",
    "\x00\x01\x1b[31mred\x1b[0m\x7f",
    "\u200b\u200c\u200d\u2060\ufeff zero widths",
    "\ufffd replacement \U0010ffff last",
    "Ma\u00f1ana \u00fcber na\u00efve fa\u00e7ade \u0153uvre \u0141\u00f3d\u017a \u0391\u03b8\u03ae\u03bd\u03b1",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u05e9\u05dc\u05d5\u05dd \u0928\u092e\u0938\u094d\u0924\u0947 \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35",
]

# Conversations for the chat template check (no tools): jinja2 renders each from the GGUF's
# template, with and without a system message, several turns, and add_generation_prompt.
QWEN2_CHATS = [
    ([{"role": "user", "content": "What is the capital of France?"}], True),
    ([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}], True),
    ([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
      {"role": "user", "content": "Write a loop in C."}], True),
    ([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}], False),
    ([{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
      {"role": "system", "content": "S2"}, {"role": "user", "content": "U2"}], True),
]


def qwen2_tokenizer(path):
    """(tokenizer, scalar): Qwen2's tokenizer in `tokenizers` from the GGUF's arrays."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    tokens, types, merges, _, scalar = gguf_arrays(path)
    assert scalar("tokenizer.ggml.model") == "gpt2" and scalar("tokenizer.ggml.pre") == "qwen2"
    vocab = {t: i for i, t in enumerate(tokens) if types[i] == 1}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges]))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PATTERNS["qwen2"]), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    # Added tokens in id order, so each keeps its GGUF id (checked below).
    tok.add_tokens([AddedToken(t, special=ty == 3, normalized=False)
                    for t, ty in zip(tokens, types) if ty in (3, 4)])
    for i, (t, ty) in enumerate(zip(tokens, types)):
        if ty in (3, 4):
            assert tok.token_to_id(t) == i, (t, i)
    return tok, scalar


def qwen2(path, json_dir):
    """The golden cases (no BOS: add_bos_token is false; special tokens parsed), with NFC's
    effect on each text recorded, and the chat template rendered by jinja2."""
    import unicodedata

    import jinja2

    from tokenizers import normalizers

    tok, scalar = qwen2_tokenizer(path)
    nfc_tok, _ = qwen2_tokenizer(path)
    nfc_tok.normalizer = normalizers.NFC()
    assert not scalar("tokenizer.ggml.add_bos_token")
    cases = []
    for text in QWEN2_TEXTS + GEMMA3_TEXTS + TEXTS + random_texts():
        ids = tok.encode(text, add_special_tokens=False).ids
        assert tok.decode(ids, skip_special_tokens=False) == text, text
        case = {"text": text, "ids": ids}
        if unicodedata.normalize("NFC", text) != text:
            # What Qwen's own tokenizer.json (an NFC normalizer first) gives instead.
            case["ids_nfc"] = nfc_tok.encode(text, add_special_tokens=False).ids
        cases.append(case)
    template = scalar("tokenizer.chat_template")
    env = jinja2.Environment()
    chats = [{"messages": m, "add_generation_prompt": g,
              "rendered": env.from_string(template).render(messages=m, add_generation_prompt=g)}
             for m, g in QWEN2_CHATS]
    if json_dir:  # a tokenizer.json for trying the C++ loader by hand; never committed
        os.makedirs(json_dir, exist_ok=True)
        tok.save(os.path.join(json_dir, "tokenizer.json"))
    return {"source": "tokenizers %s on the GGUF vocabulary and merges (scripts/tokenizer_golden.py:"
                      "qwen2_tokenizer), chat by jinja2 %s" % (__import__("tokenizers").__version__,
                                                               jinja2.__version__),
            # The cases' special tokens are parsed (as `tokenizers` parses added tokens), so
            # llama.cpp's tokenize is asked to parse them too.
            "cases": cases, "chats": chats,
            "llama_cpp_check": llama_cpp_check(path, cases, add_bos=False, special=True)}


def gemma3_sentencepiece(path):
    """(processor, bos id): Gemma 3's tokenizer as Google's `sentencepiece` library runs it,
    from the GGUF's arrays: pieces, scores and types go into a ModelProto (BPE, byte fallback,
    identity normaliser that keeps spaces and writes them as U+2581, no dummy prefix: Gemma's
    tokenizer.model settings). llama.cpp's converter writes user-defined pieces with U+2581
    turned into ' ' (it matches them in the raw text), so they are turned back here."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    tokens, types, _, scores, scalar = gguf_arrays(path)
    assert scalar("tokenizer.ggml.model") == "llama" and not scalar("tokenizer.ggml.add_space_prefix")
    bos, unk = int(scalar("tokenizer.ggml.bos_token_id")), int(scalar("tokenizer.ggml.unknown_token_id"))
    P = pb.ModelProto.SentencePiece
    kinds = {1: P.NORMAL, 3: P.CONTROL, 4: P.USER_DEFINED, 5: P.UNUSED, 6: P.BYTE}
    m = pb.ModelProto()
    for i, (t, ty, sc) in enumerate(zip(tokens, types, scores)):
        piece = m.pieces.add()
        piece.piece = t.replace(" ", "\u2581") if ty == 4 else t
        piece.score = sc
        piece.type = P.UNKNOWN if i == unk else kinds[ty]
    m.trainer_spec.model_type = pb.TrainerSpec.BPE
    m.trainer_spec.vocab_size = len(tokens)
    m.trainer_spec.byte_fallback = True
    m.trainer_spec.unk_id, m.trainer_spec.bos_id = unk, bos
    m.trainer_spec.eos_id = int(scalar("tokenizer.ggml.eos_token_id"))
    m.trainer_spec.pad_id = int(scalar("tokenizer.ggml.padding_token_id"))
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = False
    m.normalizer_spec.remove_extra_whitespaces = False
    m.normalizer_spec.escape_whitespaces = True
    return spm.SentencePieceProcessor(model_proto=m.SerializeToString()), bos


def gemma3(path):
    """The golden cases: BOS (2) first, as the GGUF's add_bos_token says; control tokens
    written in the text are plain text (parse_special off)."""
    import sentencepiece as spm

    sp, bos = gemma3_sentencepiece(path)
    cases = []
    for text in GEMMA3_TEXTS + TEXTS + random_texts():
        ids = [bos] + sp.encode(text)
        case = {"text": text, "ids": ids}
        decoded = sp.decode(ids[1:])
        if decoded != text:  # only a literal U+2581, which decodes as the space it stands for
            assert decoded == text.replace("\u2581", " "), text
            case["decoded"] = decoded
        cases.append(case)
    return {"source": "sentencepiece %s on a ModelProto built from the GGUF vocabulary "
                      "(scripts/tokenizer_golden.py:gemma3)" % spm.__version__,
            "cases": cases, "llama_cpp_check": llama_cpp_check(path, cases)}


def llama_cpp_check(path, cases, add_bos=True, special=False):
    """Encodes every case with llama.cpp (llama-cpp-python, the GGUF's own loader): the record of
    how many agree, and which do not."""
    try:
        import llama_cpp
    except ImportError:
        return None
    lm = llama_cpp.Llama(path, vocab_only=True, verbose=False)
    differ = [i for i, c in enumerate(cases)
              if lm.tokenize(c["text"].encode("utf-8"), add_bos=add_bos, special=special) != c["ids"]]
    return {"llama_cpp_python": llama_cpp.__version__, "cases_checked": len(cases),
            "cases_equal": len(cases) - len(differ), "differing_cases": differ}


KNOWN_IDS = [int(x) for x in """403 407 261 378 432 383 286 261 376 298 315 421 395 317 426 338 401
396 267 337 410 408 419 292 411 322 265 282 295 433 426 385 328 432 358 394 261 370 432 352 266 268
388 426 338 391 266 267 337 335 312 432 398 312 286 267 414 270 333 415""".split()]
KNOWN_TEXT = (" Once upon a time, there was a little girl named Lily. She loved to play outside"
              " in the park. One day, she saw a big, red ball. She wanted to play with it, but it"
              " was too high")


def stories(path):
    tokens, types, _, scores, _ = gguf_arrays(path)
    spm = SentencePieceBpe(tokens, types, scores)
    assert spm.decode(KNOWN_IDS) == KNOWN_TEXT
    # The generated ids are also the canonical encoding of their text (without the prefix space,
    # which the tokenizer adds back).
    assert spm.encode(KNOWN_TEXT[1:], bos=False) == KNOWN_IDS
    zoo = spm.encode("Zoo")
    cases = [{"text": t, "ids": spm.encode(t)} for t in TEXTS + random_texts()]
    return {"source": "plain SentencePiece BPE re-implementation in scripts/tokenizer_golden.py",
            "known_ids": KNOWN_IDS, "known_text": KNOWN_TEXT, "zoo_with_bos": zoo,
            "cases": cases}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smollm2", default=os.path.join(ROOT, "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--stories", default=os.path.join(ROOT, "../shared/models/stories260K.gguf"))
    ap.add_argument("--gemma3", default=os.path.join(ROOT, "models/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--qwen2", default=os.path.join(ROOT, "models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"))
    ap.add_argument("--only", default=None, help="write only this golden (pretokenizers, stories260k, smollm2, "
                                                 "gemma3, qwen2)")
    ap.add_argument("--tokenizer-json", default=None,
                    help="also save SmolLM2's (with --only qwen2: Qwen2's) tokenizer.json here")
    args = ap.parse_args()
    out_dir = os.path.join(ROOT, "tests/golden")
    os.makedirs(out_dir, exist_ok=True)
    makers = [("pretokenizers", pretokenizers),
              ("stories260k", lambda: stories(args.stories)),
              ("smollm2", lambda: smollm2(args.smollm2, None if args.only == "qwen2" else args.tokenizer_json)),
              ("gemma3", lambda: gemma3(args.gemma3), args.gemma3),
              ("qwen2", lambda: qwen2(args.qwen2, args.tokenizer_json if args.only == "qwen2" else None), args.qwen2)]
    outputs = []
    for name, make, *needs in makers:
        if args.only and name != args.only:
            continue
        if needs and not os.path.exists(needs[0]):
            print(needs[0], "is absent: tokenizer_%s.json not written" % name)
            continue
        outputs.append((name, make()))
    for name, data in outputs:
        path = os.path.join(out_dir, "tokenizer_%s.json" % name)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=True, indent=None, separators=(",", ":"))
            f.write("\n")
        print("wrote", path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
