#!/usr/bin/env python3
"""Writes the golden ids of a sentence encoder's tokenizer, from PyPI `tokenizers` reading the
model's own tokenizer.json, for the C++ tokenizer's tests (Tokenizer::encode_sentence):
tests/golden/tokenizer_minilm.json (all-MiniLM-L6-v2's WordPiece) or
tests/golden/tokenizer_embeddinggemma.json (EmbeddingGemma's BPE with byte fallback).

A tokenizer.json's own truncation and padding are the Hugging Face pipeline's;
sentence-transformers instead truncates at its max_seq_length, keeping the first and last
tokens ([CLS] and [SEP], <bos> and <eos>). So padding is turned off and truncation set to 256
here (MiniLM's max_seq_length; EmbeddingGemma's is 2048, and 256 exercises the cut as well).

The texts: tokenizer_golden.py's (white space, scripts, emoji, code, special tokens), cases for
BERT's normaliser (accents, CJK, control and format characters, case mappings), punctuation
runs, very long words (past the 100-character rule), long texts (past 256 tokens), and random
strings over a stressing alphabet.

Usage: scripts/encoder_tokenizer_golden.py minilm|embeddinggemma [MODEL_DIR]   (default
models/all-MiniLM-L6-v2 or models/embeddinggemma-300m; the environment comes from
scripts/python-env.sh tokenizers)
"""
import json
import os
import random
import sys

import tokenizers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

MAX_SEQ_LENGTH = 256

BERT_TEXTS = [
    "",
    "Hello World",
    "The quick brown fox jumps over the lazy dog.",
    "H\u00e9llo W\u00d6RLD caf\u00e9 na\u00efve \u00c5ngstr\u00f6m r\u00e9sum\u00e9 Bj\u00f6rk",
    "\u0130stanbul \u0131s\u0131k ST\u00c9PHANE \u00df \u1e9e",
    "e\u0301 a\u0308 o\u0302 n\u0303 combining marks A\u030a\u0327",
    "\u4f60\u597d\u4e16\u754c \u6211\u7231\u81ea\u7136\u8bed\u8a00\u5904\u7406",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059\u3002\u3072\u3089\u304c\u306a",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8 \uac00\ub098\ub2e4",
    "mixed\u4e2d\u6587English\u5b57text",
    "\u0420\u0443\u0441\u0441\u043a\u0438\u0439 \u0442\u0435\u043a\u0441\u0442 \u0401\u0436",
    "\u0395\u039b\u039b\u0397\u039d\u0399\u039a\u0391 \u03ac\u03ad\u03ae \u039f\u0394\u039f\u03a3",
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u05e2\u05d1\u05e8\u05d9\u05ea \u0939\u093f\u0928\u094d\u0926\u0940 \u0e44\u0e17\u0e22",
    "emoji \U0001f600\U0001f389\U0001f44d\U0001f3fd \u2764\ufe0f \U0001f1eb\U0001f1f7 \U0001f917",
    "punctuation!!! runs??? ... ,,, ;;; --- *** ((())) [[]] {{}}",
    "a.b,c;d:e!f?g-h_i(j)k[l]m{n}o<p>q/r\\s|t~u`v^w@x#y$z%1&2*3+4=5'6\"7",
    "\u00bfQu\u00e9? \u00a1Hola! \u00ab quotes \u00bb \u201csmart\u201d \u2018single\u2019 \u2014 \u2013 \u2026",
    "tab\tnew\nline\r\nform\x0cfeed\x0bvtab",
    "nul\x00byte and replacement \ufffd char",
    "soft\u00adhyphen zero\u200bwidth joiner\u200d bom\ufeff private\ue000use",
    "no\u00a0break\u3000ideographic\u2009thin\u2028line\u2029para\u0085nel",
    "control\x01\x02\x07\x1b\x7f\x9fchars",
    "ligatures \ufb01 \ufb02 \u01c5 \u01c6 \u2460 \u2167 \u00bd \u00b2",
    "[CLS] [SEP] [MASK] [PAD] [UNK] literal specials",
    "a[MASK]b [cls] [Sep]",
    "URL https://example.com/path?q=1&r=two#frag and email someone@example.org",
    "numbers 12345 3.14159 1,000,000 -42 0x1F 2024-05-01 10:30pm",
    "don't I'll we've she'd THEY'RE it's",
    "def f(x):\n    return x ** 2  # square\n",
    "supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "x" * 100,
    "y" * 101,
    "z" * 250,
    "\u00e9" * 100 + " " + "\u00e9" * 101,
    "word " * 300,
    "The cat sat on the mat. " * 40,
    "    ",
    "\n\n\n",
    "!",
    "a",
    "A",
    "\u00c0",
]

