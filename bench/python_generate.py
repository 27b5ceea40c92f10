#!/usr/bin/env python3
"""Decode speed through iron.models' generate from Python, beside `iron generate`.

Alternates R runs of each on the same model, prompt and token count (greedy), and prints the
decode tokens/s of each run (the generation after the first token, as both report it), the
medians and Python's median as a fraction of the command line's.

  PYTHONPATH=build/python .venv/bin/python bench/python_generate.py \
      -m models/SmolLM2-135M-Instruct.Q4_1.gguf [-n 64] [-r 5] [-t 2] [--cli build/iron]
"""

import argparse
import re
import statistics
import subprocess

import iron


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-p", "--prompt", default="Once upon a time")
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("-r", "--runs", type=int, default=5)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--cli", default="build/iron")
    a = ap.parse_args()
    model = iron.models.load(a.model, threads=a.threads)
    py, cli = [], []
    for _ in range(a.runs):
        for _ in model.generate(a.prompt, max_tokens=a.n, stop_at_end=False):
            pass
        s = model.stats
        py.append((s["generated_tokens"] - 1) / s["generate_seconds"])
        out = subprocess.run([a.cli, "generate", "-m", a.model, "-p", a.prompt, "-n", str(a.n), "-t", str(a.threads)],
                             capture_output=True, text=True, check=True)
        both = out.stdout + out.stderr
        m = re.search(r"generat\w*:.*?([0-9.]+) tokens/s", both)
        if not m:
            raise SystemExit(f"no decode tokens/s in `iron generate`'s report:\n{both}")
        cli.append(float(m.group(1)))
        print(f"python {py[-1]:8.2f} tok/s   iron generate {cli[-1]:8.2f} tok/s", flush=True)
    mp, mc = statistics.median(py), statistics.median(cli)
    print(f"median: python {mp:.2f} tok/s ({min(py):.2f}..{max(py):.2f}), iron generate {mc:.2f} tok/s "
          f"({min(cli):.2f}..{max(cli):.2f}); python / iron generate = {mp / mc:.3f}")


if __name__ == "__main__":
    main()
