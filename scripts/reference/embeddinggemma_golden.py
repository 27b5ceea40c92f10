#!/usr/bin/env python3
"""Writes tests/golden/embeddinggemma_embeddings.json: EmbeddingGemma-300M's sentence vectors from
sentence-transformers (PyPI `sentence-transformers` on torch, float32, CPU) for 200+ sentences,
for the C++ encoder's test.

Per sentence: its text, the prompt name it was encoded with (none, "query", "document",
"Clustering"), the ids sentence-transformers fed the model (prompt included; <bos> ... <eos>, cut
at max_seq_length 2048), and the normalised vector as float16 little-endian, base64 (an f16
vector's cosine to its f32 source is 1 - 1e-7, well inside the test's 1e-5).

The sentences: bert_golden.py's everyday, Unicode and punctuation ones, generated ones of 5 to
300 words, a few of 300 to 1500 words (past the sliding layers' window of 257 tokens either way,
so the window's bounds decide their vectors), and four cut at 2048 tokens, two with a prompt.
Each is encoded alone (batch 1: no padding).

Usage: scripts/reference/embeddinggemma_golden.py [MODEL_DIR]   (environment: a venv with
sentence-transformers and torch; default models/embeddinggemma-300m)
"""
import base64
import json
import os
import random
import sys

import numpy as np
import sentence_transformers
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import bert_golden  # noqa: E402


def long_texts(n, words_from, words_to, seed):
    rng = random.Random(seed)
    return [" ".join(rng.choice(bert_golden.WORDS) for _ in range(rng.randint(words_from, words_to))) + "."
            for _ in range(n)]


def main():
    model_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models", "embeddinggemma-300m")
    torch.manual_seed(0)
    model = sentence_transformers.SentenceTransformer(model_dir, device="cpu")
    plain = bert_golden.SENTENCES + bert_golden.generated(110, 91) + long_texts(8, 300, 1500, 5)
    prompted = [(t, "query") for t in bert_golden.SENTENCES[:20]] + \
               [(t, "document") for t in bert_golden.generated(20, 17)] + \
               [(t, "Clustering") for t in bert_golden.SENTENCES[20:30]] + \
               [(t, "document") for t in long_texts(2, 350, 900, 6)]
    longest = [(t, None) for t in long_texts(2, 2600, 3000, 8)] + [(t, "query") for t in long_texts(1, 2600, 3000, 9)] + \
              [(t, "document") for t in long_texts(1, 2600, 3000, 10)]
    todo = [(t, None) for t in plain] + prompted + longest
    cases = []
    for i, (text, prompt_name) in enumerate(todo):
        prompt = model.prompts[prompt_name] if prompt_name else ""
        ids = model.tokenize([prompt + text])["input_ids"][0].tolist()
        vec = model.encode([text], prompt_name=prompt_name, batch_size=1, convert_to_numpy=True)[0]
        cases.append({"text": text, "prompt_name": prompt_name, "ids": ids,
                      "vector": base64.b64encode(vec.astype("<f2").tobytes()).decode("ascii")})
        if i % 40 == 0:
            print("%d/%d" % (i, len(todo)), file=sys.stderr)
    lengths = [len(c["ids"]) for c in cases]
    out = {"source": "sentence-transformers %s, torch %s, on EmbeddingGemma-300M (float32, CPU, batch 1)"
                     % (sentence_transformers.__version__, torch.__version__),
           "max_seq_length": model.max_seq_length, "dim": int(vec.shape[0]), "cases": cases}
    path = os.path.join(ROOT, "tests", "golden", "embeddinggemma_embeddings.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print("wrote %s: %d sentences, %d to %d ids, %d past 257, %d cut at %d" % (
        path, len(cases), min(lengths), max(lengths), sum(n > 257 for n in lengths),
        sum(n == model.max_seq_length for n in lengths), model.max_seq_length))


if __name__ == "__main__":
    main()
