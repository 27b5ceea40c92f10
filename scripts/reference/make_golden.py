#!/usr/bin/env python3
"""Write the golden logits files used by the C++ tests.

    python3 scripts/reference/make_golden.py [--smollm2 MODEL] [--stories MODEL] [--out DIR]
                                             [--gemma3 MODEL] [--qwen2 MODEL] [--only NAME]

Defaults: models/SmolLM2-135M-Instruct.Q4_1.gguf, ../shared/models/stories260K.gguf,
tests/golden/.  Writes smollm2_logits.json and stories260k_logits.json; with --gemma3 (e.g.
models/gemma-3-270m-q4_k_m.gguf) also gemma3_logits.json, checked against llama.cpp
(llama-cpp-python) when it is installed; with --qwen2 (e.g.
models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf) also qwen2_logits.json. --only NAME (stories260k,
smollm2, gemma3, qwen2) writes that file alone.
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
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import gemma3_numpy  # noqa: E402
import llama_numpy as ref  # noqa: E402
import qwen2_numpy  # noqa: E402
from tokenizer_golden import gemma3_sentencepiece, qwen2_tokenizer  # noqa: E402

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


FIRST_POSITION_DESCRIPTION = (
    "A prompt with first_position F stores only positions F..n_tokens-1: positions[i] is "
    "position pos = F + i (the model still reads every token from 0); checks (when present) "
    "records figures that back the file, each with what it measured. ")


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


def records(mod, model, ids, first=0):
    """Per position t >= first: the reference's prediction for token t+1 given ids[:t+1]."""
    logits = mod.forward(model, ids, rows=range(first, len(ids)))
    logp, lse = ref.log_softmax(logits)
    tops = np.argsort(-logits, axis=-1, kind="stable")[:, :TOPK]
    rest_mask = np.ones_like(logits, dtype=bool)
    np.put_along_axis(rest_mask, tops, False, axis=-1)
    rest = np.log(np.where(rest_mask, np.exp(logp), 0.0).sum(axis=-1))  # log P(outside top-k)
    out = []
    for r, t in enumerate(range(first, len(ids))):
        top = tops[r]
        out.append({
            "pos": t,
            "top1": int(top[0]),
            "top_ids": [int(i) for i in top],
            "top_logprobs": [round(float(logp[r, i]), 5) for i in top],
            "lse": round(float(lse[r]), 5),
            "rest_logprob": round(float(rest[r]), 5),
            "next_logprob": round(float(logp[r, ids[t + 1]]), 5) if t + 1 < len(ids) else None,
        })
    return out


