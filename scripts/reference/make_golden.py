#!/usr/bin/env python3
"""Write the golden logits files used by the C++ tests.

    python3 scripts/reference/make_golden.py [--smollm2 MODEL] [--stories MODEL] [--out DIR]

Defaults: models/SmolLM2-135M-Instruct.Q4_1.gguf, ../shared/models/stories260K.gguf,
tests/golden/.  Writes smollm2_logits.json and stories260k_logits.json.
"""
import argparse
import hashlib
import json
import math
import os
import sys
import time
from importlib.metadata import version

import gguf
import jinja2
import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_numpy as ref  # noqa: E402

TOPK = 32
N_GREEDY = 8
STORIES_60 = [int(t) for t in """
403 407 261 378 432 383 286 261 376 298 315 421 395 317 426 338 401 396 267 337
410 408 419 292 411 322 265 282 295 433 426 385 328 432 358 394 261 370 432 352
266 268 388 426 338 391 266 267 337 335 312 432 398 312 286 267 414 270 333 415""".split()]

KL_DESCRIPTION = (
    "KL(p_ref || p_ours) over the reference's top-32 ids S plus one 'rest' bucket: "
    "KL = sum_{i in S} p_i*(log p_i - log q_i) + p_rest*(log p_rest - log q_rest), "
    "p_i = exp(top_logprobs_i), q_i = exp(our log_softmax at id i) (evaluate ours at the "
    "reference's ids, not at our own top-32), p_rest = exp(rest_logprob) (= 1 - sum_S p_i, "
    "stored separately because 1 - sum of 5-decimal values is noisy), q_rest = sum over ids "
    "not in S of our q_j (equivalently 1 - sum_S q_i; floor 1e-12). Natural log (nats). "
    "Python: kl_python / scripts/reference/make_golden.py:kl_top32_rest.")


