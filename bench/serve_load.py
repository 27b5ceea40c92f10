#!/usr/bin/env python3
"""Load on an OpenAI-compatible server: C concurrent clients each stream R completions (greedy, a
fixed max_tokens with the end of sequence ignored, so every answer is the same length), and the
aggregate decode tokens/s, time to first token (p50, p99) and per-stream tokens/s are printed
for each concurrency. A benchmark, not a test: the figures are the machine's, measured in one run.

  py=$(scripts/python-env.sh requests)
  nice -n 19 $py bench/serve_load.py --iron build/iron -m models/SmolLM2-135M-Instruct.Q4_1.gguf -c 1,4
  nice -n 19 $py bench/serve_load.py --url http://127.0.0.1:8080 -c 1,4,8   # any server

IRON beside llama.cpp's llama-server, the same load on both, alternating server by server within
each round (so a busy spell on the machine falls on both), one line a concurrency:

  L=../llamacpp/build-server/bin/llama-server   # built from llama-cpp-python's sdist (docs/benchmarks.md)
  nice -n 19 $py bench/serve_load.py --iron build/iron --llama-server $L -m models/SmolLM2-135M-Instruct.Q4_1.gguf --precision medium -c 1,4,8 -r 3 -n 64 --rounds 3

With --iron it starts `iron serve` on a free loopback port (--parallel = the largest concurrency,
-t THREADS, -c CTX per slot) and stops it at the end. With --llama-server it also starts
llama-server on the same model: -np (the largest concurrency) slots with continuous batching,
-c CTX x slots (llama-server divides its context among its slots, IRON gives each slot -c), -t
THREADS, its prompt cache off for these requests (`cache_prompt: false`: IRON keeps none, and
the load repeats its prompts). Requests use only what both servers take (prompt, max_tokens,
temperature 0, ignore_eos, stream), so the same load drives both. The table gives each
server's aggregate tokens/s and TTFT p50 as the median of the rounds with their min-max, the
ratio IRON / llama-server (median of the rounds' ratios, min-max), and each server's aggregate at
every concurrency over its single-stream figure (the issue's 4x goal at 8).
"""
import argparse
import json
import re
import socket
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


def one_stream(url, prompt, max_tokens, model, extra=None):
    """(time to first token, seconds from the first token to the last, tokens) of one streamed
    completion; tokens are counted as the usage says when given, else as text events."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    body.update(extra or {})
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


def run_clients(concurrency, per_client, one):
    """`concurrency` clients started together, client c making per_client requests in turn with
    one(c, k) -> (time to first token, seconds from the first token to the last, tokens); the
    level's figures."""
    results, errors = [], []
    lock = threading.Lock()
    gate = threading.Barrier(concurrency)

    def client(c):
        gate.wait()
        for k in range(per_client):
            try:
                r = one(c, k)
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


def run_level(url, concurrency, per_client, max_tokens, model, extra=None):
    return run_clients(concurrency, per_client,
                       lambda c, k: one_stream(url, PROMPTS[(c + k) % len(PROMPTS)], max_tokens, model, extra))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(argv, listening):
    """Starts a server and returns (process, url) once its stderr says where it listens
    (`listening` a regex whose group 1 is the url); its further output is drained."""
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = None
    tail = []
    for line in server.stderr:
        tail = (tail + [line.rstrip()])[-5:]
        m = re.search(listening, line)
        if m:
            url = m.group(1)
            break
    if not url:
        server.kill()
        server.wait()
        sys.exit("%s did not start (exit status %s), its last lines:\n  %s" % (argv[0], server.returncode, "\n  ".join(tail)))
    threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()
    return server, url


def wait_ready(url):
    """llama-server listens before its model is loaded (503 from /health until it is)."""
    for _ in range(600):
        try:
            if requests.get(url + "/health", timeout=5).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    sys.exit("%s never became ready" % url)


