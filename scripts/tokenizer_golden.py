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

Usage: python3 scripts/tokenizer_golden.py [--smollm2 GGUF] [--stories GGUF] [--tokenizer-json DIR]
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
    ap.add_argument("--tokenizer-json", default=None, help="also save SmolLM2's tokenizer.json here")
    args = ap.parse_args()
    out_dir = os.path.join(ROOT, "tests/golden")
    os.makedirs(out_dir, exist_ok=True)
    for name, data in (("pretokenizers", pretokenizers()),
                       ("stories260k", stories(args.stories)),
                       ("smollm2", smollm2(args.smollm2, args.tokenizer_json))):
        path = os.path.join(out_dir, "tokenizer_%s.json" % name)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=True, indent=None, separators=(",", ":"))
            f.write("\n")
        print("wrote", path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
