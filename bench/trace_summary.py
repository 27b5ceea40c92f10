#!/usr/bin/env python3
"""Where a step's time goes, from an `iron bench --trace FILE` timeline.

For each decode step in the trace (the spans between one Sample and the next) and for the
prefill (everything before the first Sample): the wall time, each thread's busy time, the time
per operator and thread, and how much of the wall time each thread spent outside any span
(waiting at barriers, woken late, or descheduled). A Vulkan trace (`--device vulkan`) has one lane,
63: each step's time on the device, from its timestamps.

    build/iron bench -m MODEL -p 512 -n 16 -r 1 --precision medium --trace /tmp/t.json
    python3 bench/trace_summary.py /tmp/t.json
"""
import collections
import json
import sys


def summarise(name, spans):
    if not spans:
        return
    begin = min(s["ts"] for s in spans)
    end = max(s["ts"] + s["dur"] for s in spans)
    wall = end - begin
    threads = sorted({s["tid"] for s in spans})
    print(f"{name}: {wall / 1000:.3f} ms wall")
    per_op = collections.defaultdict(lambda: collections.defaultdict(float))
    count = collections.Counter()
    for s in spans:
        per_op[s["name"]][s["tid"]] += s["dur"]
        if s["tid"] == threads[0]:
            count[s["name"]] += 1
    for t in threads:
        busy = sum(s["dur"] for s in spans if s["tid"] == t)
        print(f"  thread {t}: busy {busy / 1000:.3f} ms, outside spans {(wall - busy) / 1000:.3f} ms "
              f"({100 * (wall - busy) / wall:.0f}%)")
    print(f"  {'operator':<16} {'calls':>6} " + " ".join(f"{'thread ' + str(t) + ' ms':>12}" for t in threads))
    for op, by in sorted(per_op.items(), key=lambda kv: -max(kv[1].values())):
        print(f"  {op:<16} {count[op]:>6} " + " ".join(f"{by.get(t, 0) / 1000:>12.3f}" for t in threads))


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) == 2 else 1)
    events = json.load(open(sys.argv[1]))
    events = events["traceEvents"] if isinstance(events, dict) else events
    spans = sorted((e for e in events if e.get("ph") == "X"), key=lambda e: e["ts"])
    samples = [s for s in spans if s["name"] == "Sample"]
    if not samples:
        summarise("whole trace", spans)
        return
    # A step ends with its Sample (and the Scalar/Emit steps right after it, on thread 0).
    cuts = [s["ts"] + s["dur"] for s in samples]
    summarise("prefill (and its first token)", [s for s in spans if s["ts"] < cuts[0] + 5])
    for i in range(1, len(cuts)):
        summarise(f"decode step {i}", [s for s in spans if cuts[i - 1] + 5 <= s["ts"] < cuts[i] + 5])


if __name__ == "__main__":
    main()
