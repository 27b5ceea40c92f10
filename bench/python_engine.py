#!/usr/bin/env python3
"""Aggregate decode speed of C concurrent streams through iron.Engine in Python, beside
`iron serve --parallel C` under the same load over HTTP.

Each client (a thread) streams R completions in turn, greedy with the end of sequence ignored so
every answer is N tokens, the prompts bench/serve_load.py's; both sides hold the same model with
the same threads, context per slot and precision, in C slots. The sides alternate within each
round (their order swapped every round, so a busy spell on the machine falls on both). Printed:
each run's aggregate tokens/s (tokens generated / wall time of the whole load) and TTFT p50, then
per side the median of the rounds (min-max), and the ratio engine / server (the median of the
rounds' ratios, min-max).

  PYTHONPATH=build/python nice -n 19 .venv/bin/python bench/python_engine.py --iron build/iron \\
      -m models/SmolLM2-135M-Instruct.Q4_1.gguf [-c 8] [-r 3] [-n 64] [--rounds 5] [-t 2]

The server side is bench/serve_load.py's client (requests, streamed server-sent events); the
engine side reads Stream objects on Python threads, the GIL released while they wait.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_load  # noqa: E402  (beside this file)

import iron  # noqa: E402


def engine_level(engine, concurrency, per_client, max_tokens):
    """serve_load.run_level's figures for the same load through `engine`."""

    def one(c, k):
        t0 = time.perf_counter()
        first = last = None
        s = engine.stream(serve_load.PROMPTS[(c + k) % len(serve_load.PROMPTS)], max_tokens, temperature=0,
                          ignore_eos=True)
        for _ in s:
            last = time.perf_counter()
            first = first or last
        return first - t0, last - first, len(s.tokens)

    return serve_load.run_clients(concurrency, per_client, one)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iron", default="build/iron", help="the `iron` binary whose serve is measured (build/iron)")
    p.add_argument("-m", "--model", required=True)
    p.add_argument("-t", "--threads", type=int, default=2, help="threads of each side (2)")
    p.add_argument("--ctx", type=int, default=2048, help="context per slot (2048)")
    p.add_argument("--precision", default="highest")
    p.add_argument("-c", "--concurrency", type=int, default=8, help="concurrent streams = slots (8)")
    p.add_argument("-r", "--requests", type=int, default=3, help="requests per client (3)")
    p.add_argument("-n", "--max-tokens", type=int, default=64, help="tokens per answer (64)")
    p.add_argument("--rounds", type=int, default=5, help="runs of each side (5)")
    a = p.parse_args()
    c = a.concurrency
    proc, url = serve_load.start_server([a.iron, "serve", "-m", a.model, "--port", "0", "-t", str(a.threads),
                                         "--parallel", str(c), "-c", str(a.ctx), "--precision", a.precision],
                                        r"listening on (http://\S+)")
    try:
        engine = iron.Engine(a.model, parallel=c, context=a.ctx, threads=a.threads, precision=a.precision)
        serve_load.wait_ready(url)
        model = serve_load.requests.get(url + "/v1/models", timeout=30).json()["data"][0]["id"]
        # Warm-up: the versions each side compiles on first use are not the load's.
        serve_load.run_level(url, c, 1, 8, model)
        engine_level(engine, c, 1, 8)
        print("%d streams x %d requests x %d tokens (greedy, end of sequence ignored), %s, -t %d, %s precision"
              % (c, a.requests, a.max_tokens, os.path.basename(a.model), a.threads, a.precision))
        runs = {"engine": [], "serve": []}
        sides = {"engine": lambda: engine_level(engine, c, a.requests, a.max_tokens),
                 "serve": lambda: serve_load.run_level(url, c, a.requests, a.max_tokens, model)}
        for rnd in range(a.rounds):
            for name in (["engine", "serve"] if rnd % 2 == 0 else ["serve", "engine"]):
                r = sides[name]()
                if r["failed"]:
                    sys.exit("%s: %d requests failed: %s" % (name, r["failed"], r["errors"]))
                runs[name].append(r)
                print("round %d %-6s: %7.1f tokens/s aggregate, TTFT p50 %5.0f ms" % (
                    rnd + 1, name, r["aggregate_tps"], r["ttft_p50_ms"]), flush=True)
        for name in ("engine", "serve"):
            print("%-6s: %s tokens/s, TTFT p50 %s ms (median of %d rounds, min-max)" % (
                name, serve_load.spread([r["aggregate_tps"] for r in runs[name]]),
                serve_load.spread([r["ttft_p50_ms"] for r in runs[name]], "%.0f"), a.rounds))
        ratios = [e["aggregate_tps"] / s["aggregate_tps"] for e, s in zip(runs["engine"], runs["serve"])]
        print("engine / serve aggregate: %s" % serve_load.spread(ratios, "%.3f"))
        engine.close()
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
