#!/usr/bin/env python3
"""Side-by-side speed of IRON and llama.cpp on the same GGUF file, threads and workload.

Runs `iron bench` and llama.cpp (through PyPI's llama-cpp-python, which builds the same ggml)
alternately, REPS times each, and prints each figure of both with its spread and their ratio.
llama.cpp is timed around its own calls only (one call for the prompt, one per decoded token),
with logits for the last row alone, as IRON computes them; picking each next token in numpy is
not counted against it.

    python3 -m pip install llama-cpp-python      # builds llama.cpp from source (minutes)
    python3 bench/compare_llama_cpp.py -m models/SmolLM2-135M-Instruct.Q4_1.gguf -t 2 -p 512 -n 128 -r 5
    # at depth 2048 (tokens already in the cache), both with q8_0 caches, llama.cpp with flash attention:
    python3 bench/compare_llama_cpp.py -m models/SmolLM2-135M-Instruct.Q4_1.gguf -t 2 -d 2048 -ctk q8_0 -ctv q8_0 -fa
    # llama.cpp's own llama-bench as the peer, built for AVX2 alone, against IRON's AVX2 kernels
    # (on any x86, for the figures of an AVX2-only processor):
    bench/build_llama_cpp.sh avx2
    IRON_CPU=avx2 python3 bench/compare_llama_cpp.py -m MODEL -t 2 --llama-bench build-llama-cpp-avx2/bin/llama-bench

With --llama-bench each of llama.cpp's runs is one `llama-bench -r 1` process (its own timing:
the prompt in one batch, then single-token decode steps), alternating with IRON's as before.

Not part of the tests: it measures, it does not pass or fail.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import llama_cpp_binding  # bench/, beside this script


def fmt(xs):
    """Mean ± sample standard deviation of a list of figures ("-" for none)."""
    if not xs:
        return "-"
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{statistics.mean(xs):9.1f} ± {sd:6.1f}"


def measured(command):
    """Runs command; its standard output and the peak resident memory (MiB) the kernel counted
    for that process alone (wait4's rusage, ru_maxrss: the mapped file's pages it touched, its
    heap and stacks), the same measure for either side."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(command, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        text = out.read()
        if proc.returncode:
            raise subprocess.CalledProcessError(proc.returncode, command, text, err.read())
    return text, usage.ru_maxrss / 1024.0  # KiB on Linux


def iron_run(iron, model, threads, prompt, gen, batch, precision, depth, cache_k, cache_v):
    command = [iron, "bench", "-m", model, "-t", str(threads), "-p", str(prompt), "-n", str(gen), "-r", "1",
               "-b", str(batch), "-d", str(depth), "--precision", precision]
    command += ["-ctk", cache_k] if cache_k else []
    command += ["-ctv", cache_v] if cache_v else []
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    figures = {}
    for test, value in re.findall(r"\|\s*(pp\d+|tg\d+)(?: @ d\d+)?\s*\|\s*\d+\s*\|\s*([\d.]+)", out):
        figures[test[:2]] = float(value)
    # The process's ru_maxrss as measured() reads llama-bench's, but taken before `iron bench`
    # runs its streaming-read test, whose buffer is not the model's.
    peak = re.search(r"peak memory: ([\d.]+) MiB", out)
    return figures, float(peak.group(1)) if peak else None, out


def llama_cpp_run(llm, llama_cpp, prompt_ids, gen, depth_ids):
    """Prefill `prompt_ids` in one batch, then `gen` single-token decode steps (greedy), each test
    after `depth_ids` already in the cache (filled once, untimed, and kept)."""
    figures = {}
    depth = len(depth_ids)

    def fresh():
        # The cache back to the depth's tokens: reset() alone rewinds the token count, and
        # llama.cpp was seen to slow down run after run without clearing what follows.
        if depth and llm.n_tokens >= depth:
            llm._ctx.kv_cache_seq_rm(-1, depth, -1)
            llm.n_tokens = depth
            return
        llm.reset()
        llm._ctx.kv_cache_clear()
        if depth:
            for at in range(0, depth, llm.n_batch):
                llm.eval(depth_ids[at:at + llm.n_batch])

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
            # The last call's one row of logits, read from the context (llm.scores holds n_batch
            # rows without logits_all, fewer than a deep cache's positions).
            logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
            token = int(logits.argmax())
        figures["tg"] = gen / spent
    return figures


