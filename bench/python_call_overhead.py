#!/usr/bin/env python3
"""What calling a compiled version costs from Python, beside calling it from C++.

The graph is one step (SiLU) on a (1, 64) float32 input. Each round times N calls from Python
(`version(x)`, returning a numpy copy, and `version(x, copy=False)`, a view) and N calls of the
same version on the same array from C++ (iron._iron._time_calls, a loop in the extension), in
alternation; it prints the medians per call and the Python-over-C++ difference, with the spread
(min..max over rounds). The C++ loop is what bench/call_overhead.cpp measures for a one-step graph.

  PYTHONPATH=build/python .venv/bin/python bench/python_call_overhead.py [-n 20000] [-r 9] [-t 1]
"""

import argparse
import statistics
import time

import numpy as np

import iron
from iron import functional as F


class OneStep(iron.Graph):
    def body(self, x):
        return F.silu(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=20000, help="calls per round")
    ap.add_argument("-r", "--rounds", type=int, default=9)
    ap.add_argument("-t", "--threads", type=int, default=1, help="the CPU device's threads")
    a = ap.parse_args()
    g = OneStep()
    v = g.compile(x=(1, 64), threads=a.threads)
    x = np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)
    for _ in range(1000):
        v(x)
    py_copy, py_view, cpp = [], [], []
    for _ in range(a.rounds):
        t0 = time.perf_counter()
        for _ in range(a.n):
            v(x)
        py_copy.append((time.perf_counter() - t0) / a.n)
        t0 = time.perf_counter()
        for _ in range(a.n):
            v(x, copy=False)
        py_view.append((time.perf_counter() - t0) / a.n)
        cpp.append(iron._iron._time_calls(v, a.n, x) / a.n)

    def us(xs):
        return f"{statistics.median(xs) * 1e6:7.3f} us  ({min(xs) * 1e6:.3f}..{max(xs) * 1e6:.3f})"

    print(f"one-step (1, 64) f32 graph, {a.n} calls x {a.rounds} rounds, {a.threads} thread(s); median (min..max)")
    print(f"  C++ call                 {us(cpp)}")
    print(f"  Python call (copy)       {us(py_copy)}")
    print(f"  Python call (copy=False) {us(py_view)}")
    d_copy = [p - c for p, c in zip(py_copy, cpp)]
    d_view = [p - c for p, c in zip(py_view, cpp)]
    print(f"  Python - C++ (copy)      {us(d_copy)}")
    print(f"  Python - C++ (copy=False){us(d_view)}")


if __name__ == "__main__":
    main()
