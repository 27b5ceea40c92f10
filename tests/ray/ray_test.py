#!/usr/bin/env python3
"""IRON on Ray, on a local Ray cluster of two nodes (ray.cluster_utils.Cluster: two raylets on
this machine, one CPU each), with real HTTP clients (requests, PyPI's openai):

- `python -m iron.ray serve` at 2 replicas (one a node) on stories260K answers 16 concurrent
  requests (completions, streamed and whole, greedy; and two refusals) as `iron serve` answers
  the same requests: the same status, text, token ids, finish and usage, the same error objects;
- one replica killed (ray.kill) in the middle of a load: the 16 requests sent after the kill
  all succeed, and Ray Serve starts a replica in its place;
- `python -m iron.ray embed` over 512 texts in four batches of 128 (all-MiniLM-L6-v2) writes, in
  the input's order, vector for vector and bit for bit what `iron embed` prints for them; a bad input and a missing column are refused
  with errors naming them, and a row without a text is written with its error;
- `python -m iron.ray generate` over a Parquet file of prompts writes `iron generate`'s greedy
  texts, and a prompt longer than the context as a row with its error.

  ray_test.py IRON STORIES MINILM
"""
import argparse
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import openai
import pyarrow.parquet as pq
import requests

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serve"))
from serve_test import Server, check, kill_servers, report, sse  # noqa: E402

import ray  # noqa: E402
from ray import serve  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

TIMEOUT = 60
started = time.monotonic()


def stage(what):
    print(f"=== {what} ({time.monotonic() - started:.0f} s so far)", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PROMPTS = ["Once upon a time", "The little dog", "Lily and Ben went", "One day", "The sun was", "Tom had a",
           "She saw a big", "In the park"]


def requests_16():
    """16 greedy completions (half streamed, lengths 8 to 40), each asking for its token ids."""
    out = []
    for i in range(16):
        body = {"prompt": PROMPTS[i % 8], "max_tokens": 8 + 4 * (i % 9), "temperature": 0, "return_tokens": True}
        if i % 4 == 3:
            body["stream_options"] = {"include_usage": True}
        out.append((body, i % 2 == 1))
    return out


def answer(url, body, stream):
    """What a response says, without its id and time: status, and the text, ids, finish and usage
    (or the error object)."""
    if not stream:
        r = requests.post(url + "/v1/completions", json=body, timeout=TIMEOUT)
        if r.status_code != 200:
            return r.status_code, r.json()
        j = r.json()
        c = j["choices"][0]
        return 200, (c["text"], c["tokens"], c["finish_reason"], j["usage"])
    r = requests.post(url + "/v1/completions", json=dict(body, stream=True), stream=True, timeout=TIMEOUT)
    if r.status_code != 200:
        return r.status_code, r.json()
    text, ids, finish, usage, done = "", [], None, None, False
    for e in sse(r):
        if e is None:
            done = True
        elif e.get("usage"):
            usage = e["usage"]
        elif e["choices"]:
            c = e["choices"][0]
            text += c["text"]
            ids += c.get("tokens", [])
            finish = c["finish_reason"] or finish
    return (200 if done else 599), (text, ids, finish, usage)


def refusals(url):
    """Two requests each server refuses: a chat on a model without a template, malformed JSON."""
    chat = requests.post(url + "/v1/chat/completions", timeout=TIMEOUT,
                         json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})
    bad = requests.post(url + "/v1/completions", data=b"{not json", timeout=TIMEOUT,
                        headers={"Content-Type": "application/json"})
    return [(chat.status_code, chat.json()), (bad.status_code, bad.json())]


def concurrently(url, reqs):
    with ThreadPoolExecutor(len(reqs)) as pool:
        return list(pool.map(lambda r: answer(url, *r), reqs))