SENTENCES = [
    "A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby.",
    "A man is riding a horse.", "A woman is playing violin.", "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.", "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.", "How do I bake sourdough bread at home?",
    "Retrieval-augmented generation combines search with language models.",
    "Embeddings map sentences to vectors whose cosine measures similarity.",
    "The Eiffel Tower is in Paris, France.", "Photosynthesis converts light into chemical energy.",
    "Python's GIL prevents true parallelism in CPU-bound threads.",
]


# Gemma's own: its special and added tokens written in the text, runs of spaces and new lines
# (added tokens), U+2581 written literally, characters only byte fallback spells, and the
# model's prompts.
GEMMA_TEXTS = [
    "<bos>hello<eos>", "<start_of_turn>user\nhi<end_of_turn>", "a<pad>b<unk>c<mask>d",
    "<unused0> <unused6241> <table><tr><td>cell</td></tr></table>", "[multimodal] <image_soft_token>",
    "two  spaces,   three, \u2581 marker \u2581\u2581 doubled", " leading and trailing ", "\n\nparagraph\n\n\n",
    "\t\ttabbed\tline", "rare \U0001d54f\U0001d550 \U00010348 \U000e0041 \uffff chars",
    "task: search result | query: what is the capital of France?",
    "title: none | text: Paris is the capital and largest city of France.",
    "task: sentence similarity | query: A man is eating food.",
]


def random_texts(n, seed):
    rng = random.Random(seed)
    alphabet = (list("abcXYZ  \t\n'sdlmtvre0123456789.,!?-_()[]{}<>/\\\"#$%^&*") +
                ["\u00e9", "\u00c9", "\u00df", "\u0301", "\u00a0", "\u3000", "\u65e5", "\u672c",
                 "\u0416", "\u0663", "\u00bd", "\U0001f600", "\u200b", "\x1c", "\u0130",
                 "[CLS]", "[MASK]", "##", "un", "able"])
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60))) for _ in range(n)]


MODELS = {"minilm": "all-MiniLM-L6-v2", "embeddinggemma": "embeddinggemma-300m"}


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in MODELS:
        sys.exit("usage: encoder_tokenizer_golden.py minilm|embeddinggemma [MODEL_DIR]")
    which = sys.argv[1]
    model_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "models", MODELS[which])
    tok = tokenizers.Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(MAX_SEQ_LENGTH)
    import tokenizer_golden
    texts = BERT_TEXTS + tokenizer_golden.TEXTS + SENTENCES + random_texts(70, 4321)
    if which == "embeddinggemma":
        texts = GEMMA_TEXTS + texts
    seen = set()
    cases = []
    for text in texts:
        if text in seen:
            continue
        seen.add(text)
        cases.append({"text": text, "ids": tok.encode(text).ids})
    out = {
        "source": "tokenizers %s on %s's tokenizer.json, no padding, truncation at %d"
                  % (tokenizers.__version__, MODELS[which], MAX_SEQ_LENGTH),
        "max_seq_length": MAX_SEQ_LENGTH,
        "cases": cases,
    }
    path = os.path.join(ROOT, "tests", "golden", "tokenizer_%s.json" % which)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print("wrote %s: %d cases" % (path, len(cases)))


if __name__ == "__main__":
    main()
