#!/usr/bin/env python3
"""Writes tests/golden/nfc.json: strings and their NFC by Python's unicodedata, for the C++ NFC
(src/text/nfc.cpp) to match. Every code point with a canonical decomposition appears (in groups,
each followed by combining marks of several classes), with Hangul syllables and jamo, singletons,
composition exclusions, non-starter decompositions, and random strings over a stressing alphabet.

Usage: python3 scripts/nfc_golden.py
"""
import json
import os
import random
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARKS = ["\u0301", "\u0323", "\u0308", "\u031b", "\u0345", "\u05b0", "\u093c", "\u3099", "\u0f72", "\u0334"]


def main():
    rng = random.Random(2024)
    decomposable = [cp for cp in range(0x110000)
                    if not 0xD800 <= cp <= 0xDFFF and unicodedata.decomposition(chr(cp))
                    and not unicodedata.decomposition(chr(cp)).startswith("<")]
    texts = []
    for i in range(0, len(decomposable), 12):
        texts.append("".join(chr(cp) + rng.choice(["", "", rng.choice(MARKS), "".join(rng.sample(MARKS, 2))])
                             for cp in decomposable[i:i + 12]))
    alphabet = (list("aeiouAEOUnc ") + MARKS + ["\u1100", "\u1161", "\u11a8", "\u11a7", "\uac00", "\uac01",
                "\ud7a3", "\u212b", "\u2126", "\u0344", "\u0f73", "\uf900", "\u0958", "\u1e9b", "\u00c5",
                "\u0041\u030a", "\u1ec7", "\u1ea0", "\U0001d15e", "\U000110ab", "\u0ddd", "\U00011131", "\u30ac",
                "\u304b", "\uff76", "\uff9e", "\u00e9", "\u0065", "\u0327", "\u0328", "\u0306"])
    for _ in range(400):
        texts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24))))
    texts += ["", "ascii only", "e\u0301\u0323 \u1e0b\u0323 \u0071\u0307\u0323 \u1100\u1161\u11a8 \u1100\uac00\u11a8",
              "\u00c5\u212b\u0041\u030a", "\u0308\u0301 leading marks"]
    cases = [{"text": t, "nfc": unicodedata.normalize("NFC", t)} for t in texts]
    path = os.path.join(ROOT, "tests/golden/nfc.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"source": "Python unicodedata %s" % unicodedata.unidata_version, "cases": cases}, f,
                  ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    changed = sum(c["text"] != c["nfc"] for c in cases)
    print("wrote", path, os.path.getsize(path), "bytes,", len(cases), "cases,", changed, "changed by NFC")


if __name__ == "__main__":
    main()
