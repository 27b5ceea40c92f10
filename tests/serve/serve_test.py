#!/usr/bin/env python3
"""`iron serve` driven by real clients on loopback: PyPI's `openai` and `requests`, `curl`, and raw
sockets for the faults. Each server is started by this script on an ephemeral port of 127.0.0.1
and always killed at the end; every wait is bounded.

  serve_test.py IRON MODEL [--chat-model GGUF] [--gemma-model GGUF] [--embed-model DIR]

MODEL (stories260K, no chat template) runs the completion, fault and load cases; --chat-model
(SmolLM2) the chat cases, a client that leaves mid-stream and a SIGTERM past the grace period,
which need a model slow enough to be caught mid-answer; --gemma-model (Gemma 3) its own chat
template; --embed-model (all-MiniLM-L6-v2) POST /v1/embeddings, whose vectors are compared with
`iron embed`'s for the same texts (and `dimensions`); --prompted-embed-model (EmbeddingGemma)
`prompt_name` beside `iron embed --prompt-name`. Greedy answers are compared with
`iron generate --ids` for the same prompt, and every answer of the load with the same request
sent alone.
"""
import argparse
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import openai
import requests

TIMEOUT = 60  # seconds any one HTTP call may take
failures = []
servers = []


def check(cond, what):
    if cond:
        print("ok:", what)
    else:
        print("FAILED:", what)
        failures.append(what)


