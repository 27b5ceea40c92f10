#!/usr/bin/env python3
"""Sentence embeddings: IRON against sentence-transformers on torch (CPU, f32), same machine, same
run, same thread count, alternating. Sentences/s for batches of 1 and 32 sentences of about 20
and about 128 tokens (--lengths; the model's own tokens, its first and last included); IRON at
--precision (medium by default), each figure the median of --reps timed passes with the spread
(min-max), and the ratio IRON / sentence-transformers. Then the accuracy: cosine between IRON's
vectors (at highest and at medium, through `iron embed`) and sentence-transformers' own for the
golden sentences without a prompt of tests/golden/minilm_embeddings.json (all-MiniLM-L6-v2) or
embeddinggemma_embeddings.json (EmbeddingGemma, whose directory name says so).

The first use installs sentence-transformers and torch into .venv (scripts/python-env.sh; PyPI's
torch is large, so this stays out of CI). Not a test: it measures, it does not pass or fail.

    bench/embed_speed.py [-m models/all-MiniLM-L6-v2] [-t 2] [--reps 3] [--precision medium]
                         [--lengths 20,128] [--before DIR] [--no-accuracy]
    bench/embed_speed.py -m models/embeddinggemma-300m --lengths 20,256

--before DIR also times DIR/bench/bench_embed_speed (another build, e.g. of the commit before a
change) in the same alternation, and prints its column and the ratio of the two IRONs.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

import torch_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORDS = ("the of and to in is was for on that with as by at from his her it an were are which this be has had "
         "or one their not but new first two after who its year city school river music war film album world "
         "team game history season family village university church station house water light").split()


def texts(n, words, seed):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(words)) for _ in range(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", "--model", default=os.path.join(ROOT, "models", "all-MiniLM-L6-v2"))
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--precision", default="medium")
    ap.add_argument("--lengths", default="20,128", help="the texts' approximate token counts, comma-separated")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--before", help="another build whose bench_embed_speed runs in the same alternation")
    ap.add_argument("--no-accuracy", action="store_true",
                    help="leave out the accuracy pass (EmbeddingGemma's takes about 8 minutes on 2 cores)")
    a = ap.parse_args()
    torch_env.rerun_in_venv()

    import numpy as np
    import torch
    import sentence_transformers
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    st = SentenceTransformer(a.model, device="cpu")
    tok = st.tokenizer
    bench = os.path.join(a.build, "bench", "bench_embed_speed")
    before = os.path.join(a.before, "bench", "bench_embed_speed") if a.before else None
    iron = os.path.join(a.build, "iron")

    # ~N tokens: N - 2 one-token words (the common words above are one token each in both models'
    # vocabularies), checked with the model's own tokenizer.
    sets = {n: texts(64, n - 2, i + 1) for i, n in enumerate(int(x) for x in a.lengths.split(","))}
    for n, ts in sets.items():
        lengths = [len(tok(t)["input_ids"]) for t in ts]
        print("texts of ~%d tokens: %d to %d tokens" % (n, min(lengths), max(lengths)))
    print("machine: %s; shared with other work while measured (noisy): spreads are min-max of %d passes"
          % (os.uname().nodename, a.reps))
    print("sentence-transformers %s, torch %s (%d threads); IRON at %s, %d threads\n"
          % (sentence_transformers.__version__, torch.__version__, a.threads, a.precision, a.threads))

    rows = []
    with tempfile.TemporaryDirectory() as work:
        for n, ts in sets.items():
            path = os.path.join(work, "texts%d.txt" % n)
            with open(path, "w") as f:
                f.write("".join(t + "\n" for t in ts))
            for batch in (1, 32):
                count = 16 if batch == 1 else 64  # batch 1 on fewer sentences: the same per-sentence work
                sub = ts[:count]
                sub_path = os.path.join(work, "sub%d_%d.txt" % (n, batch))
                with open(sub_path, "w") as f:
                    f.write("".join(t + "\n" for t in sub))
                st.encode(sub[:batch], batch_size=batch)  # warm-up
                iron_rates, st_rates, before_rates = [], [], []

                def iron_rate(binary):
                    out = subprocess.run([binary, a.model, sub_path, str(batch), "1", str(a.threads), a.precision],
                                         check=True, capture_output=True, text=True).stdout.split()
                    return int(out[3]) / float(out[1])

                for _ in range(a.reps):
                    if before:
                        before_rates.append(iron_rate(before))
                    iron_rates.append(iron_rate(bench))
                    t0 = time.perf_counter()
                    st.encode(sub, batch_size=batch)
                    st_rates.append(len(sub) / (time.perf_counter() - t0))
                rows.append((n, batch, iron_rates, st_rates, before_rates))
                im, sm = statistics.median(iron_rates), statistics.median(st_rates)
                print("~%3d tokens, batch %2d: IRON %8.1f sentences/s (%.1f-%.1f), sentence-transformers %8.1f (%.1f-%.1f): %.2fx"
                      % (n, batch, im, min(iron_rates), max(iron_rates), sm, min(st_rates), max(st_rates), im / sm))
                if before:
                    bm = statistics.median(before_rates)
                    print("                        IRON before %8.1f (%.1f-%.1f): %.2fx before, %.2fx sentence-transformers"
                          % (bm, min(before_rates), max(before_rates), im / bm, bm / sm))
                sys.stdout.flush()

        extra = " IRON before | before vs sentence-transformers |" if before else ""
        print("\n| tokens | batch | IRON (%s) sentences/s | sentence-transformers sentences/s | ratio |%s"
              % (a.precision, extra))
        print("|---|---|---|---|---|" + ("---|---|" if before else ""))
        for n, batch, ir, sr, br in rows:
            im, sm = statistics.median(ir), statistics.median(sr)
            line = "| ~%d | %d | %.1f (%.1f-%.1f) | %.1f (%.1f-%.1f) | %.2fx |" % (
                n, batch, im, min(ir), max(ir), sm, min(sr), max(sr), im / sm)
            if before:
                bm = statistics.median(br)
                line += " %.1f (%.1f-%.1f) | %.2fx |" % (bm, min(br), max(br), bm / sm)
            print(line)

        if a.no_accuracy:
            return
        # Accuracy against sentence-transformers itself, on the golden sentences.
        name = "embeddinggemma" if "embeddinggemma" in os.path.basename(os.path.normpath(a.model)).lower() else "minilm"
        golden = json.load(open(os.path.join(ROOT, "tests", "golden", name + "_embeddings.json")))
        gtexts = [c["text"] for c in golden["cases"] if not c.get("prompt_name")]
        ref = st.encode(gtexts, batch_size=32, convert_to_numpy=True).astype(np.float64)
        path = os.path.join(work, "golden.txt")
        # One text per line: the golden's texts with a newline inside are left to the C++ test.
        keep = [i for i, t in enumerate(gtexts) if "\n" not in t and "\r" not in t and "\x0b" not in t
                and "\x0c" not in t and "\x1c" not in t and "\x1d" not in t and "\x1e" not in t
                and "\x85" not in t and "\u2028" not in t and "\u2029" not in t]
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(gtexts[i] + "\n" for i in keep))
        print()
        for precision in ("highest", "medium"):
            out = subprocess.run([iron, "embed", "-m", a.model, "-f", path, "--format", "tsv", "-t", str(a.threads),
                                  "--precision", precision], check=True, capture_output=True, text=True).stdout
            ours = np.array([[float(x) for x in line.split("\t")] for line in out.splitlines()])
            r = ref[keep]
            cos = (ours * r).sum(1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(r, axis=1)
            print("cosine against sentence-transformers at %s: %d sentences, worst %.9f (1 - %.1e), mean 1 - %.1e"
                  % (precision, len(keep), cos.min(), 1 - cos.min(), 1 - cos.mean()))


if __name__ == "__main__":
    main()
