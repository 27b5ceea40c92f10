#!/usr/bin/env python3
"""What a Ray Data job costs on one machine: N texts (1 to 40 words) embedded by `iron embed -t T`
and by `python -m iron.ray embed` (a pool of one-CPU actors, one thread each), on a Ray already
running (--address, as on a cluster) and on a Ray the command starts for itself (cold), taking
turns within each round. Prints each side's wall time (the whole command: reading, the model's
load, writing) as the median of the rounds (min-max), and texts per second.

  PYTHONPATH=build/python nice -n 19 $py bench/ray_embed.py --iron build/iron -m models/all-MiniLM-L6-v2 -n 5000
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

import ray


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iron", required=True)
    p.add_argument("-m", "--model", required=True)
    p.add_argument("-n", "--texts", type=int, default=5000)
    p.add_argument("-t", "--threads", type=int, default=2, help="iron embed's threads and the actors (2)")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    rng = random.Random(1)
    vocab = ("the a cat dog sat on mat ran fast slow bright morning river city light stone quietly under over "
             "music table green old new people small large train station coffee rain window book").split()
    texts = [" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 40))) for _ in range(a.texts)]
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "texts.txt"), "w") as f:
            f.write("\n".join(texts) + "\n")
        with open(os.path.join(tmp, "texts.jsonl"), "w") as f:
            for i, t in enumerate(texts):
                f.write(json.dumps({"id": i, "text": t}) + "\n")
        ray.init(num_cpus=a.threads, include_dashboard=False, logging_level="WARNING")
        address = ray.get_runtime_context().gcs_address
        job = [sys.executable, "-m", "iron.ray", "embed", "-m", a.model, "-i", os.path.join(tmp, "texts.jsonl")]
        sides = {
            f"iron embed -t {a.threads}": lambda k: [a.iron, "embed", "-m", a.model, "-f",
                                                     os.path.join(tmp, "texts.txt"), "--format", "tsv",
                                                     "-t", str(a.threads)],
            f"iron.ray embed, Ray running, {a.threads} actors": lambda k: job + [
                "-o", os.path.join(tmp, f"warm{k}"), "--address", address],
            f"iron.ray embed, cold (starts its Ray), {a.threads} actors": lambda k: job + [
                "-o", os.path.join(tmp, f"cold{k}"), "--actors", str(a.threads)],
        }
        times = {name: [] for name in sides}
        for k in range(a.rounds):
            for name, argv in sides.items():
                t0 = time.perf_counter()
                subprocess.run(argv(k), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
                times[name].append(time.perf_counter() - t0)
                print(f"round {k + 1}: {name}: {times[name][-1]:.1f} s", flush=True)
        ray.shutdown()
    print(f"{a.texts} texts, {a.rounds} rounds; median (min-max)")
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"{name:48s} {m:.1f} ({min(ts):.1f}-{max(ts):.1f}) s, {a.texts / m:.0f} texts/s")


if __name__ == "__main__":
    main()
