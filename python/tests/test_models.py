"""iron.models from Python: the three-line run, its tokens streamed, against `iron generate`
(the C++ command line on the same runner) token for token."""

import os
import pathlib
import subprocess

import pytest

import iron

ROOT = pathlib.Path(__file__).resolve().parents[2]


def cli():
    path = os.environ.get("IRON_CLI") or str(ROOT / "build" / "iron")
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} (the iron command) is not built")
    return path


def test_three_lines(stories):
    model = iron.models.load(stories)
    text = "".join(model.generate("Once upon a time", max_tokens=24))
    assert text.startswith(" there was") or text.startswith(",")
    assert model.stats["generated_tokens"] == 24 and model.stats["stop"] == "token limit"


def run_cli(*args):
    # Not under a sanitizer runtime preloaded for this process (the TSan run of these tests).
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    return subprocess.run([cli(), *args], capture_output=True, text=True, check=True, env=env).stdout


def test_same_tokens_and_text_as_iron_generate(stories):
    model = iron.models.load(stories)
    ids = list(model.generate("Once upon a time", max_tokens=40, ids=True))
    out = run_cli("generate", "-m", str(stories), "-p", "Once upon a time", "-n", "40", "--ids")
    assert ids == [int(t) for t in out.split()]
    text = "".join(model.generate("Once upon a time", max_tokens=40))
    printed = run_cli("generate", "-m", str(stories), "-p", "Once upon a time", "-n", "40")
    assert text == printed[len("Once upon a time"):].rstrip("\n") or printed.startswith("Once upon a time" + text)
    assert model.detokenize(ids) == text


def test_an_answer_ends_without_its_end_token_as_text():
    smollm2 = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not smollm2.is_file():
        pytest.skip(f"{smollm2} is missing (scripts/fetch-model.sh)")
    model = iron.models.load(smollm2, context=256)
    text = "".join(model.generate("What is the capital of France?", max_tokens=64, chat=True))
    assert model.stats["stop"] == "end of sequence"
    assert "<|im_end|>" not in text and "Paris" in text
    printed = run_cli("generate", "-m", str(smollm2), "-p", "What is the capital of France?", "--chat", "-n", "64")
    assert printed.rstrip("\n") == text


def test_qwen2_chat_answers_as_iron_generate_does():
    qwen = ROOT / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    if not qwen.is_file():
        pytest.skip(f"{qwen} is missing (scripts/fetch-model.sh qwen0.5b)")
    model = iron.models.load(qwen, context=256)
    # Qwen's template adds its default system message; the ids are the chat prompt's.
    prompt = list(model.tokenize("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                                 "assistant.<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                                 "<|im_start|>assistant\n"))
    assert model.tokenize("What is the capital of France?", chat=True) == prompt and len(prompt) == 36
    text = "".join(model.generate("What is the capital of France?", max_tokens=32, chat=True))
    assert model.stats["stop"] == "end of sequence" and model.stats["prompt_tokens"] == 36
    assert "<|im_end|>" not in text and "Paris" in text
    printed = run_cli("generate", "-m", str(qwen), "-p", "What is the capital of France?", "--chat", "-n", "32")
    assert printed.rstrip("\n") == text


def test_leaving_early_stops_the_decode(stories):
    model = iron.models.load(stories, context=256)
    for k, _ in enumerate(model.generate("Once", max_tokens=-1)):
        if k == 3:
            break
    assert model.stats["stop"] == "interrupted"
    # The model is usable again at once.
    assert len(list(model.generate("Once", max_tokens=5, ids=True))) == 5


def test_errors(stories, tmp_path):
    model = iron.models.load(stories, context=8)
    with pytest.raises(ValueError, match="the prompt has 9 tokens; the context holds 8"):
        list(model.generate([1] * 9, max_tokens=1))
    with pytest.raises(OSError):
        iron.models.load(tmp_path / "absent.gguf")