def llama_bench_run(binary, model, threads, prompt, gen, batch, depth, cache_k, cache_v, flash_attn):
    """One llama-bench process: its pp and tg figures (tokens/s) from its JSON output."""
    import json
    command = [binary, "-m", model, "-t", str(threads), "-p", str(prompt), "-n", str(gen), "-r", "1",
               "-b", str(batch), "-ub", str(batch), "-d", str(depth), "-o", "json", "-fa", "1" if flash_attn else "0"]
    command += ["-ctk", cache_k] if cache_k else []
    command += ["-ctv", cache_v] if cache_v else []
    out, rss = measured(command)
    figures = {}
    for test in json.loads(out):
        figures["pp" if test["n_gen"] == 0 else "tg"] = float(test["avg_ts"])
    figures["peak"] = rss
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-m", "--model", required=True, help="the GGUF file both run")
    parser.add_argument("-t", "--threads", type=int, default=os.cpu_count(), help="threads for both")
    parser.add_argument("-p", "--n-prompt", type=int, default=512, help="prompt tokens to prefill")
    parser.add_argument("-n", "--n-gen", type=int, default=128, help="tokens to decode")
    parser.add_argument("-r", "--repetitions", type=int, default=5, help="alternating runs of each")
    parser.add_argument("-b", "--batch-size", type=int, default=512, help="prompt rows per call, for both")
    parser.add_argument("-d", "--n-depth", type=int, default=0,
                        help="tokens already in the cache when each test starts (filled once, untimed), for both")
    parser.add_argument("-ctk", "--cache-type-k", choices=["f32", "f16", "bf16", "q8_0"],
                        help="the key cache's type, for both (default: each one's own: llama.cpp f16, IRON by precision)")
    parser.add_argument("-ctv", "--cache-type-v", choices=["f32", "f16", "bf16", "q8_0"],
                        help="the value cache's type, for both")
    parser.add_argument("-fa", "--flash-attn", action="store_true",
                        help="llama.cpp with flash attention (needed for its quantised value caches)")
    parser.add_argument("--precision", default="medium", choices=["highest", "high", "medium"],
                        help="IRON's matmul precision (medium rounds activations to int8 blocks, as llama.cpp does)")
    parser.add_argument("--iron", default=os.path.join(os.path.dirname(__file__), "..", "build", "iron"),
                        help="the iron binary (default: build/iron)")
    parser.add_argument("--llama-bench", metavar="PATH",
                        help="llama.cpp's llama-bench as the peer (bench/build_llama_cpp.sh builds it for an "
                             "instruction set), instead of llama-cpp-python")
    args = parser.parse_args()
    if args.llama_bench:
        return compare_with_llama_bench(args)
    llama_cpp, extra_bufts = llama_cpp_binding.load()
    if not extra_bufts:
        print("llama.cpp: extra buffer types (AMX repacking) off; LLAMA_CPP_EXTRA_BUFTS=1 turns them on "
              "(bench/llama_cpp_binding.py says why)", file=sys.stderr)

    # ggml.h: GGML_TYPE_BF16 = 30, which this binding may not name
    ggml_type = {"f32": llama_cpp.GGML_TYPE_F32, "f16": llama_cpp.GGML_TYPE_F16,
                 "bf16": getattr(llama_cpp, "GGML_TYPE_BF16", 30), "q8_0": llama_cpp.GGML_TYPE_Q8_0, None: None}
    llm = llama_cpp.Llama(model_path=args.model, n_threads=args.threads, n_threads_batch=args.threads,
                          n_ctx=args.n_depth + args.n_prompt + args.n_gen + 8, n_batch=max(args.batch_size, 1),
                          n_ubatch=max(args.batch_size, 1), logits_all=False, verbose=False,
                          flash_attn=args.flash_attn, type_k=ggml_type[args.cache_type_k],
                          type_v=ggml_type[args.cache_type_v])
    vocab = llm.n_vocab()
    made_up = lambda n: [1 + (i * 7919) % (vocab - 1) for i in range(n)]  # as `iron bench` makes them
    prompt_ids, depth_ids = made_up(args.n_prompt), made_up(args.n_depth)
    iron = lambda gen: iron_run(args.iron, args.model, args.threads, args.n_prompt, gen, args.batch_size,
                                args.precision, args.n_depth, args.cache_type_k, args.cache_type_v)
    for _ in range(2):  # warm up both at full size
        llama_cpp_run(llm, llama_cpp, prompt_ids, 8, depth_ids)
    iron(8)

    peer = lambda: llama_cpp_run(llm, llama_cpp, prompt_ids, args.n_gen, depth_ids)
    report(args, iron, peer, "llama.cpp (llama-cpp-python)")


def compare_with_llama_bench(args):
    iron = lambda gen: iron_run(args.iron, args.model, args.threads, args.n_prompt, gen, args.batch_size,
                                args.precision, args.n_depth, args.cache_type_k, args.cache_type_v)
    peer = lambda: llama_bench_run(args.llama_bench, args.model, args.threads, args.n_prompt, args.n_gen,
                                   args.batch_size, args.n_depth, args.cache_type_k, args.cache_type_v,
                                   args.flash_attn)
    flags = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(args.llama_bench))), "flags.txt")
    built = open(flags).read().strip() if os.path.exists(flags) else "flags not recorded"
    iron(8)  # warm up both (the file in the page cache)
    llama_bench_run(args.llama_bench, args.model, args.threads, 0, 8, args.batch_size, 0, None, None, False)
    report(args, iron, peer, f"llama-bench ({built})")