class Server:
    def __init__(self, iron, model, *args):
        self.proc = subprocess.Popen([iron, "serve", "-m", model, "--port", "0", "-t", "2", *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        servers.append(self)
        self.log = []
        self.listening = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self.listening.wait(120):
            raise SystemExit("the server did not start: " + "".join(self.log))
        self.url = "http://127.0.0.1:%d" % self.port

    def _read(self):
        for line in self.proc.stderr:
            self.log.append(line)
            m = re.match(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                self.listening.set()

    def post(self, path, body, **kw):
        return requests.post(self.url + path, json=body, timeout=TIMEOUT, **kw)

    def metrics(self):
        text = requests.get(self.url + "/metrics", timeout=TIMEOUT).text
        return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(iron_[a-z_]+) (\S+)$", text, re.M)}, text

    def stop(self, sig=signal.SIGTERM, wait=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(wait)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


def generate_ids(iron, model, prompt, n, *args):
    out = subprocess.run([iron, "generate", "-m", model, "-p", prompt, "-n", str(n), "--ids", "-t", "2", *args],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    return [int(t) for t in out.split()]


def sse(response):
    """The events of a streamed response, [DONE] included as None."""
    events = []
    for line in response.iter_lines(decode_unicode=True):
        if line.startswith("data: "):
            data = line[6:]
            events.append(None if data == "[DONE]" else json.loads(data))
    return events


def completion_cases(iron, model):
    s = Server(iron, model, "-c", "512", "--read-timeout", "1", "--queue", "12", "--parallel", "4")
    client = openai.OpenAI(base_url=s.url + "/v1", api_key="none", timeout=TIMEOUT, max_retries=0)
    check(requests.get(s.url + "/health", timeout=TIMEOUT).json() == {"status": "ok"}, "GET /health")
    models = client.models.list()
    check([m.id for m in models.data] == [os.path.basename(model)], "GET /v1/models through openai")

    # Greedy: the ids of `iron generate` for the same prompt.
    prompt = "Once upon a time"
    want = generate_ids(iron, model, prompt, 24)
    whole = client.completions.create(model="any", prompt=prompt, max_tokens=24, temperature=0,
                                      extra_body={"return_tokens": True})
    check(whole.choices[0].model_extra.get("tokens") == want, "greedy completion equals iron generate's ids")
    check(whole.usage.completion_tokens == 24 and whole.usage.prompt_tokens > 0 and
          whole.usage.total_tokens == whole.usage.prompt_tokens + 24, "usage of a whole completion")
    check(whole.choices[0].finish_reason == "length", "finish_reason length at max_tokens")
    text = whole.choices[0].text
    stream = client.completions.create(model="any", prompt=prompt, max_tokens=24, temperature=0, stream=True,
                                       stream_options={"include_usage": True})
    pieces, usage, finish = [], None, None
    for chunk in stream:
        if chunk.choices:
            pieces.append(chunk.choices[0].text)
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage:
            usage = chunk.usage
    # stories260K decodes 24 tokens in a few milliseconds, which a batched step loop can finish
    # before the connection's thread first takes them: the text must match, the pieces may be
    # few. A long stream must come in pieces.
    check("".join(pieces) == text and len(pieces) >= 2,
          "streamed completion (openai) equals the whole one (%d pieces: %r, whole: %r)" % (len(pieces), pieces, text))
    long_pieces = [c.choices[0].text for c in client.completions.create(
        model="any", prompt=prompt, max_tokens=400, temperature=0, stream=True, extra_body={"ignore_eos": True})
        if c.choices]
    check(len(long_pieces) > 2, "a 400-token stream arrives in pieces (%d)" % len(long_pieces))
    check(usage is not None and usage.completion_tokens == 24, "stream_options.include_usage gives usage")
    check(finish == "length", "a stream ends with its finish_reason")

    # curl, whole and streamed.
    body = json.dumps({"prompt": prompt, "max_tokens": 24, "temperature": 0})
    out = subprocess.run(["curl", "-s", "--max-time", "60", s.url + "/v1/completions", "-H",
                          "Content-Type: application/json", "-d", body], capture_output=True, text=True).stdout
    check(json.loads(out)["choices"][0]["text"] == text, "curl: a whole completion")
    body = json.dumps({"prompt": prompt, "max_tokens": 24, "temperature": 0, "stream": True})
    out = subprocess.run(["curl", "-sN", "--max-time", "60", s.url + "/v1/completions", "-d", body],
                         capture_output=True, text=True).stdout
    events = [l[6:] for l in out.splitlines() if l.startswith("data: ")]
    check(events[-1] == "[DONE]" and "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1]) == text,
          "curl: a streamed completion")

    # Seeded sampling: per request, equal to `iron generate` with the same settings.
    want = generate_ids(iron, model, prompt, 32, "--temp", "0.8", "--top-k", "40", "--top-p", "0.95", "-s", "42")
    got = s.post("/v1/completions", {"prompt": prompt, "max_tokens": 32, "temperature": 0.8, "top_k": 40,
                                     "top_p": 0.95, "seed": 42, "return_tokens": True}).json()
    check(got["choices"][0]["tokens"] == want, "seeded sampling equals iron generate's with the same settings")
    other = s.post("/v1/completions", {"prompt": prompt, "max_tokens": 32, "temperature": 0.8, "seed": 43,
                                       "return_tokens": True}).json()
    check(other["choices"][0]["tokens"] != want, "another seed, other tokens")

    # A stop string that spans tokens never leaks, streamed or not.
    ids = whole.choices[0].model_extra["tokens"]
    third = len(text) // 3
    stop = text[third:third + 6]  # six characters: across token boundaries (stories260K's are 1-4)
    cut = text[:text.index(stop)]
    whole_stop = s.post("/v1/completions", {"prompt": prompt, "max_tokens": 24, "temperature": 0, "stop": [stop]}).json()
    check(whole_stop["choices"][0]["text"] == cut and whole_stop["choices"][0]["finish_reason"] == "stop",
          "a stop string ends a whole answer before it: %r" % stop)
    r = s.post("/v1/completions", {"prompt": prompt, "max_tokens": 24, "temperature": 0, "stop": stop, "stream": True},
               stream=True)
    events = sse(r)
    streamed = "".join(e["choices"][0]["text"] for e in events if e and e["choices"])
    check(streamed == cut and stop[:2] not in streamed[len(cut) - 1:], "a stop string spanning tokens never leaks into a stream")
    check(len(ids) == 24, "token ids listed")

    # Bad input: each refused with OpenAI's error object and the right status, none fatal.
    def refused(path, data, status, what, raw=False, **kw):
        r = (requests.post(s.url + path, data=data, timeout=TIMEOUT, **kw) if raw else s.post(path, data, **kw))
        ok = r.status_code == status
        try:
            ok = ok and "message" in r.json()["error"]
        except ValueError:
            ok = False
        check(ok, "%s: %d" % (what, status))
        return r
    refused("/v1/completions", "{not json", 400, "malformed JSON", raw=True)
    refused("/v1/completions", {"prompt": ["a", "b"]}, 400, "a batch of prompts")
    refused("/v1/completions", {"prompt": "a", "max_tokens": "8"}, 400, "a wrong type")
    refused("/v1/completions", {"prompt": "a", "max_tokens": 0}, 400, "max_tokens 0")
    refused("/v1/completions", {"prompt": "a", "max_tokens": -1}, 400, "max_tokens -1")
    refused("/v1/completions", {"prompt": "a", "temperature": -1}, 400, "a negative temperature")
    refused("/v1/completions", {"prompt": "once " * 600}, 400, "a prompt longer than the context")
    refused("/v1/completions", "x" * (1 << 20 | 1), 413, "a body over 1 MiB", raw=True)
    refused("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}, 400,
            "chat with a model that has no chat template")
    r = requests.get(s.url + "/v1/nothing", timeout=TIMEOUT)
    check(r.status_code == 404 and "error" in r.json(), "an unknown route: 404")
    r = s.post("/v1/completions", {"prompt": "a", "max_tokens": 2, "frobnicate": True})
    time.sleep(0.2)
    check(r.status_code == 200 and any("frobnicate" in l for l in s.log), "an unknown field is ignored, with a log line")

    # A client that trickles its request is dropped after the read timeout (1 s here); the
    # server goes on serving.
    slow = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    slow.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{\"pro")
    t0 = time.time()
    try:
        data = slow.recv(4096)
        while data and b"\r\n\r\n" not in data:
            data += slow.recv(4096)
    except socket.timeout:
        data = None
    check(data is not None and time.time() - t0 < 5, "a trickling client is dropped after the read timeout")
    slow.close()
    check(s.post("/v1/completions", {"prompt": "a", "max_tokens": 2}).status_code == 200, "served after it")

    # More requests at once than slots and queue hold: 503 with Retry-After for the rest, every
    # other one answered. A server of its own with one slot and one queue place, so that 12
    # requests overflow it however slowly this machine lets the clients send them (the first
    # server's queue of 12 is the load test's).
    small = Server(iron, model, "-c", "512", "--queue", "1")
    statuses, retry = [], []
    gate = threading.Barrier(12)
    def one():
        gate.wait()
        r = small.post("/v1/completions", {"prompt": "Once", "max_tokens": 1500, "ignore_eos": True, "temperature": 0})
        statuses.append(r.status_code)
        if r.status_code == 503:
            retry.append(r.headers.get("Retry-After"))
    threads = [threading.Thread(target=one) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    check(statuses.count(503) > 0 and statuses.count(200) > 0 and set(statuses) <= {200, 503} and all(retry),
          "a full queue answers 503 with Retry-After (%d of 12)" % statuses.count(503))
    small.stop()

    load_cases(s)
    m, text = s.metrics()
    check(m.get("iron_completion_tokens_total", 0) > 0 and m.get("iron_queue_depth") == 0 and
          m.get("iron_active_sequences") == 0 and "iron_tokens_per_second" in m and
          re.search(r'iron_requests_total\{path="/v1/completions",status="200"\} \d+', text),
          "GET /metrics: Prometheus text with requests, tokens, queue depth, active sequences, tokens/s: %s" % m)
    code = s.stop()
    check(code == 0, "SIGTERM: exit 0")


def load_cases(s):
    """8 clients x 3 mixed requests (streamed and not, lengths, greedy and seeded) on a server of
    4 slots, so rows join and leave a decoding batch: each answer equal to the same request sent
    alone (batch invariance at highest, the default precision)."""
    prompts = ["Once upon a time", "The little dog", "Lily and Ben went", "One day"]
    requests_ = []
    for c in range(8):
        for k in range(3):
            body = {"prompt": prompts[(c + k) % 4], "max_tokens": 8 + 13 * ((c * 3 + k) % 5), "return_tokens": True}
            if (c + k) % 2:
                body.update(temperature=0.9, top_k=20, seed=c * 10 + k)
            else:
                body.update(temperature=0)
            requests_.append((body, (c * 3 + k) % 3 == 0))
    def run(body, stream):
        if not stream:
            r = s.post("/v1/completions", body)
            return r.status_code, r.json()["choices"][0]["tokens"] if r.status_code == 200 else r.text
        r = s.post("/v1/completions", dict(body, stream=True), stream=True)
        if r.status_code != 200:
            return r.status_code, r.text
        ids = []
        for e in sse(r):
            if e and e["choices"]:
                ids += e["choices"][0].get("tokens", [])
        return 200, ids
    alone = [run(b, st) for b, st in requests_]
    rss = []
    for round_ in range(2):
        results = {}
        def client(c):
            for k in range(3):
                results[c * 3 + k] = run(*requests_[c * 3 + k])
        threads = [threading.Thread(target=client, args=(c,)) for c in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        failed = [i for i in range(24) if results.get(i, (0,))[0] != 200]
        check(not failed, "load round %d: 8 clients x 3 mixed requests, 0 failed" % round_)
        same = [i for i in range(24) if results.get(i) == alone[i]]
        check(len(same) == 24, "load round %d: every answer equals the same request alone (%d of 24)" % (round_, len(same)))
        with open("/proc/%d/status" % s.proc.pid) as f:
            rss.append(int(re.search(r"VmHWM:\s+(\d+) kB", f.read()).group(1)))
    check(rss[1] - rss[0] < 4096, "load: peak memory flat after the first round (%d -> %d KiB)" % tuple(rss))


def chat_cases(iron, model):
    s = Server(iron, model, "-c", "1024", "--grace", "1")
    client = openai.OpenAI(base_url=s.url + "/v1", api_key="none", timeout=TIMEOUT, max_retries=0)
    question = "What is the capital of France?"
    want = generate_ids(iron, model, question, 16, "--chat")
    r = s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": question}], "max_tokens": 16,
                                        "temperature": 0, "return_tokens": True}).json()
    check(r["choices"][0]["tokens"] == want, "greedy chat equals iron generate --chat's ids")
    whole = client.chat.completions.create(model="x", messages=[{"role": "user", "content": question}],
                                           max_tokens=16, temperature=0)
    check(whole.choices[0].message.role == "assistant" and whole.choices[0].message.content ==
          r["choices"][0]["message"]["content"] and whole.usage.completion_tokens == len(want),
          "chat through openai, whole")
    pieces = []
    for chunk in client.chat.completions.create(model="x", messages=[{"role": "user", "content": question}],
                                                max_tokens=16, temperature=0, stream=True):
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
    check("".join(pieces) == whole.choices[0].message.content, "chat through openai, streamed")

    # A client that leaves mid-stream frees its slot at once (the next write fails).
    r = s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "Tell a long story."}],
                                        "max_tokens": 900, "ignore_eos": True, "stream": True}, stream=True)
    lines = r.iter_lines()
    for _ in range(6):
        next(lines)
    before = s.metrics()[0]["iron_completion_tokens_total"]
    r.close()
    t0 = time.time()
    while time.time() - t0 < 20 and s.metrics()[0].get("iron_active_sequences") != 0:
        time.sleep(0.02)
    m = s.metrics()[0]
    # The next write fails and the sequence leaves after the step in hand (steps already started
    # run out, their tokens unsent): a few tokens at most, however slow a busy machine makes them.
    check(m.get("iron_active_sequences") == 0 and m["iron_completion_tokens_total"] - before <= 4,
          "a client gone mid-stream frees its slot: %d more token(s), %.2f s" %
          (m["iron_completion_tokens_total"] - before, time.time() - t0))

    # SIGTERM past the grace (1 s): the stream in flight is cut cleanly, the server exits 0.
    r = s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "Tell a long story."}],
                                        "max_tokens": 900, "ignore_eos": True, "stream": True}, stream=True)
    lines = r.iter_lines()
    next(lines)
    t0 = time.time()
    s.proc.send_signal(signal.SIGTERM)
    rest = [l for l in lines if l]
    code = s.stop(wait=15)
    check(rest and rest[-1] == b"data: [DONE]" and code == 0 and time.time() - t0 < 6,
          "SIGTERM: a stream past the grace ends with [DONE], exit 0 (%.1f s)" % (time.time() - t0))