def make(model_path, prompts, name, tok_decode, command, tokenization, mod=ref):
    """mod: the reference module (llama_numpy or gemma3_numpy). A prompt's "first_position"
    (default 0) is the first position stored, to keep long prompts' files small."""
    t0 = time.time()
    model = mod.load(model_path)
    t_load = time.time() - t0
    entries = []
    for p in prompts:
        ids = p["token_ids"]
        greedy, margins = mod.generate(model, ids, N_GREEDY)
        e = dict(p)
        e["n_tokens"] = len(ids)
        e["positions"] = records(mod, model, ids, p.get("first_position", 0))
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
            "for positions, the margin is top_logprobs[0] - top_logprobs[1]). " +
            (FIRST_POSITION_DESCRIPTION if any("first_position" in p for p in prompts) else "") +
            KL_DESCRIPTION),
        "kl_definition": KL_DESCRIPTION,
        "kl_python": KL_SOURCE,
        "model": {"file": os.path.basename(os.path.realpath(model_path)),
                  "sha256": sha256(model_path), "config": model["cfg"]},
        "reference": {
            "script": None,
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
    doc["reference"]["script"] = f"scripts/reference/{mod.__name__}.py"
    doc["reference"]["seconds"] = round(time.time() - t0, 2)
    doc["reference"]["load_seconds"] = round(t_load, 2)
    return doc, model


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


# Public-domain texts (the Gettysburg Address, the opening of A Tale of Two Cities, the
# Declaration of Independence's second paragraph): over 512 tokens, so the local layers' sliding
# window hides the start of the text from the last positions.
LONG_TEXT = """Four score and seven years ago our fathers brought forth on this continent, a new nation, \
conceived in Liberty, and dedicated to the proposition that all men are created equal.
Now we are engaged in a great civil war, testing whether that nation, or any nation so conceived and \
so dedicated, can long endure. We are met on a great battle-field of that war. We have come to \
dedicate a portion of that field, as a final resting place for those who here gave their lives that \
that nation might live. It is altogether fitting and proper that we should do this.
But, in a larger sense, we can not dedicate -- we can not consecrate -- we can not hallow -- this \
ground. The brave men, living and dead, who struggled here, have consecrated it, far above our poor \
power to add or detract. The world will little note, nor long remember what we say here, but it can \
never forget what they did here. It is for us the living, rather, to be dedicated here to the \
unfinished work which they who fought here have thus far so nobly advanced. It is rather for us to be \
here dedicated to the great task remaining before us -- that from these honored dead we take \
increased devotion to that cause for which they gave the last full measure of devotion -- that we \
here highly resolve that these dead shall not have died in vain -- that this nation, under God, shall \
have a new birth of freedom -- and that government of the people, by the people, for the people, \
shall not perish from the earth.

It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of \
foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, \
it was the season of Darkness, it was the spring of hope, it was the winter of despair, we had \
everything before us, we had nothing before us, we were all going direct to Heaven, we were all going \
direct the other way -- in short, the period was so far like the present period, that some of its \
noisiest authorities insisted on its being received, for good or for evil, in the superlative degree \
of comparison only.

We hold these truths to be self-evident, that all men are created equal, that they are endowed by \
their Creator with certain unalienable Rights, that among these are Life, Liberty and the pursuit of \
Happiness. That to secure these rights, Governments are instituted among Men, deriving their just \
powers from the consent of the governed, That whenever any Form of Government becomes destructive of \
these ends, it is the Right of the People to alter or to abolish it, and to institute new Government, \
laying its foundation on such principles and organizing its powers in such form, as to them shall \
seem most likely to effect their Safety and Happiness. Prudence, indeed, will dictate that \
Governments long established should not be changed for light and transient causes; and accordingly \
all experience hath shewn, that mankind are more disposed to suffer, while evils are sufferable, than \
to right themselves by abolishing the forms to which they are accustomed. But when a long train of \
abuses and usurpations, pursuing invariably the same Object evinces a design to reduce them under \
absolute Despotism, it is their right, it is their duty, to throw off such Government, and to \
provide new Guards for their future security. And"""
LONG_FIRST_POSITION = 500


def gemma3_prompts(model_path):
    """Prompts as ids from Google's sentencepiece on the GGUF's vocabulary (the tokenizer golden's
    model), BOS first; each checked to decode back to its text."""
    sp, bos = gemma3_sentencepiece(model_path)
    texts = [
        ("plain_english", "The quick brown fox jumps over the lazy dog, and then it runs "
                          "back into the forest."),
        ("code_python", "def fibonacci(n):\n    if n < 2:\n        return n\n"
                        "    return fibonacci(n - 1) + fibonacci(n - 2)\n"),
        ("numbers_punctuation", "Pi is 3.14159; 1,024 + 42 = 1066! (99%) #7 @ $5? [x] {y} <z> 2^10"),
        ("longer_english", "Once upon a time, in a small village at the edge of a great forest, "
                           "there lived an old clockmaker who repaired every clock in the valley. "
                           "One winter morning a stranger knocked on his door, carrying a broken "
                           "pocket watch that had belonged to"),
        ("long_sliding_window", LONG_TEXT),
    ]
    out = []
    for name, text in texts:
        ids = [bos] + sp.encode(text)
        assert sp.decode(ids[1:]) == text, name
        e = {"name": name, "text": text, "token_ids": ids}
        if name == "long_sliding_window":
            assert len(ids) > LONG_FIRST_POSITION + 100, len(ids)
            e["first_position"] = LONG_FIRST_POSITION
        out.append(e)
    return out, lambda ids: sp.decode(ids)


QWEN2_CPP = """#include <vector>
#include <algorithm>

// Returns the k largest values of v, largest first.
std::vector<int> top_k(std::vector<int> v, size_t k) {
    std::sort(v.begin(), v.end(), [](int a, int b) { return a > b; });
    if (v.size() > k) v.resize(k);
    return v;
}
"""

QWEN2_CHINESE = ("\u673a\u5668\u5b66\u4e60\u662f\u4eba\u5de5\u667a\u80fd\u7684\u4e00\u4e2a\u5206\u652f\uff0c"
                 "\u5b83\u4f7f\u8ba1\u7b97\u673a\u80fd\u591f\u4ece\u6570\u636e\u4e2d\u5b66\u4e60\u89c4\u5f8b\uff0c"
                 "\u800c\u4e0d\u9700\u8981\u663e\u5f0f\u7f16\u7a0b\u3002")


def qwen2_prompts(model_path):
    """Prompts as ids from `tokenizers` on the GGUF's vocabulary and merges (the tokenizer golden's
    model, scripts/tokenizer_golden.py:qwen2_tokenizer), no BOS (add_bos_token is false); the chat
    prompt rendered from tokenizer.chat_template by jinja2; each checked to decode back."""
    tk, scalar = qwen2_tokenizer(model_path)
    chat = jinja2.Template(scalar("tokenizer.chat_template")).render(
        messages=[{"role": "user", "content": "What is the capital of France?"}], add_generation_prompt=True)
    long_text = LONG_TEXT[:LONG_TEXT.index("But, in a larger sense")]
    texts = [
        ("chat_capital_of_france", chat),
        ("plain_english", "The quick brown fox jumps over the lazy dog, and then it runs "
                          "back into the forest."),
        ("code_python", "def fibonacci(n):\n    if n < 2:\n        return n\n"
                        "    return fibonacci(n - 1) + fibonacci(n - 2)\n"),
        ("code_cpp", QWEN2_CPP),
        ("numbers_punctuation", "Pi is 3.14159; 1,024 + 42 = 1066! (99%) #7 @ $5? [x] {y} <z> 2^10"),
        ("chinese", QWEN2_CHINESE),
        ("long_english", long_text),
    ]
    out = []
    for name, text in texts:
        ids = tk.encode(text, add_special_tokens=False).ids
        assert tk.decode(ids, skip_special_tokens=False) == text, name
        out.append({"name": name, "text": text, "token_ids": ids})
    return out, lambda ids: tk.decode(ids, skip_special_tokens=False)


def qwen2_checks(doc, model):
    """Figures that back the golden: the mean log-probability the reference gives each prompt's
    next tokens with RoPE pairing halves (llama.cpp's NEOX, what the golden uses) and pairing
    adjacent dims (what a Llama GGUF's permuted rows would need): the GGUF's q/k rows are not
    permuted if the first is clearly the better model of the text."""
    means = {}
    for neox in (True, False):
        lps = []
        for p in doc["prompts"]:
            ids = p["token_ids"]
            lp, _ = ref.log_softmax(qwen2_numpy.forward(model, ids, rows=range(len(ids) - 1), neox=neox))
            lps += [float(lp[t, ids[t + 1]]) for t in range(len(ids) - 1)]
        means["halves" if neox else "adjacent"] = round(float(np.mean(lps)), 4)
    doc["checks"] = {"mean_next_token_logprob": means,
                     "what": "mean log-probability of each prompt's next token (nats), by RoPE pairing"}


def gemma3_checks(doc, model, model_path):
    """Figures that back the golden, stored in it: (1) how far the sliding window moves the long
    prompt's stored positions (KL of the golden against the same model without a window), so a
    test knows a missing window is visible; (2) agreement with llama.cpp on the same ids."""
    mod = gemma3_numpy
    checks = {}
    long = next(p for p in doc["prompts"] if "first_position" in p)
    window = model["cfg"]["sliding_window"]
    model["cfg"]["sliding_window"] = 1 << 30
    try:
        no_window = mod.forward(model, long["token_ids"], rows=[r["pos"] for r in long["positions"]])
    finally:
        model["cfg"]["sliding_window"] = window
    lp, _ = ref.log_softmax(no_window)
    kls = [kl_top32_rest(r, {"top_ids": list(range(lp.shape[1])), "top_logprobs": list(lp[i])})
           for i, r in enumerate(long["positions"])]
    checks["no_window_kl"] = {"positions_from": window, "max": round(max(kls[window - LONG_FIRST_POSITION:]), 6),
                              "mean": round(float(np.mean(kls[window - LONG_FIRST_POSITION:])), 6)}
    try:
        import llama_cpp
    except ImportError:
        doc["checks"] = checks
        return
    n_ctx = max(p["n_tokens"] for p in doc["prompts"]) + 16
    lm = llama_cpp.Llama(model_path, logits_all=True, n_ctx=n_ctx, n_threads=2, verbose=False)
    per_prompt = {}
    for p in doc["prompts"]:
        ids = p["token_ids"]
        assert lm.tokenize(p["text"].encode("utf-8"), add_bos=True, special=False) == ids, p["name"]
        lm.reset()
        lm.eval(ids)
        rows = [r["pos"] for r in p["positions"]]
        lp, _ = ref.log_softmax(np.asarray(lm.scores[rows], dtype=np.float64))
        kls = [kl_top32_rest(r, dict(enumerate(lp[i]))) for i, r in enumerate(p["positions"])]
        agree = [int(np.argmax(lp[i])) == r["top1"] for i, r in enumerate(p["positions"])]
        per_prompt[p["name"]] = {"positions": len(rows), "top1_agree": int(sum(agree)),
                                 "kl_mean": round(float(np.mean(kls)), 6), "kl_max": round(max(kls), 6)}
    checks["llama_cpp"] = {
        "llama_cpp_python": version("llama-cpp-python"),
        "what": "llama.cpp's logits (CPU, its default f16 KV cache, activations quantised for "
                "the quantised matmuls) on the same ids, scored with kl_top32_rest against the "
                "golden; top1_agree counts positions whose argmax is the golden's top1; "
                "the tokenizer ids were checked equal to llama.cpp's tokenize(add_bos, no special)",
        "prompts": per_prompt}
    doc["checks"] = checks


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser()
    ap.add_argument("--smollm2", default=os.path.join(root, "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--stories", default=os.path.join(root, "../shared/models/stories260K.gguf"))
    ap.add_argument("--out", default=os.path.join(root, "tests/golden"))
    ap.add_argument("--gemma3", default=None, help="also write gemma3_logits.json from this GGUF")
    ap.add_argument("--qwen2", default=None, help="also write qwen2_logits.json from this GGUF")
    ap.add_argument("--qwen2-1.5b", dest="qwen2_1_5b", default=None,
                    help="also write qwen2_1_5b_logits.json from this GGUF (Qwen2.5-Coder-1.5B: ~12 GB of float64 weights)")
    ap.add_argument("--only", default=None,
                    help="write only this golden: stories260k, smollm2, gemma3, qwen2, qwen2_1_5b")
    a = ap.parse_args()
    wanted = lambda name: a.only is None or a.only == name
    os.makedirs(a.out, exist_ok=True)
    command = "python3 scripts/reference/make_golden.py"

    # stories260K: validate the reference against llama2.c's published 60 greedy ids first.
    write_llama_goldens(a, command, wanted)
    if a.gemma3 and wanted("gemma3"):
        write_gemma3_golden(a, command, root)
    # Qwen2.5-Coder-0.5B (in CI's Release stage) and, when given, the 1.5B (out of CI: a test that
    # names the file when it is absent). The RoPE-pairing checks are the GGUF converter's
    # convention, the same for both: run on the 0.5B alone.
    for path, only, out, name, checks in (
            (a.qwen2, "qwen2", "qwen2_logits.json",
             "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf (Qwen2.5-Coder-0.5B-Instruct)", True),
            (a.qwen2_1_5b, "qwen2_1_5b", "qwen2_1_5b_logits.json",
             "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf (Qwen2.5-Coder-1.5B-Instruct)", False)):
        if not path or not wanted(only):
            continue
        prompts, decode = qwen2_prompts(path)
        doc, model = make(path, prompts, name, decode,
                          command + " --only %s --%s %s" % (only, only.replace("_", "-"), os.path.relpath(path, root)),
                          f"tokenizers {version('tokenizers')} BPE built from the GGUF vocab/merges with Qwen2's "
                          "Split regex + ByteLevel, added tokens as the GGUF types them "
                          "(scripts/tokenizer_golden.py:qwen2_tokenizer), no BOS; chat prompt rendered from "
                          f"tokenizer.chat_template with jinja2 {version('jinja2')}, add_generation_prompt=True "
                          "(Qwen's default system message); every prompt round-trips decode(encode(text)) == text",
                          mod=qwen2_numpy)
        if checks:
            t0 = time.time()
            qwen2_checks(doc, model)
            doc["checks"]["seconds"] = round(time.time() - t0, 2)
        del model
        write(doc, os.path.join(a.out, out))


def write_llama_goldens(a, command, wanted):
    if not wanted("stories260k"):
        return write_smollm2_golden(a, command, wanted)
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
               "ids written by hand: BOS (1) + SentencePiece pieces of the GGUF vocab")[0],
          os.path.join(a.out, "stories260k_logits.json"))
    write_smollm2_golden(a, command, wanted)


