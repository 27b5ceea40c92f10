"""iron.Engine: greedy answers as `iron generate` gives them, 8 concurrent streams (threads,
asyncio, generate()) each equal to the same request alone, leaving a loop early freeing the slot,
stop strings cut, bad requests refused naming what is wrong, and the GIL free while it runs."""

import asyncio
import importlib.util
import pathlib
import threading
import time

import pytest

import iron
from test_models import run_cli

ROOT = pathlib.Path(__file__).resolve().parents[2]

PROMPTS = ["Once upon a time", "The cat", "Lily and Ben", "One day", "The sun was", "Tom had a",
           "In the park", "A little bird"]


def settings(k):
    # Half greedy, half sampled with a seed of their own: each is one answer, alone or not.
    return dict(temperature=0.0) if k % 2 == 0 else dict(temperature=0.9, top_k=20, seed=100 + k)


@pytest.mark.parametrize("parallel", [1, 8])
def test_greedy_answers_are_iron_generates(stories, parallel):
    with iron.Engine(stories, parallel=parallel, context=256) as engine:
        s = engine.stream("Once upon a time", max_tokens=40, temperature=0)
        text = "".join(s)
        ids = run_cli("generate", "-m", str(stories), "-p", "Once upon a time", "-n", "40", "--ids")
        assert s.tokens == [int(t) for t in ids.split()]
        printed = run_cli("generate", "-m", str(stories), "-p", "Once upon a time", "-n", "40")
        assert printed == "Once upon a time" + text + "\n"
        assert s.finish_reason in ("stop", "length") and s.stats["generated_tokens"] == len(s.tokens)


def test_tokens_read_on_another_thread_while_the_stream_is_read(stories):
    # One thread reads the stream (taking tokens with the GIL released) while another reads
    # `tokens` as fast as it can: every read is a prefix of the final ids, never a torn vector.
    # A race shows only now and then without the lock; ThreadSanitizer builds see it every time.
    with iron.Engine(stories, parallel=1, context=512) as engine:
        s = engine.stream("Once upon a time", max_tokens=400, temperature=0, ignore_eos=True)
        seen, done = [], threading.Event()

        def watch():
            while not done.is_set():
                seen.append(s.tokens)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            for _ in s:
                pass
        finally:
            done.set()
            watcher.join()
        final = s.tokens
        assert len(final) == 400
        assert all(final[: len(t)] == t for t in seen), "a read of tokens was not a prefix of the ids"