def gemma_cases(iron, model):
    """The other family (Gemma 3: SentencePiece, BOS added) through the server: the ids of
    `iron generate`. (The fetched GGUF carries no chat template, so its chat is refused.)"""
    s = Server(iron, model, "-c", "512")
    prompt = "The capital of France is"
    want = generate_ids(iron, model, prompt, 12)
    r = s.post("/v1/completions", {"prompt": prompt, "max_tokens": 12, "temperature": 0, "return_tokens": True}).json()
    check(r["choices"][0]["tokens"] == want, "Gemma 3: a greedy completion equals iron generate's ids")
    check(s.stop() == 0, "Gemma 3: SIGTERM, exit 0")


def api_key_cases(iron, model):
    s = Server(iron, model, "--api-key", "sesame")
    check(requests.get(s.url + "/health", timeout=TIMEOUT).status_code == 200, "--api-key: /health needs none")
    r = requests.get(s.url + "/v1/models", timeout=TIMEOUT)
    check(r.status_code == 401 and "error" in r.json(), "--api-key: no key, 401")
    r = s.post("/v1/completions", {"prompt": "a"}, headers={"Authorization": "Bearer wrong"})
    check(r.status_code == 401, "--api-key: a wrong key, 401")
    good = openai.OpenAI(base_url=s.url + "/v1", api_key="sesame", timeout=TIMEOUT, max_retries=0)
    check(good.completions.create(model="x", prompt="Once", max_tokens=4).usage.completion_tokens == 4,
          "--api-key: the key, answered")
    bad = openai.OpenAI(base_url=s.url + "/v1", api_key="open", timeout=TIMEOUT, max_retries=0)
    try:
        bad.completions.create(model="x", prompt="Once", max_tokens=4)
        check(False, "--api-key: openai with a wrong key raises AuthenticationError")
    except openai.AuthenticationError:
        check(True, "--api-key: openai with a wrong key raises AuthenticationError")
    # SIGTERM while idle: stops at once, exit 0, and takes no request after it.
    t0 = time.time()
    code = s.stop()
    took = time.time() - t0
    check(code == 0 and took < 5, "SIGTERM while idle: exit %s in %.1f s (idle keep-alive connections close)" % (code, took))