class RayServe:
    """`python -m iron.ray serve` as a user runs it, on the cluster at `address`."""

    def __init__(self, model, address, port, *args):
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "iron.ray", "serve", "-m", model, "--address", address, "--port", str(port),
             "--proxy-location", "HeadOnly", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.log = []
        self.ready = threading.Event()
        self.stopping = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self.ready.wait(150):
            self.stop()
            raise SystemExit("iron.ray serve did not start:\n" + "".join(self.log))

    def _read(self):
        for line in self.proc.stdout:
            self.log.append(line)
            if line.startswith("serving "):
                self.ready.set()
            if line.startswith("stopping"):
                self.stopping.set()

    def stop(self):
        """SIGTERM, then, once it says it is stopping, a SIGINT as an impatient Ctrl-C would: the
        second must not interrupt the shutdown (it did, with a KeyboardInterrupt traceback)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            if self.stopping.wait(30) and self.proc.poll() is None:
                self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def replicas():
    """The serve app's replica actors by name, and how many Serve says are running."""
    names = sorted(a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                   if a["name"].startswith("SERVE_REPLICA::"))
    status = serve.status().applications.get("iron")
    running = 0
    if status:
        running = sum(d.replica_states.get("RUNNING", 0) for d in status.deployments.values())
    return names, running


def serve_cases(iron, stories, address):
    stage("iron serve: 16 concurrent requests")
    reqs = requests_16()
    ref = Server(iron, stories, "--parallel", "8", "-c", "512")
    want = concurrently(ref.url, reqs)
    want_refusals = refusals(ref.url)
    ref.stop()
    check(all(status == 200 for status, _ in want), "iron serve answered all 16")

    stage("python -m iron.ray serve --replicas 2")
    app = RayServe(stories, address, free_port(), "--replicas", "2", "--parallel", "8", "-c", "512")
    try:
        names, running = replicas()
        check(len(names) == 2 and running == 2, f"2 replicas running ({names})")
        nodes = {ray.get(ray.get_actor(n, namespace="serve").__ray_call__.remote(
            lambda _: ray.get_runtime_context().get_node_id()), timeout=TIMEOUT) for n in names}
        check(len(nodes) == 2, "the replicas are on the two nodes, one each")
        got = concurrently(app.url, reqs)
        same = [i for i in range(16) if got[i] == want[i]]
        check(len(same) == 16, f"16 concurrent answers equal iron serve's ({len(same)} of 16)")
        for i in range(16):
            if got[i] != want[i]:
                print("  differs:", reqs[i], "\n    ray:  ", got[i], "\n    iron: ", want[i])
        check(refusals(app.url) == want_refusals, "the refusals' statuses and error objects equal iron serve's")
        health = requests.get(app.url + "/health", timeout=TIMEOUT)
        check(health.status_code == 200 and health.json() == {"status": "ok"}, "GET /health through Ray")
        client = openai.OpenAI(base_url=app.url + "/v1", api_key="none", timeout=TIMEOUT)
        pieces = [c.choices[0].text for c in client.completions.create(
            model="stories", prompt="Once upon a time", max_tokens=8, temperature=0, stream=True)]
        check("".join(pieces) == want[0][1][0], "PyPI openai streams the same text through Ray")

        stage("one replica killed mid-load")
        load = ThreadPoolExecutor(8)
        during = [load.submit(answer, app.url, dict(reqs[i][0], max_tokens=480, ignore_eos=True), True)
                  for i in range(8)]
        time.sleep(0.3)
        victim = names[0]
        ray.kill(ray.get_actor(victim, namespace="serve"), no_restart=True)
        killed_at = time.monotonic()
        after = concurrently(app.url, reqs)
        same = [i for i in range(16) if after[i] == want[i]]
        check(len(same) == 16, f"the 16 requests sent after the kill all succeed, equal to iron serve's "
                               f"({len(same)} of 16)")
        # Those the killed replica held end early (a stream cut, a 500): what Ray cannot save.
        lost = sum(1 for f in during if f.exception() is not None or f.result()[0] != 200)
        print(f"  (of the 8 long requests in flight at the kill, {lost} failed: those the killed replica held)")
        load.shutdown()
        while time.monotonic() - killed_at < 90:
            names_now, running = replicas()
            if running == 2 and victim not in names_now and len(names_now) == 2:
                break
            time.sleep(1)
        check(running == 2 and victim not in names_now,
              f"Ray Serve replaced the killed replica in {time.monotonic() - killed_at:.0f} s ({names_now})")
        check(concurrently(app.url, reqs[:4]) == want[:4], "the new replica set answers as before")
    finally:
        code = app.stop()
        check(code == 0 and not any("Traceback" in line for line in app.log),
              f"iron.ray serve stopped on SIGTERM, a SIGINT during its shutdown ignored (exit {code})")


