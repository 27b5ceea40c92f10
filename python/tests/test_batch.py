"""iron.models.BatchDecoder: sequences prefilled and stepped together, rows joining late and in
a different order each step, decode to the tokens `iron generate` prints for each alone, greedy
and seeded; the logits are the rows' own (their argmax the greedy token, near the runner's
prefill of the same ids); slots, positions and settings out of range raise naming them."""

import numpy as np
import pytest

import iron
from iron.models import BatchDecoder, Prompt, Row, Sampling
from test_models import run_cli

PROMPTS = ["Once upon a time", "The cat", "Lily and Ben"]
SEEDED = Sampling(temperature=0.9, top_k=20, seed=7)


def iron_generate(stories, prompt, n, sampling=Sampling()):
    out = run_cli("generate", "-m", str(stories), "-p", prompt, "-n", str(n), "-c", "128", "--ids",
                  "--temp", str(sampling.temperature), "--top-k", str(sampling.top_k),
                  "--top-p", str(sampling.top_p), "-s", str(sampling.seed))
    return [int(t) for t in out.split()]


def test_rows_decoded_together_are_iron_generates(stories):
    n = 24
    sampling = [Sampling(), SEEDED, Sampling()]
    want = [iron_generate(stories, p, n, s) for p, s in zip(PROMPTS, sampling)]
    dec = BatchDecoder(stories, slots=3, context=128, batch=16)
    assert (dec.slots, dec.context, dec.vocab_size) == (3, 128, 512)
    ids = [dec.tokenize(p) for p in PROMPTS]
    # The first two prompts share calls, in slots 2 and 0; the third joins after 5 steps, in slot 1.
    got = {0: [], 1: []}
    got[0], got[1] = [[t] for t in dec.prefill([Prompt(2, ids[0], sampling=sampling[0]),
                                                  Prompt(0, ids[1], sampling=sampling[1])])]
    slot = {0: 2, 1: 0, 2: 1}
    for step in range(n - 1 + 5):
        if step == 5:
            got[2] = [dec.prefill(Prompt(1, ids[2], sampling=sampling[2]))]
        live = [k for k in got if len(got[k]) < n]
        if not live:
            break
        live = live[step % len(live):] + live[:step % len(live)]  # a row's place must not matter
        rows = [Row(slot[k], len(ids[k]) + len(got[k]) - 1, got[k][-1], len(got[k]), sampling[k]) for k in live]
        tokens = dec.step(rows)
        logits = dec.logits
        assert logits.shape == (len(rows), 512) and logits.dtype == np.float32
        for r, k in enumerate(live):
            got[k].append(tokens[r])
            if sampling[k] == Sampling():
                assert int(np.argmax(logits[r])) == tokens[r]
    for k in range(3):
        # `iron generate` stops at the end of sequence; the decoder goes on past it.
        assert got[k][:len(want[k])] == want[k], PROMPTS[k]
    assert dec.detokenize(want[0]) == "".join(iron.models.load(stories, context=128).generate(PROMPTS[0], n))


def test_a_steps_logits_are_near_the_runners_prefill_of_the_same_ids(stories):
    dec = BatchDecoder(stories, slots=2, context=64, batch=16)
    prompt = dec.tokenize("Once upon a time")
    first = dec.prefill(Prompt(1, prompt))
    dec.step([Row(1, len(prompt), first, 1)])
    # The runner's prefill of the prompt and the first token: its last row is the step's.
    scored = iron.models.load(stories, context=64)._runner.score(prompt + [first])
    np.testing.assert_allclose(dec.logits[0], scored[-1], rtol=1e-4, atol=1e-4)


def test_out_of_range_is_refused_naming_it(stories):
    dec = BatchDecoder(stories, slots=2, context=64, batch=16)
    first = dec.prefill(Prompt(0, [1, 2, 3]))
    with pytest.raises(IndexError, match="a cache slot of 2"):
        dec.step([Row(2, 3, first, 1)])
    with pytest.raises(IndexError, match="a position in a context of 64"):
        dec.step([Row(0, 64, first, 1)])
    with pytest.raises(ValueError, match="temperature"):
        dec.step([Row(0, 3, first, 1, Sampling(temperature=-1))])
    with pytest.raises(ValueError, match="top_p"):
        dec.prefill(Prompt(1, [1, 2], sampling=Sampling(top_p=0)))
    with pytest.raises(ValueError, match="no ids"):
        dec.prefill(Prompt(1, []))
    with pytest.raises(ValueError, match="at least one row"):
        dec.step([])
    with pytest.raises(ValueError, match="at least 1 cache slot"):
        BatchDecoder(stories, slots=0)
    # After the refusals the decoder still runs.
    assert len(dec.step([Row(0, 3, first, 1)])) == 1