def embedding_cases(iron, model, decoder_model):
    texts = ["A man is eating food.", "A man is eating a piece of bread.", "", "Un homme mange. \u4e2d\u6587"]
    out = subprocess.run([iron, "embed", "-m", model, "--format", "json", "-t", "2", *sum((["-p", t] for t in texts), [])],
                         capture_output=True, text=True, timeout=120)
    check(out.returncode == 0, "iron embed runs: " + out.stderr[-200:])
    # As f32, the values the vectors hold: text prints each with 9 digits, which read back the same
    # f32 but not the same double that base64's bytes widen to.
    f32 = lambda v: list(struct.unpack("%df" % len(v), struct.pack("%df" % len(v), *v)))
    want = [f32(d["embedding"]) for d in json.loads(out.stdout)["data"]]
    s = Server(iron, model)
    client = openai.OpenAI(base_url=s.url + "/v1", api_key="none", timeout=TIMEOUT, max_retries=0)
    # PyPI's openai asks for base64 by default and decodes it: the same f32 values either way.
    got = client.embeddings.create(model="minilm", input=texts)
    vectors = [f32(d.embedding) for d in got.data]
    check(vectors == want, "openai embeddings (base64) equal iron embed's vectors bit for bit")
    check([d.index for d in got.data] == [0, 1, 2, 3] and got.usage.prompt_tokens > 8,
          "embeddings: indices in order, usage counted (%d prompt tokens)" % got.usage.prompt_tokens)
    r = s.post("/v1/embeddings", {"input": texts[0], "encoding_format": "float"})
    check(r.status_code == 200 and f32(r.json()["data"][0]["embedding"]) == want[0], "one text, as floats, via requests")
    curl = subprocess.run(["curl", "-s", "-H", "Content-Type: application/json", "-d", json.dumps({"input": texts[:2]}),
                           s.url + "/v1/embeddings"], capture_output=True, text=True, timeout=TIMEOUT)
    check(f32(json.loads(curl.stdout)["data"][1]["embedding"]) == want[1], "curl gets the same vectors")
    for body, what in [({"input": []}, "an empty input"), ({"input": [1, 2]}, "token ids"), ({"model": "m"}, "no input"),
                       ({"input": "a", "encoding_format": "int8"}, "an unknown encoding"),
                       ({"input": "a", "dimensions": len(want[0]) + 1}, "more dimensions than the model's"),
                       ({"input": "a", "prompt_name": "query"}, "a prompt the model does not have")]:
        r = s.post("/v1/embeddings", body)
        check(r.status_code == 400 and "error" in r.json(), "embeddings refuse %s (400)" % what)
    # Matryoshka: OpenAI's dimensions gives iron embed --dimensions' vectors (cut, normalised again).
    out = subprocess.run([iron, "embed", "-m", model, "--format", "json", "-t", "2", "--dimensions", "64", "-p", texts[0]],
                         capture_output=True, text=True, timeout=120)
    cut = f32(json.loads(out.stdout)["data"][0]["embedding"])
    got = client.embeddings.create(model="minilm", input=texts[0], dimensions=64)
    check(len(cut) == 64 and f32(got.data[0].embedding) == cut and abs(sum(x * x for x in cut) - 1) < 1e-5,
          "dimensions=64 equals iron embed --dimensions 64, unit length")
    r = s.post("/v1/completions", {"prompt": "Once"})
    check(r.status_code == 400 and r.json()["error"]["code"] == "model_not_a_decoder", "an encoder refuses completions")
    metrics, _ = s.metrics()
    check(metrics.get("iron_embeddings_total") == 8, "metrics count the texts embedded (%s)" % metrics.get("iron_embeddings_total"))
    check(s.stop() == 0, "the encoder's server stops on SIGTERM")
    d = Server(iron, decoder_model)
    r = d.post("/v1/embeddings", {"input": "a"})
    check(r.status_code == 400 and r.json()["error"]["code"] == "model_not_an_encoder", "a decoder refuses embeddings")
    d.stop()


