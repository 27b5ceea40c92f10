"""examples/llama.py: a whole Llama decoder written in Python gives the built-in C++ model's
logits bit for bit (stories260K here; SmolLM2 by hand: examples/llama.py MODEL)."""

import importlib.util
import pathlib

import numpy as np

import iron

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "llama.py"


def load_example():
    spec = importlib.util.spec_from_file_location("llama_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_python_llama_equals_the_cpp_model_bit_for_bit(stories):
    example = load_example()
    builtin = iron.models.load(stories)
    ids = builtin.tokenize("Once upon a time, there was a little girl named Lily")
    want = builtin._runner.score(ids)
    got = example.python_logits(stories, ids)
    assert got.shape == want.shape == (len(ids), 512)
    assert got.tobytes() == want.tobytes()
    assert np.abs(want).max() > 0


def test_python_llama_decodes_in_a_carried_loop_as_the_runner(stories):
    example = load_example()
    builtin = iron.models.load(stories)
    ids = builtin.tokenize("Once upon a time")
    ours = example.python_generate(stories, ids, 23)
    theirs = list(builtin.generate(ids, max_tokens=24, ids=True, stop_at_end=False))
    assert ours == theirs and len(ours) == 24