def words(rng, n):
    vocab = ("the a cat dog sat on mat ran fast slow bright morning river city light stone quietly under over "
             "music table green old new people small large train station coffee rain window book "
             "écrit naïve 東京 🙂 don't state-of-the-art 3.14 COVID-19").split()
    return " ".join(rng.choice(vocab) for _ in range(n))


def embed_cases(iron, minilm, address, tmp):
    stage("python -m iron.ray embed: 512 texts, 4 batches on 2 actors")
    rng = random.Random(37)
    # Four batches, so the two actors each take more than one and the rows come back in the input's
    # order all the same (2,000 texts in the default batches of 1,024 took 42 s of this test's 164).
    rows = 512
    texts = [words(rng, rng.randint(1, 40)) for _ in range(rows)]
    src = os.path.join(tmp, "texts.jsonl")
    with open(src, "w") as f:
        for i, t in enumerate(texts):
            f.write(json.dumps({"id": f"row-{i}", "text": t, "other": i}) + "\n")
    with open(os.path.join(tmp, "texts.txt"), "w") as f:
        f.write("\n".join(texts) + "\n")
    out = os.path.join(tmp, "vectors")
    t0 = time.monotonic()
    job = subprocess.run([sys.executable, "-m", "iron.ray", "embed", "-m", minilm, "-i", src, "-o", out,
                          "--address", address, "--batch-size", "128"], capture_output=True, text=True, timeout=300)
    print(f"  (the job: {time.monotonic() - t0:.1f} s)\n  " + job.stderr.strip().splitlines()[-1])
    check(job.returncode == 0, "the embed job ran" + ("" if job.returncode == 0 else ":\n" + job.stderr[-3000:]))
    t0 = time.monotonic()
    tsv = subprocess.run([iron, "embed", "-m", minilm, "-f", os.path.join(tmp, "texts.txt"), "--format", "tsv",
                          "-t", "1"], capture_output=True, text=True, timeout=300, check=True).stdout
    print(f"  (iron embed: {time.monotonic() - t0:.1f} s)")
    want = np.array([[float(x) for x in line.split("\t")] for line in tsv.splitlines()], dtype=np.float32)
    table = pq.read_table(out)
    check(table.column_names == ["id", "embedding", "error"], f"output columns id, embedding, error "
                                                              f"({table.column_names})")
    ids = table.column("id").to_pylist()
    check(ids == [f"row-{i}" for i in range(rows)], f"{rows} rows with the input's ids, in its order")
    got = np.array(table.column("embedding").to_pylist(), dtype=np.float32)
    check(got.shape == want.shape and np.array_equal(got, want),
          f"every vector bit for bit iron embed's ({got.shape} vs {want.shape})")
    check(table.column("error").null_count == rows, "no row failed")

    stage("embed: bad input")
    def run(*args):
        return subprocess.run([sys.executable, "-m", "iron.ray", "embed", "-m", minilm, "--address", address, *args],
                              capture_output=True, text=True, timeout=300)
    missing = run("-i", os.path.join(tmp, "absent.jsonl"), "-o", os.path.join(tmp, "o1"))
    check(missing.returncode == 1 and "absent.jsonl: no such input file" in missing.stderr,
          "a missing input is refused, named: " + missing.stderr.strip()[-200:])
    column = run("-i", src, "-o", os.path.join(tmp, "o2"), "--column", "body")
    check(column.returncode == 1 and "no column 'body' (its columns: id, text, other)" in column.stderr,
          "a missing column is refused, naming the input's: " + column.stderr.strip()[-200:])
    decoder = run("-m", iron, "-i", src, "-o", os.path.join(tmp, "o3"))
    check(decoder.returncode == 1 and "not a sentence encoder" in decoder.stderr,
          "a model that is not an encoder is refused: " + decoder.stderr.strip()[-200:])
    odd = os.path.join(tmp, "odd.jsonl")
    with open(odd, "w") as f:
        f.write('{"id": 1, "text": "A man is eating food."}\n{"id": 2, "text": null}\n{"id": 3, "text": "Bread."}\n')
    job = run("-i", odd, "-o", os.path.join(tmp, "o4"))
    t = pq.read_table(os.path.join(tmp, "o4")).to_pylist() if job.returncode == 0 else []
    check(len(t) == 3 and t[1]["embedding"] is None and "null" in (t[1]["error"] or "")
          and t[0]["error"] is None and t[2]["error"] is None and len(t[0]["embedding"]) == want.shape[1]
          and len(t[2]["embedding"]) == want.shape[1],
          "a row without a text is written with its error; the others are embedded")