def prompt_cases(iron, model):
    """A model with prompts (EmbeddingGemma): prompt_name gives iron embed --prompt-name's vectors."""
    text = "What is the capital of France?"
    f32 = lambda v: list(struct.unpack("%df" % len(v), struct.pack("%df" % len(v), *v)))

    def cli(*flags):
        out = subprocess.run([iron, "embed", "-m", model, "--format", "json", "-t", "2", "-p", text, *flags],
                             capture_output=True, text=True, timeout=300)
        check(out.returncode == 0, "iron embed %s runs: %s" % (" ".join(flags), out.stderr[-200:]))
        return f32(json.loads(out.stdout)["data"][0]["embedding"])

    plain, query = cli(), cli("--prompt-name", "query", "--dimensions", "256")
    s = Server(iron, model)
    client = openai.OpenAI(base_url=s.url + "/v1", api_key="none", timeout=TIMEOUT, max_retries=0)
    got = client.embeddings.create(model="embeddinggemma", input=text, dimensions=256, extra_body={"prompt_name": "query"})
    check(f32(got.data[0].embedding) == query, "prompt_name query and dimensions 256 equal iron embed's")
    got = client.embeddings.create(model="embeddinggemma", input=text)
    check(f32(got.data[0].embedding) == plain and len(plain) == 768, "no prompt_name: no prompt, 768 values")
    r = s.post("/v1/embeddings", {"input": text, "prompt_name": "passage"})
    check(r.status_code == 400 and "query" in r.json()["error"]["message"], "an unknown prompt_name is refused, naming the model's")
    check(s.stop() == 0, "the EmbeddingGemma server stops on SIGTERM")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("iron")
    p.add_argument("model")
    p.add_argument("--chat-model")
    p.add_argument("--gemma-model")
    p.add_argument("--embed-model")
    p.add_argument("--prompted-embed-model")
    a = p.parse_args()
    try:
        completion_cases(a.iron, a.model)
        api_key_cases(a.iron, a.model)
        if a.chat_model:
            chat_cases(a.iron, a.chat_model)
        if a.gemma_model:
            gemma_cases(a.iron, a.gemma_model)
        if a.embed_model:
            embedding_cases(a.iron, a.embed_model, a.model)
        if a.prompted_embed_model:
            prompt_cases(a.iron, a.prompted_embed_model)
    finally:
        kill_servers()
    report()


def kill_servers():
    for s in servers:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()


def report():
    """Exits 1 naming the failed checks, if any."""
    if failures:
        print("%d FAILED: %s" % (len(failures), "; ".join(failures)))
        sys.exit(1)
    print("all passed")


if __name__ == "__main__":
    main()
