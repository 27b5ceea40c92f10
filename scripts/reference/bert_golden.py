#!/usr/bin/env python3
"""Writes tests/golden/minilm_embeddings.json: all-MiniLM-L6-v2's sentence vectors from the float64
numpy reference (bert_numpy.py) for 200+ sentences, for the C++ encoder's test.

Each sentence's ids come from PyPI `tokenizers` on the model's tokenizer.json (no padding,
truncation at sentence-transformers' max_seq_length, 256), so the C++ test feeds the graph the
same ids; the WordPiece test checks separately that IRON's tokenizer gives them. Per sentence:
its text, ids, the norm of the pooled vector before normalisation, and the normalised vector as
float32 little-endian, base64 (200+ x 384 floats stay near 400 KB this way).

The sentences: short everyday ones, questions, the tokenizer golden's Unicode and punctuation
cases, and generated ones of 5 to 300 words (so every bucket from 32 to 256 tokens is used and a
few are cut at 256).

Usage: scripts/reference/bert_golden.py [MODEL_DIR]   (environment: scripts/python-env.sh numpy
tokenizers; default models/all-MiniLM-L6-v2)
"""
import base64
import json
import os
import random
import sys

import numpy as np
import tokenizers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import bert_numpy  # noqa: E402

MAX_SEQ_LENGTH = 256

SENTENCES = [
    "A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby.",
    "A man is riding a horse.", "A woman is playing violin.", "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.", "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.", "A cheetah is running behind its prey.",
    "How do I bake sourdough bread at home?", "What is the capital of France?",
    "Paris is the capital and most populous city of France.", "Berlin is the capital of Germany.",
    "Retrieval-augmented generation combines search with language models.",
    "Embeddings map sentences to vectors whose cosine measures similarity.",
    "The Eiffel Tower is in Paris, France.", "Photosynthesis converts light into chemical energy.",
    "Python's GIL prevents true parallelism in CPU-bound threads.", "I love you.", "I hate you.",
    "The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium.",
    "Hello World", "", "!", "a", "[CLS] [SEP] [MASK]", "H\u00e9llo W\u00d6RLD caf\u00e9 na\u00efve",
    "\u4f60\u597d\u4e16\u754c \u6211\u7231\u81ea\u7136\u8bed\u8a00\u5904\u7406", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
    "emoji \U0001f600\U0001f389\U0001f44d and \u2764\ufe0f", "punctuation!!! runs??? ... ,,, ;;;",
    "numbers 12345 3.14159 1,000,000 -42", "def f(x):\n    return x ** 2\n",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
]

WORDS = ("the of and to in is was for on that with as by at from his her it an were are which this be "
         "has had or one their not but new first two after who its year city school river music war "
         "film album world team game history season family village university church station house "
         "water light language model vector search query answer question data computer network system "
         "energy market country government people children garden winter summer mountain ocean "
         "library museum kitchen engine bridge forest island desert storm train letter story").split()


def generated(n, seed):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = rng.randint(5, 60) if i % 4 else rng.randint(80, 300)
        text = " ".join(rng.choice(WORDS) for _ in range(words))
        out.append(text[0].upper() + text[1:] + rng.choice([".", "?", "!", ""]))
    return out


def main():
    model_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models", "all-MiniLM-L6-v2")
    tok = tokenizers.Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(MAX_SEQ_LENGTH)
    model = bert_numpy.load(model_dir)
    assert model["normalize"] and not model["cls"]
    cases = []
    texts = SENTENCES + generated(170, 77)
    for i, text in enumerate(texts):
        ids = tok.encode(text).ids
        raw = bert_numpy.embed(model, ids, normalize=False)
        norm = float(np.linalg.norm(raw))
        vec = (raw / max(norm, 1e-12)).astype("<f4")
        cases.append({"text": text, "ids": ids, "norm": norm,
                      "vector": base64.b64encode(vec.tobytes()).decode("ascii")})
        if i % 50 == 0:
            print("%d/%d" % (i, len(texts)), file=sys.stderr)
    lengths = [len(c["ids"]) for c in cases]
    out = {"source": "scripts/reference/bert_numpy.py (float64) on all-MiniLM-L6-v2; ids from tokenizers %s, "
                     "truncation at %d" % (tokenizers.__version__, MAX_SEQ_LENGTH),
           "dim": int(vec.shape[0]), "cases": cases}
    path = os.path.join(ROOT, "tests", "golden", "minilm_embeddings.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print("wrote %s: %d sentences, %d to %d ids, %d cut at %d" % (
        path, len(cases), min(lengths), max(lengths), sum(n == MAX_SEQ_LENGTH for n in lengths), MAX_SEQ_LENGTH))


if __name__ == "__main__":
    main()