def report(args, iron, peer, peer_name):
    """Alternating runs of both, then the table of figures with spreads and ratios."""
    results = {"iron": {"pp": [], "tg": []}, "llama.cpp": {"pp": [], "tg": []}}
    peaks, peer_peaks = [], []
    shares = {"iron": [], "llama.cpp": []}  # each decode's share of the streaming-read bound
    for rep in range(args.repetitions):
        figures, peak, out = iron(args.n_gen)
        peaks.append(peak)
        for k, v in figures.items():
            results["iron"][k].append(v)
        theirs = peer()
        peer_peak = theirs.pop("peak", None)
        if peer_peak:
            peer_peaks.append(peer_peak)
        for k, v in theirs.items():
            results["llama.cpp"][k].append(v)
        # What a decoded token reads and the streaming reads `iron bench` took beside its decode
        # (the middle of their lowest and highest): both engines read the same weights, so
        # llama.cpp's decode (run right after) is held to the same bound.
        read = re.search(r"read per decoded token: ([\d.]+) MiB of weights \+ ([\d.]+) MiB of cache", out)
        stream = re.search(r"streaming read(?: of \d+ MiB)?: ([\d.]+) GB/s(?: to ([\d.]+) GB/s)?", out)
        if read and stream:
            token_bytes = (float(read.group(1)) + float(read.group(2))) * 2**20
            bandwidth = (float(stream.group(1)) + float(stream.group(2) or stream.group(1))) / 2 * 1e9
            for side, tg in (("iron", figures.get("tg")), ("llama.cpp", theirs.get("tg"))):
                if tg:
                    shares[side].append(tg * token_bytes / bandwidth)
        print(f"run {rep + 1}/{args.repetitions}: iron {figures}, llama.cpp {theirs}", file=sys.stderr)

    print(f"\npeer: {peer_name}; IRON_CPU={os.environ.get('IRON_CPU', '(unset: every feature)')}")
    name = os.path.basename(args.model)
    caches = f"caches k {args.cache_type_k or 'default'}, v {args.cache_type_v or 'default'}"
    print(f"\nmodel {name}, {args.threads} threads, {args.repetitions} alternating runs each, iron at "
          f"--precision {args.precision}, {caches}, llama.cpp flash attention {'on' if args.flash_attn else 'off'}, "
          f"depth {args.n_depth}, tokens/s:")
    # "each run": the ratio of each run of IRON to the peer's run right after it, as the lowest,
    # the median and the highest: on a shared machine whose speed drifts between runs, a pair
    # measured a few seconds apart shares more of the drift than the means of all runs do.
    print(f"| {'test':14} | {'iron':18} | {'llama.cpp':18} | {'ratio':6} | {'each run: min, median, max':26} |")
    print(f"| {'-'*14} | {'-'*18} | {'-'*18} | {'-'*6} | {'-'*26} |")
    at = f" @ d{args.n_depth}" if args.n_depth else ""
    for test, label in (("pp", f"pp{args.n_prompt}{at}"), ("tg", f"tg{args.n_gen}{at}")):
        a, b = results["iron"][test], results["llama.cpp"][test]
        if not a and not b:
            continue
        ratio = statistics.mean(a) / statistics.mean(b) if a and b else float("nan")
        pairs = [x / y for x, y in zip(a, b) if y > 0]
        each = f"{min(pairs):.2f}, {statistics.median(pairs):.2f}, {max(pairs):.2f}" if pairs else "-"
        print(f"| {label:14} | {fmt(a):18} | {fmt(b):18} | {ratio:6.2f} | {each:26} |")
    line = (f"peak resident memory of each run's process (ru_maxrss; iron's before its streaming-read test): "
            f"iron {max(p for p in peaks if p):.1f} MiB")
    if peer_peaks:
        line += f", llama-bench {max(peer_peaks):.1f} MiB"
    else:
        line += " (llama-cpp-python runs in this process: not measured apart)"
    print(line)
    if shares["iron"] and shares["llama.cpp"]:
        span = lambda xs: f"{100 * min(xs):.0f}-{100 * max(xs):.0f}%"
        print(f"decode's share of the streaming-read bound (the bytes a token reads over the bandwidth each "
              f"IRON run measured beside its decode; llama.cpp's run follows it): iron {span(shares['iron'])}, "
              f"llama.cpp {span(shares['llama.cpp'])}")


if __name__ == "__main__":
    main()