def spread(values, fmt="%.1f"):
    """median (min-max)"""
    return (fmt + " (" + fmt + "-" + fmt + ")") % (statistics.median(values), min(values), max(values))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", help="a running server")
    p.add_argument("--iron", help="start `iron serve` from this binary")
    p.add_argument("--llama-server", help="also start llama.cpp's llama-server from this binary, beside --iron")
    p.add_argument("--llama-server-args", default="", help="more arguments for llama-server, one string "
                   "(e.g. --llama-server-args=--no-repack where its AMX kernels fault: a VM that grants no AMX state)")
    p.add_argument("-m", "--model", help="the model for --iron and --llama-server")
    p.add_argument("-t", "--threads", type=int, default=2, help="the started servers' threads (2)")
    p.add_argument("--ctx", type=int, default=2048, help="context per slot of the started servers (2048)")
    p.add_argument("--precision", default="highest", help="--iron's precision (highest; medium rounds to int8 blocks)")
    p.add_argument("-c", "--concurrency", default="1,4", help="comma-separated client counts (1,4)")
    p.add_argument("-r", "--requests", type=int, default=3, help="requests per client at each level (3)")
    p.add_argument("-n", "--max-tokens", type=int, default=64, help="tokens per answer (64)")
    p.add_argument("--rounds", type=int, default=1, help="times every level is run on every server (1)")
    p.add_argument("--json", action="store_true", help="print one JSON object per level and round instead of the table")
    a = p.parse_args()
    levels = [int(x) for x in a.concurrency.split(",")]
    slots = max(levels)
    started = []
    servers = []  # (name, url, extra request fields)
    try:
        if a.url:
            servers.append(("server", a.url, {}))
        if a.iron or a.llama_server:
            if not a.model:
                p.error("--iron and --llama-server take -m")
        if a.iron:
            proc, url = start_server([a.iron, "serve", "-m", a.model, "--port", "0", "-t", str(a.threads),
                                      "--parallel", str(slots), "-c", str(a.ctx), "--precision", a.precision],
                                     r"listening on (http://\S+)")
            started.append(proc)
            servers.append(("IRON", url, {}))
        if a.llama_server:
            port = free_port()
            proc, url = start_server([a.llama_server, "-m", a.model, "--host", "127.0.0.1", "--port", str(port),
                                      "-np", str(slots), "-cb", "-c", str(a.ctx * slots), "-t", str(a.threads),
                                      "-tb", str(a.threads)] + a.llama_server_args.split(),
                                     r"listening on (http://\S+)")
            started.append(proc)
            servers.append(("llama-server", url, {"cache_prompt": False}))
        if not servers:
            p.error("give --url, or --iron (and --llama-server) and -m")
        models = {}
        for name, url, extra in servers:
            wait_ready(url)
            models[name] = requests.get(url + "/v1/models", timeout=30).json()["data"][0]["id"]
            one_stream(url, PROMPTS[0], 8, models[name], extra)  # warm-up: first-call costs are not the load's
        print("%s; %d tokens per answer (end of sequence ignored), greedy, %d requests per client, %d round(s)"
              % (", ".join("%s at %s" % (n, u) for n, u, _ in servers), a.max_tokens, a.requests, a.rounds))
        # results[name][c] = one run_level result per round; servers alternate within each round.
        results = {name: {c: [] for c in levels} for name, _, _ in servers}
        for rnd in range(a.rounds):
            for c in levels:
                for name, url, extra in servers:
                    r = run_level(url, c, a.requests, a.max_tokens, models[name], extra)
                    r.update(server=name, round=rnd + 1)
                    results[name][c].append(r)
                    if a.json:
                        print(json.dumps(r), flush=True)
                    for e in r["errors"]:
                        print("  %s failed:" % name, e)
        if a.json:
            return
        names = [n for n, _, _ in servers]
        print("median of the rounds (min-max)")
        head = "%11s" % "concurrency"
        for n in names:
            head += " | %-40s" % (n + ": aggregate t/s, TTFT p50 ms")
        if len(names) == 2:
            head += " | %s" % ("%s / %s aggregate" % tuple(names))
        print(head)
        for c in levels:
            line = "%11d" % c
            for n in names:
                rs = results[n][c]
                failed = sum(r["failed"] for r in rs)
                cell = "%s, %s" % (spread([r["aggregate_tps"] for r in rs]), spread([r["ttft_p50_ms"] for r in rs], "%.0f"))
                if failed:
                    cell += ", %d FAILED" % failed
                line += " | %-40s" % cell
            if len(names) == 2:
                ratios = [x["aggregate_tps"] / y["aggregate_tps"] for x, y in zip(results[names[0]][c], results[names[1]][c])]
                line += " | %s" % spread(ratios, "%.2f")
            print(line)
        one = levels[0]
        if one == 1:
            for n in names:
                print("%s aggregate over its single stream: %s" % (n, ", ".join(
                    "c%d %s" % (c, spread([x["aggregate_tps"] / y["aggregate_tps"]
                                           for x, y in zip(results[n][c], results[n][1])], "%.2fx"))
                    for c in levels[1:])))
        for n in names:
            c = levels[-1]
            rs = results[n][c]
            print("%s at %d: TTFT p99 %s ms, per-stream t/s %s" % (
                n, c, spread([r["ttft_p99_ms"] for r in rs], "%.0f"), spread([r["stream_tps_median"] for r in rs])))
    finally:
        for proc in started:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
