#!/usr/bin/env python3
"""What rounding a sentence encoder's matmuls would cost in accuracy, before writing the kernel.

Runs the model in sentence-transformers on torch (f32) twice over the golden sentences without a
prompt (tests/golden/minilm_embeddings.json or embeddinggemma_embeddings.json, by the directory's
name): as it is, and with every nn.Linear's weight and/or input rounded as a matmul path would
round them, then prints the worst and mean cosine between the two runs' vectors. The kinds of
rounding (--round, comma-separated, each run in turn):

  w8a8   both operands to int8 in blocks of 32 along k, each block scaled by its largest |value|
         (q8_0 weights against int8 activation blocks: medium's int8 path for a GGUF weight)
  w8     the weight alone that way, the input left f32
  a8     the input alone that way
  wbf16  the weight rounded to bf16, the input f32 (medium for a float weight on CPUs whose
         bf16 products are slow: the weight read as bf16, multiplied in f32)
  bf16   both operands rounded to bf16 (medium where bf16 products run: vdpbf16ps, AMX)
  w12a12 both operands to 12-bit integers in blocks of 32 (largest |value| to 2047): what int16
         products (vpmaddwd: 16 an instruction, int32 sums that cannot overflow at 12 bits)
         would round
  w8a12  the weight to int8 blocks as w8, the input to 12-bit blocks (a q8_0 weight read as
         int16)

--skip NAME leaves the Linear layers whose module path contains NAME unrounded (repeatable),
to find which layers the error comes from. The bar medium holds an encoder to is a worst cosine
of 0.999 against sentence-transformers (tests/models/, issue 40). An independent reference: the
model is torch's and sentence-transformers', nothing of IRON's runs.

The first use installs sentence-transformers and torch into .venv (scripts/python-env.sh).

    bench/rounding_accuracy.py [-m models/all-MiniLM-L6-v2] [--round w8a8,w8,a8,wbf16,bf16,w12a12,w8a12] [-t 2]
"""
import argparse
import json
import os

import torch_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KINDS = ("w8a8", "w8", "a8", "wbf16", "bf16", "w12a12", "w8a12")  # the docstring's, in its order


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", "--model", default=os.path.join(ROOT, "models", "all-MiniLM-L6-v2"))
    ap.add_argument("--round", default="w8a8,w8,a8,wbf16,bf16", help="kinds of rounding, comma-separated")
    ap.add_argument("--skip", action="append", default=[], help="leave Linear layers whose path contains this unrounded")
    ap.add_argument("-t", "--threads", type=int, default=2)
    a = ap.parse_args()
    kinds = a.round.split(",")
    for k in kinds:
        if k not in KINDS:
            ap.error("unknown rounding %r (%s)" % (k, ", ".join(KINDS)))
    if not os.path.isfile(os.path.join(a.model, "modules.json")):
        ap.error("%s is not a sentence-transformers directory (no modules.json): scripts/fetch-model.sh minilm "
                 "or embeddinggemma fetches one" % a.model)
    base = os.path.basename(os.path.normpath(a.model)).lower()
    name = "embeddinggemma" if "embeddinggemma" in base else "minilm" if "minilm" in base else None
    if name is None:
        ap.error("golden sentences exist for all-MiniLM-L6-v2 and EmbeddingGemma alone; %s names neither" % a.model)
    torch_env.rerun_in_venv()

    import torch
    import torch.nn.functional as F
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(a.threads)
    golden = json.load(open(os.path.join(ROOT, "tests", "golden", name + "_embeddings.json")))
    texts = [c["text"] for c in golden["cases"] if not c.get("prompt_name")]

    def int_blocks(t, top):
        """t rounded to integers in [-top, top] in blocks of 32 along its last axis (zero-padded),
        each block scaled by its largest |value| / top."""
        k = t.shape[-1]
        pad = (-k) % 32
        b = F.pad(t, (0, pad)).reshape(*t.shape[:-1], -1, 32)
        scale = b.abs().amax(-1, keepdim=True) / top
        scale = torch.where(scale == 0, torch.ones_like(scale), scale)
        r = ((b / scale).round().clamp(-top, top) * scale).reshape(*t.shape[:-1], k + pad)
        return r[..., :k]

    def int8_blocks(t):
        """As q8_0 and the int8 path's activation blocks are: 127 the largest."""
        return int_blocks(t, 127)

    def int12_blocks(t):
        return int_blocks(t, 2047)

    def bf16(t):
        return t.bfloat16().float()

    rounders = {"w8a8": (int8_blocks, int8_blocks), "w8": (int8_blocks, None), "a8": (None, int8_blocks),
                "wbf16": (bf16, None), "bf16": (bf16, bf16), "w12a12": (int12_blocks, int12_blocks),
                "w8a12": (int8_blocks, int12_blocks)}

    model = SentenceTransformer(a.model, device="cpu")
    linears = [(n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        exact = model.encode(texts, batch_size=16, convert_to_tensor=True, normalize_embeddings=True).double()
        print("%s: %d sentences, %d Linear layers%s" % (a.model, len(texts), len(linears),
              "; left unrounded: " + ", ".join(a.skip) if a.skip else ""))
        for kind in kinds:
            round_w, round_x = rounders[kind]
            saved, hooks = [], []
            for path, lin in linears:
                if any(s in path for s in a.skip):
                    continue
                if round_w:
                    saved.append((lin, lin.weight.data))
                    lin.weight.data = round_w(lin.weight.data)
                if round_x:
                    hooks.append(lin.register_forward_pre_hook(lambda _m, args: (round_x(args[0]),) + args[1:]))
            try:
                rounded = model.encode(texts, batch_size=16, convert_to_tensor=True, normalize_embeddings=True).double()
            finally:
                for lin, w in saved:
                    lin.weight.data = w
                for h in hooks:
                    h.remove()
            cos = (rounded * exact).sum(-1)
            worst = cos.min().item()
            print("%-6s worst cosine %.6f (1 - %.1e), mean 1 - %.1e: %s the 0.999 bar"
                  % (kind, worst, 1 - worst, 1 - cos.mean().item(), "within" if worst >= 0.999 else "under"))


if __name__ == "__main__":
    main()