def kl_top32_rest(ref_rec, ours):
    """KL(p_ref || p_ours) in nats over the reference's top-32 ids plus a 'rest' bucket.
    ref_rec: a golden position record {"top_ids", "top_logprobs", "rest_logprob"}.
    ours: a record of the same shape, or a dict {id: logprob} (optionally with key "rest").
    ours must hold a log-prob for every id in ref_rec["top_ids"]: the C++ side evaluates
    its own log_softmax at the reference's ids. The rest mass is taken from rest_logprob
    (log of the summed probability outside those ids) when given, else 1 - sum."""
    if "top_ids" in ours:
        q_of = dict(zip(ours["top_ids"], ours["top_logprobs"]))
        q_rest_lp = ours.get("rest_logprob") if list(ours["top_ids"]) == list(ref_rec["top_ids"]) else None
    else:
        q_of, q_rest_lp = ours, ours.get("rest")
    kl, sp, sq = 0.0, 0.0, 0.0
    for i, lp in zip(ref_rec["top_ids"], ref_rec["top_logprobs"]):
        lq = q_of[i]
        kl += math.exp(lp) * (lp - lq)
        sp += math.exp(lp)
        sq += math.exp(lq)
    p_rest_lp = ref_rec.get("rest_logprob")
    p_rest = math.exp(p_rest_lp) if p_rest_lp is not None else max(0.0, 1.0 - sp)
    q_rest = math.exp(q_rest_lp) if q_rest_lp is not None else max(1e-12, 1.0 - sq)
    if p_rest > 0.0:
        kl += p_rest * (math.log(p_rest) - math.log(max(q_rest, 1e-12)))
    return kl


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def gpt2_tokenizer(reader):
    """A `tokenizers` BPE tokenizer built from the GGUF vocab (pre-tokenizer 'smollm':
    each digit split, then GPT-2 byte-level regex), control tokens as special tokens."""
    f = lambda k: reader.fields[k].contents()
    toks, types = f("tokenizer.ggml.tokens"), f("tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in f("tokenizer.ggml.merges")]
    tk = Tokenizer(models.BPE({t: i for i, t in enumerate(toks)}, merges))
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([t for t, ty in zip(toks, types) if ty == 3])
    return tk


def records(model, ids):
    """Per position t: the reference's prediction for token t+1 given ids[:t+1]."""
    logits = ref.forward(model, ids)
    logp, lse = ref.log_softmax(logits)
    tops = np.argsort(-logits, axis=-1, kind="stable")[:, :TOPK]
    rest_mask = np.ones_like(logits, dtype=bool)
    np.put_along_axis(rest_mask, tops, False, axis=-1)
    rest = np.log(np.where(rest_mask, np.exp(logp), 0.0).sum(axis=-1))  # log P(outside top-k)
    out = []
    for t in range(len(ids)):
        top = tops[t]
        out.append({
            "pos": t,
            "top1": int(top[0]),
            "top_ids": [int(i) for i in top],
            "top_logprobs": [round(float(logp[t, i]), 5) for i in top],
            "lse": round(float(lse[t]), 5),
            "rest_logprob": round(float(rest[t]), 5),
            "next_logprob": round(float(logp[t, ids[t + 1]]), 5) if t + 1 < len(ids) else None,
        })
    return out


def make(model_path, prompts, name, tok_decode, command, tokenization):
    t0 = time.time()
    model = ref.load(model_path)
    t_load = time.time() - t0
    entries = []
    for p in prompts:
        ids = p["token_ids"]
        greedy, margins = ref.generate(model, ids, N_GREEDY)
        e = dict(p)
        e["n_tokens"] = len(ids)
        e["positions"] = records(model, ids)
        e["greedy_ids"] = greedy
        e["greedy_margins"] = [round(m, 5) for m in margins]
        e["greedy_text"] = tok_decode(greedy)
        entries.append(e)
    doc = {
        "description": (
            f"Golden reference outputs for {name}. For each prompt, token_ids are fed directly "
            "(no tokenizer needed). positions[t] describes the next-token distribution after "
            "token_ids[0..t] (causal, position t uses tokens 0..t): top1 = argmax id; top_ids = "
            f"the {TOPK} highest-logit ids, descending (ties broken by lower id); top_logprobs = "
            "log_softmax(logits) at those ids, rounded to 5 decimals; lse = logsumexp(logits) "
            "(so logit_i = top_logprobs_i + lse); rest_logprob = log of the total probability of all "
            "ids not in top_ids; next_logprob = log-prob of token_ids[t+1] (null "
            f"at the last position). greedy_ids = the {N_GREEDY} argmax tokens generated after the "
            "whole prompt; greedy_margins = top-1 minus top-2 logit at each of those steps (a "
            "small margin means a near tie, where a correct implementation may pick differently; "
            "for positions, the margin is top_logprobs[0] - top_logprobs[1]). " + KL_DESCRIPTION),
        "kl_definition": KL_DESCRIPTION,
        "kl_python": KL_SOURCE,
        "model": {"file": os.path.basename(os.path.realpath(model_path)),
                  "sha256": sha256(model_path), "config": model["cfg"]},
        "reference": {
            "script": "scripts/reference/llama_numpy.py",
            "precision": "float64 activations and matmuls; weights decoded to float32 by "
                         "gguf.quants.dequantize, then widened to float64",
            "numpy": np.__version__, "gguf": gguf_version(),
            "command": command,
            "tokenization": tokenization,
            "seconds": None,
        },
        "topk": TOPK,
        "prompts": entries,
    }
    doc["reference"]["seconds"] = round(time.time() - t0, 2)
    doc["reference"]["load_seconds"] = round(t_load, 2)
    return doc


def gguf_version():
    return version("gguf")


def write(doc, path):
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    n = sum(len(p["positions"]) for p in doc["prompts"])
    print(f"{path}: {os.path.getsize(path)} bytes, {len(doc['prompts'])} prompts, "
          f"{n} positions, {doc['reference']['seconds']} s")


def smollm2_prompts(model_path):
    r = gguf.GGUFReader(model_path)
    tk = gpt2_tokenizer(r)
    template = r.fields["tokenizer.chat_template"].contents()
    chat = jinja2.Template(template).render(
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True)
    texts = [
        ("chat_capital_of_france", chat),
        ("plain_english", "The quick brown fox jumps over the lazy dog, and then it runs "
                          "back into the forest."),
        ("code_python", "def fibonacci(n):\n    if n < 2:\n        return n\n"
                        "    return fibonacci(n - 1) + fibonacci(n - 2)\n"),
        ("numbers_punctuation", "Pi is 3.14159; 1,024 + 42 = 1066! (99%) #7 @ $5?"),
    ]
    out = []
    for name, text in texts:
        ids = tk.encode(text, add_special_tokens=False).ids
        assert 8 <= len(ids) <= 40, (name, len(ids))
        assert tk.decode(ids, skip_special_tokens=False) == text, name
        out.append({"name": name, "text": text, "token_ids": ids})
    return out, lambda ids: tk.decode(ids, skip_special_tokens=False)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser()
    ap.add_argument("--smollm2", default=os.path.join(root, "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--stories", default=os.path.join(root, "../shared/models/stories260K.gguf"))
    ap.add_argument("--out", default=os.path.join(root, "tests/golden"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    command = "python3 scripts/reference/make_golden.py"

    # stories260K: validate the reference against llama2.c's published 60 greedy ids first.
    st = ref.load(a.stories)
    got, _ = ref.generate(st, [1], 60)
    assert got == STORIES_60, "reference does not reproduce the stories260K greedy ids"
    print("stories260K: 60 greedy ids from BOS match SOURCES.md")
    toks = st["reader"].fields["tokenizer.ggml.tokens"].contents()
    sp_decode = lambda ids: "".join(toks[i] for i in ids).replace("\u2581", " ")
    stories_prompts = [
        {"name": "bos_once_upon_a_time", "text": "<s> Once upon a time", "token_ids": [1, 403, 407, 261, 378]},
        {"name": "bos_zoo", "text": "<s> Zoo", "token_ids": [1, 410, 469, 347]},
    ]
    write(make(a.stories, stories_prompts, "stories260K.gguf", sp_decode, command,
               "ids written by hand: BOS (1) + SentencePiece pieces of the GGUF vocab"),
          os.path.join(a.out, "stories260k_logits.json"))

    prompts, decode = smollm2_prompts(a.smollm2)
    write(make(a.smollm2, prompts, "SmolLM2-135M-Instruct.Q4_1.gguf", decode, command,
               f"tokenizers {version('tokenizers')} BPE built from the GGUF vocab/merges (digits "
               "split, GPT-2 byte-level regex, control tokens special, no BOS); chat prompt "
               f"rendered from tokenizer.chat_template with jinja2 {version('jinja2')}, "
               "add_generation_prompt=True; every prompt round-trips decode(encode(text)) == text"),
          os.path.join(a.out, "smollm2_logits.json"))


# The KL function's source, stored in the JSON so the definition travels with the data.
import inspect  # noqa: E402
KL_SOURCE = "import math\n\n" + inspect.getsource(kl_top32_rest)

if __name__ == "__main__":
    main()
