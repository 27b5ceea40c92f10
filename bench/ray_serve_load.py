#!/usr/bin/env python3
"""What Ray Serve costs on one machine: the same load (bench/serve_load.py's: C clients each
streaming R greedy completions of N tokens) on one `iron serve` with T threads, and on the Ray
Serve application of iron.ray with 1 and with 2 replicas of one thread each (num_cpus 1), all
three running at once on this machine and taking turns within each round, so a busy spell falls
on every side. Prints aggregate tokens/s and TTFT p50 per side as the median of the rounds
(min-max).

  py=$(IRON_VENV=... scripts/python-env.sh "ray[serve,data]" pyarrow requests)
  PYTHONPATH=build/python nice -n 19 $py bench/ray_serve_load.py --iron build/iron \\
      -m models/SmolLM2-135M-Instruct.Q4_1.gguf --precision medium -c 8 -r 3 -n 64 --rounds 3
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_load  # noqa: E402

import ray  # noqa: E402
from ray import serve  # noqa: E402

from iron.ray.serve import ServeOptions, application  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iron", required=True, help="the iron command, for `iron serve`")
    p.add_argument("-m", "--model", required=True)
    p.add_argument("-t", "--threads", type=int, default=2, help="iron serve's threads (2)")
    p.add_argument("--precision", default="highest")
    p.add_argument("--ctx", type=int, default=2048, help="context per slot (2048)")
    p.add_argument("-c", "--concurrency", type=int, default=8, help="clients (8); also each server's --parallel")
    p.add_argument("-r", "--requests", type=int, default=3, help="requests per client (3)")
    p.add_argument("-n", "--max-tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    c = a.concurrency
    proc, iron_url = serve_load.start_server(
        [a.iron, "serve", "-m", a.model, "--port", "0", "-t", str(a.threads), "--parallel", str(c), "-c", str(a.ctx),
         "--precision", a.precision], r"listening on (http://\S+)")
    try:
        # Three replicas of one logical CPU each, on a machine of two cores: each runs one thread.
        ray.init(num_cpus=3, include_dashboard=False, logging_level="WARNING")
        port = serve_load.free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        sides = [(f"iron serve -t {a.threads}", iron_url)]
        for replicas in (1, 2):
            o = ServeOptions(replicas=replicas, cpus_per_replica=1, parallel=c, context=a.ctx,
                             precision=a.precision)
            serve.run(application(a.model, o), name=f"r{replicas}", route_prefix=f"/r{replicas}",
                      logging_config={"enable_access_log": False})
            sides.append((f"Ray Serve, {replicas} replica(s) x 1 thread", f"http://127.0.0.1:{port}/r{replicas}"))
        model = "model"
        for _, url in sides:
            serve_load.one_stream(url, serve_load.PROMPTS[0], 8, model)  # warm-up
        results = {name: [] for name, _ in sides}
        for rnd in range(a.rounds):
            for name, url in sides:
                r = serve_load.run_level(url, c, a.requests, a.max_tokens, model)
                results[name].append(r)
                print(f"round {rnd + 1}: {name}: {r['aggregate_tps']:.1f} t/s, TTFT p50 {r['ttft_p50_ms']:.0f} ms"
                      + (f", {r['failed']} FAILED" if r["failed"] else ""), flush=True)
        print(f"{c} clients x {a.requests} streamed completions of {a.max_tokens} tokens, {a.rounds} rounds; "
              "median (min-max)")
        base = results[sides[0][0]]
        for name, _ in sides:
            rs = results[name]
            ratio = [x["aggregate_tps"] / y["aggregate_tps"] for x, y in zip(rs, base)]
            print(f"{name:36s} {serve_load.spread([r['aggregate_tps'] for r in rs])} t/s, TTFT p50 "
                  f"{serve_load.spread([r['ttft_p50_ms'] for r in rs], '%.0f')} ms, "
                  f"vs iron serve {serve_load.spread(ratio, '%.2f')}")
    finally:
        serve.shutdown()
        ray.shutdown()
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
