#!/usr/bin/env python3
"""Speed on a busy machine: `iron bench` quiet and beside K busy processes, side by side.

For each thread count (-t) and binary, alternately: a quiet run, then a run while K
single-threaded spin loops (nice 0) hold cores; each figure with its spread over the
repetitions, and each busy figure's ratio to the busy `-t 1` figure of the same binary. With
--base (an `iron` built from another commit), the quiet figures of both binaries are also
printed side by side, to show that nothing got slower on a quiet machine.

    python3 bench/contention.py -m ../shared/models/stories260K.gguf -p 128 -n 256 -r 3
    python3 bench/contention.py -m models/SmolLM2-135M-Instruct.Q4_1.gguf --precision medium \\
        --base /tmp/base/build/iron

Not part of the tests: it measures, it does not pass or fail.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

from compare_llama_cpp import fmt, iron_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bench(iron, model, threads, prompt, gen, precision):
    """pp and tg tokens/s of one `iron bench` run (threads 0: its default)."""
    return iron_run(iron, model, threads, prompt, gen, max(prompt, 1), precision)[0]


class Busy:
    """K spin loops, each a process of its own at nice 0, for the duration of a `with`."""

    def __init__(self, k):
        self.k = k
        self.procs = []

    def __enter__(self):
        for _ in range(self.k):
            self.procs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        time.sleep(0.3)  # let the scheduler place them
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--iron", default=os.path.join(ROOT, "build", "iron"))
    ap.add_argument("--base", help="another iron binary, measured alternately on the quiet machine")
    ap.add_argument("-t", "--threads", default="1,2,0", help="thread counts (0: the default)")
    ap.add_argument("-k", "--contend", type=int, default=1, help="busy processes")
    ap.add_argument("-p", type=int, default=64)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("--precision", default="highest")
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    binaries = [("iron", a.iron)] + ([("base", a.base)] if a.base else [])
    results = {}  # (binary, threads, busy) -> {"pp": [], "tg": []}
    for rep in range(a.reps):
        for name, path in binaries:
            for t in threads:
                for busy in (False, True):
                    if busy and name == "base":
                        continue
                    if busy:
                        with Busy(a.contend):
                            f = bench(path, a.model, t, a.p, a.n, a.precision)
                    else:
                        f = bench(path, a.model, t, a.p, a.n, a.precision)
                    r = results.setdefault((name, t, busy), {"pp": [], "tg": []})
                    for key in ("pp", "tg"):
                        if key in f:
                            r[key].append(f[key])
        print(f"rep {rep + 1}/{a.reps} done", file=sys.stderr)

    label = lambda t: "default" if t == 0 else str(t)
    print(f"model {os.path.basename(a.model)}, --precision {a.precision}, {a.reps} alternating runs each, "
          f"busy = {a.contend} spin-loop process(es), tokens/s:")
    print("| test | -t | quiet | busy | busy / busy -t 1 |")
    print("|---|---|---|---|---|")
    for key, test in (("pp", f"pp{a.p}"), ("tg", f"tg{a.n}")):
        one = results.get(("iron", 1, True), {}).get(key, [])
        for t in threads:
            q = results[("iron", t, False)][key]
            b = results[("iron", t, True)][key]
            ratio = f"{statistics.mean(b) / statistics.mean(one):.2f}" if one and b else "-"
            print(f"| {test} | {label(t)} | {fmt(q)} | {fmt(b)} | {ratio} |")
    if a.base:
        print("\nquiet machine, this binary against --base, tokens/s:")
        print("| test | -t | iron | base | ratio |")
        print("|---|---|---|---|---|")
        for key, test in (("pp", f"pp{a.p}"), ("tg", f"tg{a.n}")):
            for t in threads:
                q = results[("iron", t, False)][key]
                b = results[("base", t, False)][key]
                print(f"| {test} | {label(t)} | {fmt(q)} | {fmt(b)} | {statistics.mean(q) / statistics.mean(b):.2f} |")


if __name__ == "__main__":
    main()
