#!/usr/bin/env python3
"""Speed on a busy machine: `iron bench` quiet and beside K busy processes, side by side.

For each thread count (-t) and engine, alternately: a quiet run, then a run while K
single-threaded spin loops (nice 0) hold cores, or while --busy-command runs (a real build:
`make -j1` in a configured tree); each figure with its spread over the repetitions, and each
busy figure's ratio to the busy `-t 1` figure of the same engine. With --llama-cpp, llama.cpp
(PyPI's llama-cpp-python) is measured the same way beside IRON, as bench/compare_llama_cpp.py
times it. With --base (an `iron` built from another commit), the quiet figures of both binaries
are also printed side by side, to show that nothing got slower on a quiet machine.

    python3 bench/contention.py -m ../shared/models/stories260K.gguf -p 128 -n 256 -r 3 --llama-cpp
    python3 bench/contention.py -m models/SmolLM2-135M-Instruct.Q4_1.gguf --precision medium \\
        --base /tmp/base/build/iron
    python3 bench/contention.py -m models/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --busy-command "while true; do make -C /tmp/mk -j1 clean all >/dev/null 2>&1; done"

Not part of the tests: it measures, it does not pass or fail.
"""
import argparse
import os
import statistics
import signal
import subprocess
import sys
import time

from compare_llama_cpp import fmt, iron_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bench(iron, model, threads, prompt, gen, precision):
    """pp and tg tokens/s of one `iron bench` run (threads 0: its default)."""
    # An empty cache before each test, and the precision's default cache types.
    return iron_run(iron, model, threads, prompt, gen, max(prompt, 1), precision, 0, None, None)[0]


class Busy:
    """K spin loops, each a process of its own at nice 0, or a shell command (in a process group
    of its own, so that a build's compilers stop with it), for the duration of a `with`."""

    def __init__(self, k, command=None):
        self.k = k
        self.command = command
        self.procs = []

    def __enter__(self):
        if self.command:
            self.procs.append(subprocess.Popen(["bash", "-c", self.command], start_new_session=True))
            time.sleep(1.0)  # let the build reach its compilers
        else:
            for _ in range(self.k):
                self.procs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
            time.sleep(0.3)  # let the scheduler place them
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL) if self.command else p.kill()
            except ProcessLookupError:
                pass
        for p in self.procs:
            p.wait()


class LlamaCpp:
    """llama.cpp through llama-cpp-python, one context per thread count, timed as
    bench/compare_llama_cpp.py times it (its own calls only)."""

    def __init__(self, model, prompt, gen):
        import llama_cpp_binding  # checked here, so a missing package fails before any run
        from compare_llama_cpp import llama_cpp_run
        self.llama_cpp = llama_cpp_binding.load()[0]
        self.run_once = llama_cpp_run
        self.model, self.prompt, self.gen = model, prompt, gen
        self.contexts = {}

    def bench(self, threads):
        if threads not in self.contexts:
            # The binding keeps the logits of n_batch rows, indexed by position: a batch as long
            # as the context (the prompt still goes in as one call).
            ctx = self.prompt + self.gen + 8
            llm = self.llama_cpp.Llama(model_path=self.model, n_threads=threads, n_threads_batch=threads,
                                       n_ctx=ctx, n_batch=ctx, n_ubatch=ctx, logits_all=False, verbose=False)
            ids = [1 + (i * 7919) % (llm.n_vocab() - 1) for i in range(self.prompt)]
            self.run_once(llm, self.llama_cpp, ids, 8, [])  # warm up
            self.contexts[threads] = (llm, ids)
        llm, ids = self.contexts[threads]
        return self.run_once(llm, self.llama_cpp, ids, self.gen, [])


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
    ap.add_argument("--busy-command", help="a shell command to run as the busy load instead of spin loops")
    ap.add_argument("--llama-cpp", action="store_true", help="measure llama.cpp (llama-cpp-python) too")
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    engines = [("iron", lambda t: bench(a.iron, a.model, t, a.p, a.n, a.precision))]
    if a.base:
        engines.append(("base", lambda t: bench(a.base, a.model, t, a.p, a.n, a.precision)))
    if a.llama_cpp:
        llama = LlamaCpp(a.model, a.p, a.n)
        # llama.cpp has no "default" here: its Python binding's default is half the CPUs.
        engines.append(("llama.cpp", lambda t: llama.bench(t if t > 0 else max(1, (os.cpu_count() or 2) // 2))))
    load = f"`{a.busy_command}`" if a.busy_command else f"{a.contend} spin-loop process(es)"
    results = {}  # (engine, threads, busy) -> {"pp": [], "tg": []}
    for rep in range(a.reps):
        for name, run in engines:
            for t in threads:
                for busy in (False, True):
                    if busy and name == "base":
                        continue
                    if busy:
                        with Busy(a.contend, a.busy_command):
                            f = run(t)
                    else:
                        f = run(t)
                    r = results.setdefault((name, t, busy), {"pp": [], "tg": []})
                    for key in ("pp", "tg"):
                        if key in f:
                            r[key].append(f[key])
        print(f"rep {rep + 1}/{a.reps} done", file=sys.stderr)

    label = lambda t: "default" if t == 0 else str(t)
    print(f"model {os.path.basename(a.model)}, iron --precision {a.precision}, {a.reps} alternating runs each, "
          f"busy = {load}, tokens/s:")
    print("| test | engine | -t | quiet | busy | busy / busy -t 1 |")
    print("|---|---|---|---|---|---|")
    for key, test in (("pp", f"pp{a.p}"), ("tg", f"tg{a.n}")):
        for name, _ in engines:
            if name == "base":
                continue
            one = results.get((name, 1, True), {}).get(key, [])
            for t in threads:
                q = results[(name, t, False)][key]
                b = results[(name, t, True)][key]
                ratio = f"{statistics.mean(b) / statistics.mean(one):.2f}" if one and b else "-"
                print(f"| {test} | {name} | {label(t)} | {fmt(q)} | {fmt(b)} | {ratio} |")
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
