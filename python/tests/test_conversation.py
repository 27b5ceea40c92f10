"""iron.Conversation: a first turn is `iron generate --chat`'s tokens; a later one the runner's
greedy continuation of the whole conversation rendered by hand; a saved conversation continues
exactly (and is what `iron chat`'s /save writes); a turn left early keeps its answer as far as
it got; asyncio reads a turn as threads do; bad input is a Python exception naming it."""

import asyncio
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

import iron
from test_models import cli, run_cli

ROOT = pathlib.Path(__file__).resolve().parents[2]
SMOLLM2 = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture
def smollm2():
    if not SMOLLM2.is_file():
        pytest.skip(f"{SMOLLM2} is missing (scripts/fetch-model.sh)")
    return SMOLLM2


def cli_ids(*args):
    return [int(t) for t in run_cli("generate", *args, "--ids").split()]


def test_a_first_turn_is_iron_generate_chat(stories):
    # stories260K has no chat template: both render ChatML.
    with iron.Engine(stories, parallel=1, context=256) as engine:
        conv = iron.Conversation(engine)
        turn = conv.say("Once upon a time", max_tokens=24, temperature=0)
        text = "".join(turn)
        want = cli_ids("-m", str(stories), "-p", "Once upon a time", "--chat", "-n", "24", "-c", "256")
        assert turn.tokens == want
        assert turn.finish_reason in ("stop", "length")
        assert turn.stats["generated"] == len(want) and turn.stats["prefilled"] == turn.prompt_tokens
        answer = want[:-1] if turn.finish_reason == "stop" else want  # the end token is not the answer's
        assert conv.messages == [{"role": "user", "content": "Once upon a time"},
                                 {"role": "assistant", "content": text, "ids": answer}]


def test_later_turns_continue_the_conversation_as_the_runner_would(smollm2):
    model = iron.models.load(smollm2, context=512)
    # What a plain prompt starts with: BOS where the model adds one (an empty prompt is BOS
    # alone either way), else nothing.
    bos = model.tokenize("")
    added = len(bos) if model.tokenize("a")[:len(bos)] == bos else 0

    def plain(text):
        return model.tokenize(text)[added:]

    with iron.Engine(smollm2, parallel=1, context=512) as engine:
        conv = iron.Conversation(engine)
        first = conv.say("What is 2+2?", max_tokens=20, temperature=0)
        first.text()
        second = conv.say("And 3+3?", max_tokens=20, temperature=0)
        second.text()
        # Only the new turn was prefilled: the first answer's end of turn, the user's turn and
        # the assistant's start, plus the first answer's last token when it was cut (sampled,
        # never fed back).
        answer1 = conv.messages[1]["ids"]
        increment = plain("<|im_end|>\n<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n")
        cut = 0 if first.finish_reason == "stop" else 1
        assert second.stats["prefilled"] == len(increment) + cut
        # The whole conversation, rendered by hand, continued greedily by the runner alone.
        prompt = model.tokenize("What is 2+2?", chat=True) + answer1 + increment
        want = list(model.generate(prompt, max_tokens=20, ids=True))
        assert second.tokens == want
        assert [m["role"] for m in conv.messages] == ["user", "assistant", "user", "assistant"]


def test_a_saved_conversation_continues_exactly_and_iron_chat_reads_it(stories, tmp_path):
    with iron.Engine(stories, parallel=1, context=256) as engine:
        conv = iron.Conversation(engine, system="Be brief.")
        assert conv.system == "Be brief."
        conv.reply("Once upon a time", 16, temperature=0)
        saved = tmp_path / "chat.json"
        conv.save(saved)
        data = json.loads(saved.read_text())
        assert data == {"messages": conv.messages}
        assert data["messages"][0] == {"role": "system", "content": "Be brief."}
        assert data["messages"][2]["role"] == "assistant" and data["messages"][2]["ids"]
        next_answer = conv.reply("The cat", 16, temperature=0)

        loaded = iron.Conversation(engine)
        loaded.load(saved)
        assert loaded.messages == data["messages"] and loaded.cached_tokens == 0
        assert loaded.reply("The cat", 16, temperature=0) == next_answer
        again = iron.Conversation(engine)
        again.load_json(data)  # the dict, as well as the text
        assert again.messages == data["messages"]
        assert json.loads(again.to_json()) == data

        # clear() keeps the system message; setting it to None removes it.
        loaded.clear()
        assert loaded.messages == [{"role": "system", "content": "Be brief."}] and loaded.cached_tokens == 0
        loaded.system = None
        assert loaded.messages == [] and loaded.system is None
    # `iron chat` loads the file Python saved (its answers then come greedy: its default).
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    out = subprocess.run([cli(), "chat", "-m", str(stories), "-c", "256", "-n", "16"], input=f"/load {saved}\n",
                         capture_output=True, text=True, check=True, env=env).stdout
    assert f"loaded 3 messages from {saved}" in out


