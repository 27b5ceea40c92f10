#!/usr/bin/env python3
"""Side-by-side speed of IRON and llama.cpp on the same GGUF file, threads and workload.

Runs `iron bench` and llama.cpp (through PyPI's llama-cpp-python, which builds the same ggml)
alternately, REPS times each, and prints each figure of both with its spread and their ratio.
llama.cpp is timed around its own calls only (one call for the prompt, one per decoded token),
with logits for the last row alone, as IRON computes them; picking each next token in numpy is
not counted against it.

    python3 -m pip install llama-cpp-python      # builds llama.cpp from source (minutes)
    python3 bench/compare_llama_cpp.py -m models/SmolLM2-135M-Instruct.Q4_1.gguf -t 2 -p 512 -n 128 -r 5

Not part of the tests: it measures, it does not pass or fail.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time


def fmt(xs):
    """Mean ± sample standard deviation of a list of figures ("-" for none)."""
    if not xs:
        return "-"
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{statistics.mean(xs):9.1f} ± {sd:6.1f}"


def iron_run(iron, model, threads, prompt, gen, batch, precision):
    out = subprocess.run(
        [iron, "bench", "-m", model, "-t", str(threads), "-p", str(prompt), "-n", str(gen), "-r", "1", "-b", str(batch),
         "--precision", precision],
        check=True, capture_output=True, text=True).stdout
    figures = {}
    for test, value in re.findall(r"\|\s*(pp\d+|tg\d+)\s*\|\s*\d+\s*\|\s*([\d.]+)", out):
        figures[test[:2]] = float(value)
    peak = re.search(r"peak memory: ([\d.]+) MiB", out)
    return figures, float(peak.group(1)) if peak else None, out


def llama_cpp_run(llm, llama_cpp, prompt_ids, gen):
    """Prefill `prompt_ids` in one batch, then `gen` single-token decode steps (greedy)."""
    figures = {}

    def fresh():
        # An empty KV cache for each test: reset() alone rewinds the token count, and llama.cpp
        # was seen to slow down run after run without the clear.
        llm.reset()
        llm._ctx.kv_cache_clear()

    if prompt_ids:
        fresh()
        # One call for the whole prompt: its wall time is llama.cpp's (its prompt counters were
        # seen to read near zero on a first large batch).
        start = time.perf_counter()
        llm.eval(prompt_ids)
        figures["pp"] = len(prompt_ids) / (time.perf_counter() - start)
    if gen:
        fresh()
        token = prompt_ids[0] if prompt_ids else 1
        spent = 0.0
        for _ in range(gen):
            # Only llama.cpp's own call is timed (its Python wrapper adds microseconds); picking
            # the next token in numpy is not.
            start = time.perf_counter()
            llm.eval([token])
            spent += time.perf_counter() - start
            token = int(llm.scores[llm.n_tokens - 1].argmax())
        figures["tg"] = gen / spent
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-m", "--model", required=True, help="the GGUF file both run")
    parser.add_argument("-t", "--threads", type=int, default=os.cpu_count(), help="threads for both")
    parser.add_argument("-p", "--n-prompt", type=int, default=512, help="prompt tokens to prefill")
    parser.add_argument("-n", "--n-gen", type=int, default=128, help="tokens to decode")
    parser.add_argument("-r", "--repetitions", type=int, default=5, help="alternating runs of each")
    parser.add_argument("-b", "--batch-size", type=int, default=512, help="prompt rows per call, for both")
    parser.add_argument("--precision", default="medium", choices=["highest", "high", "medium"],
                        help="IRON's matmul precision (medium rounds activations to int8 blocks, as llama.cpp does)")
    parser.add_argument("--iron", default=os.path.join(os.path.dirname(__file__), "..", "build", "iron"),
                        help="the iron binary (default: build/iron)")
    args = parser.parse_args()
    try:
        import llama_cpp
    except ImportError:
        sys.exit("llama-cpp-python is not installed: python3 -m pip install llama-cpp-python")

    llm = llama_cpp.Llama(model_path=args.model, n_threads=args.threads, n_threads_batch=args.threads,
                          n_ctx=args.n_prompt + args.n_gen + 8, n_batch=max(args.batch_size, 1),
                          n_ubatch=max(args.batch_size, 1), logits_all=False, verbose=False)
    vocab = llm.n_vocab()
    prompt_ids = [1 + (i * 7919) % (vocab - 1) for i in range(args.n_prompt)]
    for _ in range(2):  # warm up both at full size
        llama_cpp_run(llm, llama_cpp, prompt_ids, 8)
    iron_run(args.iron, args.model, args.threads, args.n_prompt, 8, args.batch_size, args.precision)

    results = {"iron": {"pp": [], "tg": []}, "llama.cpp": {"pp": [], "tg": []}}
    peaks = []
    for rep in range(args.repetitions):
        figures, peak, _ = iron_run(args.iron, args.model, args.threads, args.n_prompt, args.n_gen, args.batch_size,
                                    args.precision)
        peaks.append(peak)
        for k, v in figures.items():
            results["iron"][k].append(v)
        for k, v in llama_cpp_run(llm, llama_cpp, prompt_ids, args.n_gen).items():
            results["llama.cpp"][k].append(v)
        print(f"run {rep + 1}/{args.repetitions}: iron {figures}", file=sys.stderr)

    name = os.path.basename(args.model)
    print(f"\nmodel {name}, {args.threads} threads, {args.repetitions} alternating runs each, iron at "
          f"--precision {args.precision}, tokens/s:")
    print(f"| {'test':8} | {'iron':18} | {'llama.cpp':18} | {'ratio':6} |")
    print(f"| {'-'*8} | {'-'*18} | {'-'*18} | {'-'*6} |")
    for test, label in (("pp", f"pp{args.n_prompt}"), ("tg", f"tg{args.n_gen}")):
        a, b = results["iron"][test], results["llama.cpp"][test]
        ratio = statistics.mean(a) / statistics.mean(b) if a and b else float("nan")
        print(f"| {label:8} | {fmt(a):18} | {fmt(b):18} | {ratio:6.2f} |")
    if peaks and peaks[0]:
        print(f"iron peak memory: {max(peaks):.1f} MiB")


if __name__ == "__main__":
    main()