def generate_cases(iron, stories, address, tmp):
    stage("python -m iron.ray generate: Parquet in, a prompt too long among them")
    import pyarrow as pa
    prompts = PROMPTS[:6] + ["word " * 600]
    src = os.path.join(tmp, "prompts.parquet")
    pq.write_table(pa.table({"id": list(range(100, 107)), "prompt": prompts}), src)
    out = os.path.join(tmp, "answers")
    job = subprocess.run([sys.executable, "-m", "iron.ray", "generate", "-m", stories, "-i", src, "-o", out,
                          "--address", address, "-n", "16", "-c", "512", "--batch-size", "4"],
                         capture_output=True, text=True, timeout=300)
    check(job.returncode == 0, "the generate job ran" + ("" if job.returncode == 0 else ":\n" + job.stderr[-3000:]))
    rows = pq.read_table(out).to_pylist() if job.returncode == 0 else []
    check([r["id"] for r in rows] == list(range(100, 107)), "7 rows with the input's ids, in its order")
    for r, p in zip(rows[:6], prompts):
        printed = subprocess.run([iron, "generate", "-m", stories, "-p", p, "-n", "16"], capture_output=True,
                                 text=True, timeout=60, check=True).stdout
        check(r["error"] is None and printed == p + r["text"] + "\n" and 1 <= r["completion_tokens"] <= 16,
              f"'{p}': iron generate's greedy text ({r['text']!r})")
    check(len(rows) == 7 and rows[6]["text"] is None and "context" in (rows[6]["error"] or ""),
          "the prompt longer than the context is written with its error: " + str(rows[6]["error"] if rows else None))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("iron")
    p.add_argument("stories")
    p.add_argument("minilm")
    a = p.parse_args()
    stage("a Ray cluster of two nodes, one CPU each")
    # The proxy (on the head node) spreads requests over both nodes' replicas, as a load balancer
    # in front of every node's proxy would, rather than preferring its own node's.
    os.environ["RAY_SERVE_PROXY_PREFER_LOCAL_NODE_ROUTING"] = "0"
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, logging_level="WARNING")
    check(len([n for n in ray.nodes() if n["Alive"]]) == 2, "two nodes")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            serve_cases(a.iron, a.stories, cluster.address)
            embed_cases(a.iron, a.minilm, cluster.address, tmp)
            generate_cases(a.iron, a.stories, cluster.address, tmp)
    finally:
        kill_servers()
        ray.shutdown()
        cluster.shutdown()
    stage("done")
    report()


if __name__ == "__main__":
    main()