def write_smollm2_golden(a, command, wanted):
    if not wanted("smollm2"):
        return
    prompts, decode = smollm2_prompts(a.smollm2)
    write(make(a.smollm2, prompts, "SmolLM2-135M-Instruct.Q4_1.gguf", decode, command,
               f"tokenizers {version('tokenizers')} BPE built from the GGUF vocab/merges (digits "
               "split, GPT-2 byte-level regex, control tokens special, no BOS); chat prompt "
               f"rendered from tokenizer.chat_template with jinja2 {version('jinja2')}, "
               "add_generation_prompt=True; every prompt round-trips decode(encode(text)) == text")[0],
          os.path.join(a.out, "smollm2_logits.json"))


def write_gemma3_golden(a, command, root):
    if a.gemma3:
        prompts, decode = gemma3_prompts(a.gemma3)
        doc, model = make(a.gemma3, prompts, "gemma-3-270m-q4_k_m.gguf (Gemma 3 270M base)", decode,
                          command + " --gemma3 " + os.path.relpath(a.gemma3, root),
                          f"sentencepiece {version('sentencepiece')} on a ModelProto built from "
                          "the GGUF's pieces, scores and types (scripts/tokenizer_golden.py:"
                          "gemma3_sentencepiece), BOS (2) prepended; every prompt round-trips "
                          "decode(encode(text)) == text. long_sliding_window stores positions "
                          f"from first_position ({LONG_FIRST_POSITION}) on only",
                          mod=gemma3_numpy)
        t0 = time.time()
        gemma3_checks(doc, model, a.gemma3)
        doc["checks"]["seconds"] = round(time.time() - t0, 2)
        write(doc, os.path.join(a.out, "gemma3_logits.json"))


# The KL function's source, stored in the JSON so the definition travels with the data.
import inspect  # noqa: E402
KL_SOURCE = "import math\n\n" + inspect.getsource(kl_top32_rest)

if __name__ == "__main__":
    main()