def test_eight_streams_from_threads_and_generate_equal_sequential_ones(stories):
    with iron.Engine(stories, parallel=8, context=256) as engine:
        alone = ["".join(engine.stream(p, max_tokens=48, ignore_eos=True, **settings(k)))
                 for k, p in enumerate(PROMPTS)]
        got = [None] * len(PROMPTS)

        def read(k):
            got[k] = "".join(engine.stream(PROMPTS[k], max_tokens=48, ignore_eos=True, **settings(k)))

        threads = [threading.Thread(target=read, args=(k,)) for k in range(len(PROMPTS))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert got == alone
        assert all(len(t) > 20 for t in alone)
        greedy = engine.generate(PROMPTS * 3, max_tokens=48, ignore_eos=True, temperature=0)
        assert greedy[0::2][:4] == alone[0::2] and greedy[8:16] == greedy[:8]


def test_eight_streams_from_asyncio_equal_sequential_ones(stories):
    with iron.Engine(stories, parallel=8, context=256) as engine:
        alone = ["".join(engine.stream(p, max_tokens=48, ignore_eos=True, **settings(k)))
                 for k, p in enumerate(PROMPTS)]

        async def one(k):
            pieces = []
            if k % 2:
                async for piece in engine.stream(PROMPTS[k], max_tokens=48, ignore_eos=True, **settings(k)):
                    pieces.append(piece)
            else:
                async for piece in engine.astream(PROMPTS[k], max_tokens=48, ignore_eos=True, **settings(k)):
                    pieces.append(piece)
            return "".join(pieces)

        async def main():
            return await asyncio.gather(*(one(k) for k in range(len(PROMPTS))))

        assert asyncio.run(main()) == alone


def wait_idle(engine):
    deadline = time.time() + 10
    while engine.stats()["active"] or engine.stats()["queued"]:
        assert time.time() < deadline, engine.stats()
        time.sleep(0.005)


def test_leaving_the_loop_frees_the_slot(stories):
    # One slot, no queue: a stream left early must give its slot back at once, or the next
    # would wait for 2047 tokens.
    with iron.Engine(stories, parallel=1, context=2048, queue=0) as engine:
        for k, _ in enumerate(engine.stream("Once", max_tokens=None, ignore_eos=True)):
            if k == 3:
                break
        wait_idle(engine)
        first = engine.stats()
        assert first["sequences"] == 1 and first["completion_tokens"] < 1000, first

        async def leave_early():
            async for k, _ in aenumerate(engine.astream("Once", max_tokens=None, ignore_eos=True)):
                if k == 3:
                    break

        asyncio.run(leave_early())
        wait_idle(engine)
        second = engine.stats()
        assert second["sequences"] == 2 and second["completion_tokens"] - first["completion_tokens"] < 1000, second
        s = engine.stream("Once", max_tokens=5, temperature=0)
        assert len(s.text()) > 0 and s.finish_reason == "length"


async def aenumerate(it):
    k = 0
    async for x in it:
        yield k, x
        k += 1


def test_stop_strings_are_cut(stories):
    with iron.Engine(stories, parallel=2, context=256) as engine:
        whole = engine.stream("Once upon a time", max_tokens=60, temperature=0, ignore_eos=True).text()
        stop = whole[20:27]
        s = engine.stream("Once upon a time", max_tokens=60, temperature=0, ignore_eos=True, stop=stop)
        assert s.text() == whole[:whole.index(stop)] and s.finish_reason == "stop"


def test_bad_requests_are_refused(stories):
    with iron.Engine(stories, parallel=2, context=64) as engine:
        with pytest.raises(ValueError, match="role 'bot' is not system, user or assistant"):
            engine.stream([{"role": "user", "content": "hi"}, {"role": "bot", "content": "x"}])
        with pytest.raises(ValueError, match="chat cannot be rendered"):  # stories260K has no template
            engine.stream([{"role": "user", "content": "hi"}])
        with pytest.raises(ValueError, match="max_tokens is at least 0"):
            engine.stream("Once", max_tokens=-1)
        with pytest.raises(ValueError, match="temperature"):
            engine.stream("Once", temperature=-1)
        with pytest.raises(ValueError, match="the context holds 64"):
            engine.stream([5] * 80)
        with pytest.raises(TypeError, match="a prompt is a str, a list of token ids or a list of"):
            engine.stream(3.5)
        with pytest.raises(TypeError, match="needs 'role' and 'content' strings"):
            engine.stream([{"role": "user"}])
        with pytest.raises(ValueError, match="the context holds 64"):
            engine.generate(["Once", [5] * 80])
        # An id outside the vocabulary fails in the model: raised from the stream's iteration.
        with pytest.raises(IndexError):
            engine.stream([1, 100000], max_tokens=3).text()
    with pytest.raises(ValueError, match="the engine is closed"):
        engine.stream("Once")


def test_close_cancels_what_is_in_flight(stories):
    engine = iron.Engine(stories, parallel=2, context=2048)
    s = engine.stream("Once", max_tokens=None, ignore_eos=True)
    next(s)
    waiting = threading.Thread(target=lambda: engine.generate(["Once"] * 4, max_tokens=None, ignore_eos=True))
    waiting.start()  # holds the engine while close() lets it go
    engine.close()
    s.text()
    assert s.finish_reason == "cancelled" and len(s.tokens) < 2047
    waiting.join(10)
    assert not waiting.is_alive()
    engine.close()  # twice is fine


def test_the_gil_is_free_while_it_runs(stories):
    with iron.Engine(stories, parallel=8, context=512) as engine:
        done = threading.Event()
        seen_running = False

        def run():
            engine.generate(PROMPTS, max_tokens=400, ignore_eos=True, temperature=0)
            done.set()

        t = threading.Thread(target=run)
        t.start()
        # This thread runs Python while generate() waits for the engine: it sees it at work.
        while not done.is_set():
            seen_running = seen_running or engine.stats()["active"] > 0
            time.sleep(0.001)
        t.join()
        assert seen_running


def test_the_example_serves_eight_streams(capsys):
    smollm2 = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not smollm2.is_file():
        pytest.skip(f"{smollm2} is missing (scripts/fetch-model.sh)")
    spec = importlib.util.spec_from_file_location("engine_streams", ROOT / "examples" / "engine_streams.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    asyncio.run(example.main(str(smollm2)))
    out = capsys.readouterr().out
    assert "Paris" in out and out.count("> ") == 8 and "tokens/s over 8 streams" in out
