#!/usr/bin/env python3
"""How close llama.cpp's logits come to the float64 numpy reference on the golden positions.

The same measure (KL over the reference's top-32 ids plus the rest, top-1 agreement) that
tests/models/llama_test.cpp applies to IRON, so IRON's bound at --precision medium can be set
against what llama.cpp itself reaches on the same GGUF file.

    python3 bench/accuracy_llama_cpp.py [-m models/SmolLM2-135M-Instruct.Q4_1.gguf]
                                        [-g tests/golden/smollm2_logits.json] [-t 2]

Needs PyPI's llama-cpp-python (see bench/compare_llama_cpp.py). Not part of the tests.
"""
import argparse
import json
import math
import os
import sys

import numpy as np


def kl_top32_rest(position, logits):
    top = logits.max()
    lse = top + math.log(np.exp(logits - top).sum())
    kl, q_top = 0.0, 0.0
    for i, lp in zip(position["top_ids"], position["top_logprobs"]):
        lq = logits[i] - lse
        kl += math.exp(lp) * (lp - lq)
        q_top += math.exp(lq)
    p_rest, q_rest = math.exp(position["rest_logprob"]), max(1.0 - q_top, 1e-12)
    if p_rest > 0:
        kl += p_rest * (math.log(p_rest) - math.log(q_rest))
    return kl


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("-g", "--golden", default="tests/golden/smollm2_logits.json")
    ap.add_argument("-t", "--threads", type=int, default=2)
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import llama_cpp_binding  # imported late so --help works without llama-cpp-python
    Llama = llama_cpp_binding.load()[0].Llama

    golden = json.load(open(args.golden))
    longest = max(len(p["token_ids"]) for p in golden["prompts"])
    llm = Llama(model_path=args.model, n_ctx=max(512, longest + 8), n_threads=args.threads, logits_all=True,
                verbose=False)
    kls, agree = [], 0
    for prompt in golden["prompts"]:
        ids = prompt["token_ids"]
        llm.reset()
        llm.eval(ids)
        logits = np.array(llm.scores[: len(ids)], dtype=np.float64)
        for position in prompt["positions"]:
            row = logits[position["pos"]]
            kls.append(kl_top32_rest(position, row))
            agree += int(np.argmax(row) == position["top1"])
    print(f"llama.cpp vs the numpy reference: {len(kls)} positions, top-1 agrees at {agree}, "
          f"KL mean {np.mean(kls):.3g}, max {np.max(kls):.3g} nats")


if __name__ == "__main__":
    main()
