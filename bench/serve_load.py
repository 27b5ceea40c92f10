#!/usr/bin/env python3
"""Load on an OpenAI-compatible server: C concurrent clients each stream R completions (greedy, a
fixed max_tokens with the end of sequence ignored, so every answer is the same length), and the
aggregate decode tokens/s, time to first token (p50, p99) and per-stream tokens/s are printed
for each concurrency. A benchmark, not a test: the figures are the machine's, measured in one run.

  py=$(scripts/python-env.sh requests)
  nice -n 19 $py bench/serve_load.py --iron build/iron -m models/SmolLM2-135M-Instruct.Q4_1.gguf -c 1,4
  nice -n 19 $py bench/serve_load.py --url http://127.0.0.1:8080 -c 1,4,8   # any server (llama-server)

With --iron it starts `iron serve` on a free loopback port (--parallel = the largest concurrency,
-t THREADS) and stops it at the end. Requests use only what OpenAI's and llama.cpp's servers both
take (prompt, max_tokens, temperature 0, ignore_eos, stream), so the same load drives both.
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
import threading
import time

import requests

PROMPTS = [
    "Once upon a time, in a land far away, there lived",
    "The history of the printing press begins",
    "Here is a short recipe for a good tomato soup:",
    "The three most important ideas in physics are",
    "Dear diary, today something unexpected happened:",
    "A list of things to pack for a week of hiking:",
    "The quick brown fox jumps over the lazy dog. Then",
    "In computer science, a hash table is",
]


def percentile(values, p):
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def one_stream(url, prompt, max_tokens, model):
    """(time to first token, seconds from the first token to the last, tokens) of one streamed
    completion; tokens are counted as the usage says when given, else as text events."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    first = last = None
    events = 0
    usage = None
    with requests.post(url + "/v1/completions", json=body, stream=True, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines(decode_unicode=True):
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            e = json.loads(line[6:])
            if e.get("usage"):
                usage = e["usage"]
            for c in e.get("choices", []):
                if c.get("text"):
                    now = time.perf_counter()
                    first = first or now
                    last = now
                    events += 1
    tokens = usage["completion_tokens"] if usage else events
    if first is None:
        raise RuntimeError("no text streamed")
    return first - t0, last - first, tokens


def run_level(url, concurrency, per_client, max_tokens, model):
    results, errors = [], []
    lock = threading.Lock()
    gate = threading.Barrier(concurrency)

    def client(c):
        gate.wait()
        for k in range(per_client):
            try:
                r = one_stream(url, PROMPTS[(c + k) % len(PROMPTS)], max_tokens, model)
                with lock:
                    results.append(r)
            except Exception as e:  # counted, not fatal: a benchmark reports failures
                with lock:
                    errors.append(str(e))

    threads = [threading.Thread(target=client, args=(c,)) for c in range(concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ttft = [r[0] for r in results]
    per_stream = [(r[2] - 1) / r[1] for r in results if r[1] > 0 and r[2] > 1]
    tokens = sum(r[2] for r in results)
    return {"concurrency": concurrency, "requests": len(results), "failed": len(errors), "tokens": tokens,
            "wall_s": wall, "aggregate_tps": tokens / wall, "ttft_p50_ms": 1e3 * percentile(ttft, 50),
            "ttft_p99_ms": 1e3 * percentile(ttft, 99),
            "stream_tps_median": statistics.median(per_stream) if per_stream else float("nan"),
            "stream_tps_min": min(per_stream) if per_stream else float("nan"), "errors": errors[:3]}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", help="a running server")
    p.add_argument("--iron", help="start `iron serve` from this binary")
    p.add_argument("-m", "--model", help="the model for --iron")
    p.add_argument("-t", "--threads", type=int, default=2, help="--iron's threads (2)")
    p.add_argument("--precision", default="highest", help="--iron's precision (highest; medium rounds to int8 blocks)")
    p.add_argument("-c", "--concurrency", default="1,4", help="comma-separated client counts (1,4)")
    p.add_argument("-r", "--requests", type=int, default=3, help="requests per client at each level (3)")
    p.add_argument("-n", "--max-tokens", type=int, default=64, help="tokens per answer (64)")
    p.add_argument("--json", action="store_true", help="print one JSON object per level instead of the table")
    a = p.parse_args()
    levels = [int(x) for x in a.concurrency.split(",")]
    server = None
    url = a.url
    if not url:
        if not (a.iron and a.model):
            p.error("give --url, or --iron and -m")
        server = subprocess.Popen([a.iron, "serve", "-m", a.model, "--port", "0", "-t", str(a.threads),
                                   "--parallel", str(max(levels)), "-c", "2048", "--precision", a.precision],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for line in server.stderr:
            m = re.match(r"listening on (http://\S+)", line)
            if m:
                url = m.group(1)
                break
        if not url:
            sys.exit("the server did not start")
        threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()
    try:
        model = requests.get(url + "/v1/models", timeout=30).json()["data"][0]["id"]
        one_stream(url, PROMPTS[0], 8, model)  # warm-up: first-call costs are not the load's
        print("server %s, model %s, %d tokens per answer (end of sequence ignored), greedy, %d requests per client"
              % (url, model, a.max_tokens, a.requests))
        if not a.json:
            print("%11s %8s %6s %14s %13s %13s %18s" % ("concurrency", "requests", "failed", "aggregate t/s",
                                                      "TTFT p50 ms", "TTFT p99 ms", "per-stream t/s"))
        for c in levels:
            r = run_level(url, c, a.requests, a.max_tokens, model)
            if a.json:
                print(json.dumps(r))
            else:
                print("%11d %8d %6d %14.1f %13.1f %13.1f %11.1f (min %.1f)" % (
                    c, r["requests"], r["failed"], r["aggregate_tps"], r["ttft_p50_ms"], r["ttft_p99_ms"],
                    r["stream_tps_median"], r["stream_tps_min"]))
            for e in r["errors"]:
                print("  failed:", e)
    finally:
        if server:
            server.terminate()
            server.wait(30)


if __name__ == "__main__":
    main()
