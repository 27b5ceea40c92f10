#!/usr/bin/env python3
"""Writes the Python API reference (docs/python-api.md) from the package's docstrings.

  PYTHONPATH=build/python .venv/bin/python scripts/python_api_doc.py > docs/python-api.md

python/tests/test_api_doc.py fails when the committed file differs from what this prints, so a
docstring changed without regenerating it is caught.
"""

import inspect

import iron
from iron import functional, models


def signature(obj, name):
    try:
        return f"{name}{inspect.signature(obj)}"
    except (TypeError, ValueError):
        # A C++ function: nanobind's docstring starts with its signature.
        doc = (getattr(obj, "__doc__", None) or "").strip().splitlines()
        return doc[0] if doc and doc[0].startswith(name) else name


def doc(obj):
    d = inspect.getdoc(obj) or ""
    lines = d.splitlines()
    # nanobind's docstrings start with the signature(s), then a blank line.
    while lines and ("(" in lines[0] and "->" in lines[0] or lines[0].startswith("Overloaded")):
        lines.pop(0)
    return "\n".join(lines).strip()


def section(title, module, names):
    out = [f"## {title}", ""]
    for name in names:
        obj = getattr(module, name)
        if inspect.isclass(obj):
            out += [f"### class `{name}`", "", doc(obj), ""]
            for m, member in vars(obj).items():
                if m.startswith("_") and m not in ("__init__", "__call__", "__getitem__", "__setitem__"):
                    continue
                if callable(member) or isinstance(member, property):
                    text = doc(member)
                    if not text or text.startswith("Initialize self"):
                        continue
                    target = member.fget if isinstance(member, property) else member
                    sig = m if isinstance(member, property) else signature(target, m)
                    out += [f"- `{sig}`: " + " ".join(text.split())]
            out.append("")
        elif callable(obj):
            out += [f"### `{signature(obj, name)}`", "", doc(obj), ""]
    return out


def main():
    lines = ["# The Python API", "",
             "Generated from the docstrings by `scripts/python_api_doc.py`; README.md's \"From Python\" shows it in use.", ""]
    lines += section("iron", iron, ["Graph", "GraphStats", "Module", "param", "state", "weight", "carry", "Carry", "clamp",
                                    "on_host", "CarriedLoop", "Profile", "Precision", "Handle", "Scratchpad",
                                    "Carried", "Affine", "upto", "at", "window", "AccessPattern", "CompiledGraph",
                                    "Run", "StateDict"])
    # Its functions and classes (ConvState), not the names it imports.
    lines += section("iron.functional", functional,
                     [n for n, obj in functional.__dict__.items() if not n.startswith("_")
                      and (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__module__ == "iron.functional"])
    lines += section("iron.models", models, ["load", "Model", "BatchDecoder", "Prompt", "Row", "Sampling"])
    lines += section("iron.Engine: serving many requests at once", iron, ["Engine", "Stream"])
    lines += section("iron.Conversation: a chat that keeps its cache", iron, ["Conversation", "Turn"])
    lines += section("iron.Encoder: sentence embeddings", iron, ["Encoder"])
    lines += section("iron.Api: iron serve's OpenAI API without HTTP", iron.api, ["Api", "Response", "BodyStream"])
    print("\n".join(l.rstrip() for l in lines).rstrip() + "\n", end="")


if __name__ == "__main__":
    main()
