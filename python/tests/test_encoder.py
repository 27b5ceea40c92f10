"""iron.Encoder: the vectors `iron embed` prints for the same texts, bit for bit (batched by
length either way), Matryoshka dimensions and prompts as `iron embed` takes them, and bad input
refused naming what is wrong."""

import threading
import time

import numpy as np
import pytest

import iron
from test_models import run_cli

TEXTS = ["A man is eating food.", "", "A man is eating a piece of bread.", "naïve café, 東京 🙂",
         "word " * 300, "The quick brown fox jumps over the lazy dog.", "Hello", "state-of-the-art 3.14"]


def iron_embed(model, texts, *args):
    out = run_cli("embed", "-m", str(model), *[a for t in texts for a in ("-p", t)], "--format", "tsv", "-t", "1",
                  *args)
    return np.array([[float(x) for x in line.split("\t")] for line in out.splitlines()], dtype=np.float32)


def test_vectors_are_iron_embeds(minilm):
    encoder = iron.Encoder(minilm, threads=1)
    got = encoder.embed(TEXTS)
    assert got.dtype == np.float32 and got.shape == (len(TEXTS), 384)
    assert np.array_equal(got, iron_embed(minilm, TEXTS))
    # One text alone: a vector, the one it gets in the batch.
    assert np.array_equal(encoder.embed(TEXTS[2]), got[2])
    assert encoder.dim == 384 and encoder.normalizes and encoder.family == "bert"
    assert encoder.max_seq_length == 256 and len(encoder.ids(TEXTS[4])) == 256


def test_dimensions_as_iron_embed(minilm):
    encoder = iron.Encoder(minilm, threads=1)
    got = encoder.embed(TEXTS[:3], dimensions=64)
    assert got.shape == (3, 64)
    assert np.array_equal(got, iron_embed(minilm, TEXTS[:3], "--dimensions", "64"))
    assert np.allclose(np.linalg.norm(got, axis=1)[[0, 2]], 1, atol=1e-6)


def test_bad_input_is_refused(minilm, stories):
    encoder = iron.Encoder(minilm, threads=1)
    with pytest.raises(ValueError, match="dimensions 385 is more than the model's 384"):
        encoder.embed(["x"], dimensions=385)
    with pytest.raises(ValueError, match="query"):
        encoder.embed(["x"], prompt_name="query")  # MiniLM has no prompts
    with pytest.raises(TypeError):
        encoder.embed([1, 2])
    with pytest.raises((ValueError, OSError)):
        iron.Encoder(stories)  # a decoder
    with pytest.raises((ValueError, OSError), match="absent"):
        iron.Encoder(minilm.parent / "absent")
    assert not iron.encoder.is_sentence_encoder(stories) and iron.encoder.is_sentence_encoder(minilm)


def test_the_gil_is_free_while_it_embeds(minilm):
    encoder = iron.Encoder(minilm, threads=1)
    done = threading.Event()

    def run():
        encoder.embed(["a sentence of a few words, %d" % i for i in range(512)])
        done.set()
    t = threading.Thread(target=run)
    began = time.perf_counter()
    t.start()
    # This thread runs Python while embed() runs the model: it gets the GIL a thousand times a
    # second, where a held GIL would give it none until the end.
    turns = 0
    while not done.is_set():
        turns += 1
        time.sleep(0.001)
    t.join()
    seconds = time.perf_counter() - began
    assert seconds < 0.05 or turns > 10, (turns, seconds)
