"""iron.Api: `iron serve`'s OpenAI API without HTTP answers as `iron serve` does over HTTP (the
same statuses, error objects, completions, streamed events and embeddings, ids and times aside),
from threads and from asyncio, and refuses what `iron serve` refuses."""

import asyncio
import json
import os
import re
import subprocess
import threading
import urllib.error
import urllib.request

import numpy as np
import pytest

import iron
from test_models import cli


class IronServe:
    """`iron serve` on a free port of loopback, stopped at the end."""

    def __init__(self, model, *args):
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        self.proc = subprocess.Popen([cli(), "serve", "-m", str(model), "--port", "0", *args],
                                     stderr=subprocess.PIPE, text=True, env=env)
        for line in self.proc.stderr:
            m = re.match(r"listening on (http://\S+)", line)
            if m:
                self.url = m.group(1)
                break
        else:
            raise RuntimeError("iron serve did not start")
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()

    def request(self, method, path, body=b"", headers=()):
        req = urllib.request.Request(self.url + path, data=body or None, method=method, headers=dict(headers))
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, r.headers.get_content_type(), r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get_content_type(), e.read()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(30)


def same_shape(body: bytes):
    """A whole body, or a stream's events, without what differs between two servers (ids, times)."""
    def plain(j):
        if isinstance(j, dict):
            j = {k: v for k, v in j.items() if k not in ("id", "created")}
            if isinstance(j.get("data"), list):  # /v1/models
                j["data"] = [plain(d) for d in j["data"]]
        return j
    text = body.decode()
    if not text.startswith("data: "):
        return plain(json.loads(text))
    # A stream: where its text is cut into events depends on timing, so its events are joined
    # (text and token ids), the rest kept: each event's fields, the finish, the usage, [DONE].
    events = [e[6:] for e in text.strip().split("\n\n") if e.startswith("data: ")]
    joined = {"text": "", "tokens": [], "finish_reason": None, "usage": None, "shapes": set(), "done": 0}
    for e in events:
        if e == "[DONE]":
            joined["done"] += 1
            continue
        j = plain(json.loads(e))
        joined["shapes"].add((j["object"], j["model"], tuple(sorted(j))))
        joined["usage"] = j.get("usage") or joined["usage"]
        for c in j["choices"]:
            joined["text"] += c["text"]
            joined["tokens"] += c.get("tokens", [])
            joined["finish_reason"] = c["finish_reason"] or joined["finish_reason"]
    return joined


def exchange(api, method, path, body=b"", headers=()):
    r = api.handle(method, path, list(headers), body)
    content = b"".join(r.stream) if r.stream else r.body
    return r.status, r.content_type, content


def completion(prompt, n, **extra):
    return json.dumps(dict(prompt=prompt, max_tokens=n, temperature=0, return_tokens=True, **extra)).encode()


CASES = [
    ("GET", "/health", b""),
    ("GET", "/v1/models", b""),
    ("POST", "/v1/completions", completion("Once upon a time", 24)),
    ("POST", "/v1/completions", completion("The little dog", 16, stream=True, stream_options={"include_usage": True})),
    ("POST", "/v1/completions", completion("One day", 8, stop=["."], seed=3)),
    ("POST", "/v1/completions", b"{not json"),
    ("POST", "/v1/completions", json.dumps({"prompt": "x", "max_tokens": -1}).encode()),
    ("POST", "/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "Hi"}]}).encode()),
    ("POST", "/v1/embeddings", json.dumps({"input": "x"}).encode()),
    ("GET", "/v1/nothing", b""),
    ("GET", "/v1/completions", b""),
]


def test_answers_are_iron_serves(stories):
    with IronServe(stories, "--parallel", "4", "-c", "512") as server, \
            iron.Api(stories, parallel=4, context=512) as api:
        assert api.kind == "decoder"
        for method, path, body in CASES:
            want = server.request(method, path, body, [("Content-Type", "application/json")])
            got = exchange(api, method, path, body, [("Content-Type", "application/json")])
            assert got[0] == want[0], (method, path, got, want)
            assert got[1] == want[1], (method, path)
            assert same_shape(got[2]) == same_shape(want[2]), (method, path)
        metrics = exchange(api, "GET", "/metrics")
        assert metrics[0] == 200 and 'iron_requests_total{path="/v1/completions",status="200"} 3' in metrics[2].decode()


def test_api_key_and_drain(stories):
    with iron.Api(stories, parallel=2, context=256, api_key="sesame") as api:
        assert exchange(api, "GET", "/v1/models")[0] == 401
        assert exchange(api, "GET", "/v1/models", headers=[("authorization", "Bearer sesame")])[0] == 200
        assert exchange(api, "GET", "/health")[0] == 200
        api.drain()
        assert api.draining
        r = api.handle("POST", "/v1/completions", [("Authorization", "Bearer sesame")], completion("x", 2))
        assert r.status == 503 and ("Retry-After", "1") in r.headers
        assert exchange(api, "GET", "/health")[0] == 503


def test_streams_under_asyncio_equal_whole_answers(stories):
    prompts = ["Once upon a time", "The little dog", "Lily and Ben went", "One day", "The sun was", "Tom had a"]
    with iron.Api(stories, parallel=4, context=512) as api:
        whole = [json.loads(api.handle("POST", "/v1/completions", body=completion(p, 30)).body)["choices"][0]["text"]
                 for p in prompts]

        async def one(p):
            r = await api.ahandle("POST", "/v1/completions", body=completion(p, 30, stream=True))
            assert r.status == 200 and r.content_type == "text/event-stream" and ("Cache-Control", "no-cache") in r.headers
            text = ""
            async for chunk in r.stream:
                for e in chunk.decode().strip().split("\n\n"):
                    if e.startswith("data: {"):
                        text += json.loads(e[6:])["choices"][0]["text"] if json.loads(e[6:])["choices"] else ""
            return text

        async def all_():
            return await asyncio.gather(*(one(p) for p in prompts))
        assert asyncio.run(all_()) == whole
        assert api.open_answers == 0 and api.in_flight == 0


def test_leaving_a_stream_frees_its_slot(stories):
    with iron.Api(stories, parallel=1, context=512) as api:
        r = api.handle("POST", "/v1/completions", body=completion("Once", 400, ignore_eos=True, stream=True))
        with r.stream as s:
            next(iter(s))
        # The slot is free again: a whole answer comes back.
        again = api.handle("POST", "/v1/completions", body=completion("Once", 4))
        assert again.status == 200 and api.open_answers == 1  # the stream, still held
        del r, s
        assert api.open_answers == 0


def test_embeddings_are_iron_serves(minilm):
    body = json.dumps({"input": ["A man is eating food.", "", "naïve café 🙂"], "dimensions": 128}).encode()
    with IronServe(minilm) as server, iron.Api(minilm) as api:
        assert api.kind == "encoder"
        want = server.request("POST", "/v1/embeddings", body)
        got = exchange(api, "POST", "/v1/embeddings", body)
        assert got == want
        vectors = np.array([d["embedding"] for d in json.loads(got[2])["data"]], np.float32)
        assert vectors.shape == (3, 128)
        assert exchange(api, "POST", "/v1/completions", completion("x", 2))[0] == 400


def test_bad_models_are_refused(stories, tmp_path):
    with pytest.raises((OSError, ValueError)):
        iron.Api(tmp_path / "absent.gguf")
    with pytest.raises(ValueError, match="parallel"):
        iron.Api(stories, parallel=0)
