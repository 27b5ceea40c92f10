#!/usr/bin/env python3
"""The table of a GPU run (run.sh): IRON's and llama.cpp's Vulkan tokens/s, side by side.

    summary.py IRON_LOG LLAMA_LOG

Each log holds one or more runs of `iron bench` and of `llama-bench -o md`, taken in turns; each
test's figure is the mean of its runs' means, with the lowest and highest run beside it.
"""
import re
import sys

FIGURE = re.compile(r"([0-9.]+) ± +([0-9.]+)")


def figures(path, row):
    """test name -> [mean t/s of each run], from the table rows `row` recognises."""
    found = {}
    for line in open(path, encoding="utf-8", errors="replace"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        test = row(cells)
        m = FIGURE.search(cells[-1]) if test else None
        if m:
            found.setdefault(test, []).append(float(m.group(1)))
    return found


def iron_row(cells):
    return cells[0] if re.fullmatch(r"(pp|tg)[0-9]+", cells[0]) else None


def llama_row(cells):
    for c in cells:
        if re.fullmatch(r"(pp|tg)[0-9]+", c):
            return c
    return None


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ours, theirs = figures(sys.argv[1], iron_row), figures(sys.argv[2], llama_row)
    print("| test | IRON t/s (runs: low-high) | llama.cpp Vulkan t/s (low-high) | ratio |")
    print("|---|---|---|---|")
    for test in sorted(set(ours) | set(theirs)):
        a, b = ours.get(test, []), theirs.get(test, [])
        cell = lambda xs: "%.1f (%d: %.1f-%.1f)" % (sum(xs) / len(xs), len(xs), min(xs), max(xs)) if xs else "not measured"
        ratio = "%.2fx" % ((sum(a) / len(a)) / (sum(b) / len(b))) if a and b else "-"
        print("| %s | %s | %s | %s |" % (test, cell(a), cell(b), ratio))


if __name__ == "__main__":
    main()