def test_a_turn_left_early_keeps_its_answer_as_far_as_it_got(stories):
    with iron.Engine(stories, parallel=1, context=256) as engine:
        conv = iron.Conversation(engine)
        # Bounded (not None), so that however late a cancel reaches the engine on a busy machine,
        # the three turns fit the context and none is dropped to make room.
        turn = conv.say("Once upon a time", max_tokens=64, temperature=0)
        pieces = []
        for piece in turn:
            pieces.append(piece)
            if len(pieces) == 3:
                # Another turn while this one is being read is refused, naming why.
                with pytest.raises(ValueError, match="a turn is in progress"):
                    conv.say("The cat")
                with pytest.raises(ValueError, match="a turn is in progress"):
                    conv.clear()
                break
        del turn  # let go of: cancelled, and ended at the conversation's next use
        m = conv.messages
        assert [x["role"] for x in m] == ["user", "assistant"]
        # As far as it got: what was read, and what the engine made before the cancel reached it.
        assert m[1]["content"].startswith("".join(pieces)) and len(m[1]["ids"]) >= 3
        # cancel() ends it as well; the conversation goes on.
        turn = conv.say("The cat", max_tokens=64, temperature=0)
        next(iter(turn))
        turn.cancel()
        conv.reply("One day", 8, temperature=0)
        assert [x["role"] for x in conv.messages] == ["user", "assistant"] * 3


def test_a_turn_read_from_asyncio_is_the_same_as_from_a_thread(stories):
    with iron.Engine(stories, parallel=1, context=256) as engine:
        want = iron.Conversation(engine).reply("Once upon a time", 24, temperature=0.8, seed=5)

        async def chat():
            conv = iron.Conversation(engine)
            turn = await conv.asay("Once upon a time", 24, temperature=0.8, seed=5)
            return "".join([piece async for piece in turn]), conv

        text, conv = asyncio.run(chat())
        assert text == want and conv.messages[-1]["content"] == want


def test_the_gil_is_free_while_a_turn_is_generated(stories):
    # No forced switches: a thread holding the GIL through the turn would keep this one out of
    # it until the turn ended, and it would never see the engine at work.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(100)
    try:
        with iron.Engine(stories, parallel=1, context=512) as engine:
            conv = iron.Conversation(engine)
            done = threading.Event()

            def run():
                conv.reply("Once upon a time", None, temperature=0)
                done.set()

            t = threading.Thread(target=run)
            t.start()
            seen_running = False
            while not done.is_set():
                seen_running = seen_running or engine.stats()["active"] > 0
                time.sleep(0.001)
            t.join()
            assert seen_running
    finally:
        sys.setswitchinterval(interval)


def test_bad_input_is_a_python_exception_naming_it(stories):
    with pytest.raises(TypeError, match="iron.Engine"):
        iron.Conversation("model.gguf")
    engine = iron.Engine(stories, parallel=1, context=64)
    conv = iron.Conversation(engine)
    with pytest.raises(ValueError, match="temperature"):
        conv.say("Hi", temperature=-1)
    with pytest.raises(ValueError, match="max_tokens"):
        conv.say("Hi", max_tokens=-2)
    with pytest.raises(ValueError, match="the context holds 64"):
        conv.say("Once upon a time " * 40)
    assert conv.messages == []  # nothing refused joined the conversation
    conv.reply("Hi", 4, temperature=0)
    before = conv.messages
    for bad, says in [("not json", "not JSON"), ("[]", '"messages" list'),
                      ({"messages": [{"role": "user"}]}, "message 0 has no"),
                      ({"messages": [{"role": "tool", "content": "x"}]}, 'role "tool"'),
                      ({"messages": [{"role": "user", "content": "x"}, {"role": "system", "content": "s"}]},
                       "a system message comes first"),
                      ({"messages": [{"role": "assistant", "content": "x", "ids": [1, 99999]}]},
                       "an id 99999 is not one of the model's 512")]:
        with pytest.raises(ValueError, match=says):
            conv.load_json(bad)
    with pytest.raises(TypeError, match="a str or a dict"):
        conv.load_json(42)
    with pytest.raises(OSError):
        conv.load("/nonexistent/chat.json")
    assert conv.messages == before  # a refused load leaves it as it was
    engine.close()
    with pytest.raises(ValueError, match="the engine is closed"):
        conv.say("Hi")


def test_the_chat_example_saves_loads_and_continues(stories, tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("chat", ROOT / "examples" / "chat.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    saved = tmp_path / "chat.json"
    conv = example.chat(stories, lines=["Once upon a time", f"/save {saved}", "/clear", f"/load {saved}", "The cat"],
                        temperature=0, max_tokens=24)
    out = capsys.readouterr().out
    # The first answer, printed as it came, saved, and loaded back: a conversation's own.
    first = conv.messages[1]["content"]
    assert out.startswith(first + "\n(loaded 2 messages)\n")
    with iron.Engine(stories, parallel=1, context=2048) as engine:
        assert iron.Conversation(engine).reply("Once upon a time", 24, temperature=0) == first
    assert [m["role"] for m in conv.messages] == ["user", "assistant"] * 2
