"""``python -m iron.ray serve|embed|generate``: IRON on a Ray cluster (``--address``), or on a
Ray started for the command on this machine.

  python -m iron.ray serve -m MODEL --replicas N [--address ADDR] [--port 8000]
  python -m iron.ray embed -m ENCODER -i INPUT -o OUTPUT [--address ADDR]
  python -m iron.ray generate -m MODEL -i INPUT -o OUTPUT [--address ADDR]
"""

from __future__ import annotations

import argparse
import sys

from . import batch, serve


def _positive(kind, zero_too=False):
    def parse(text):
        value = kind(text)
        if value < 0 or (value == 0 and not zero_too):
            raise argparse.ArgumentTypeError(f"'{text}' is not {'0 or ' if zero_too else ''}more than 0")
        return value
    return parse


def _common(p: argparse.ArgumentParser, model_help: str) -> None:
    p.add_argument("-m", "--model", required=True, help=model_help)
    p.add_argument("--address", default=None,
                   help="The Ray cluster to run on (ray start's address, host:port, or 'auto'); default: a Ray "
                        "started for this command on this machine")
    p.add_argument("--precision", choices=("highest", "high", "medium"), default="highest",
                   help="How matmuls may round (as the iron command's --precision; default: %(default)s)")
    p.add_argument("--device", choices=("cpu", "vulkan"), default="cpu", help="Where the model runs (default: cpu)")


def _job(p: argparse.ArgumentParser, column_help: str) -> None:
    p.add_argument("-i", "--input", required=True,
                   help="JSONL (.jsonl, .json, .ndjson: one object a line) or Parquet (.parquet), a file or a "
                        "directory of them")
    p.add_argument("-o", "--output", required=True, help="A new directory for the output's Parquet files")
    p.add_argument("--column", default=None, help=column_help)
    p.add_argument("--id-column", default="id", help="The input's id column, kept in the output (default: id)")
    p.add_argument("--actors", type=_positive(int, True), default=0,
                   help="Model actors in the pool (default: the cluster's CPUs / --cpus-per-actor)")
    p.add_argument("--cpus-per-actor", type=_positive(float), default=1.0,
                   help="CPUs Ray grants each actor; its model's threads follow (default: 1)")
    p.add_argument("--batch-size", type=_positive(int, True), default=0,
                   help="Rows an actor takes a call (default: 1024 for embed, 64 for generate)")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m iron.ray", description=__doc__.split("\n\n")[0])
    sub = top.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="Serve the OpenAI API (iron serve's) from N replicas on Ray Serve",
                       description="Deploys a Ray Serve application answering iron serve's OpenAI API (chat, "
                                   "completions, embeddings; streaming) from --replicas replicas, each a model of its "
                                   "own on --cpus-per-replica CPUs, and waits; Ctrl-C or SIGTERM takes it down.")
    _common(s, "The model (a GGUF file, or a decoder's or sentence encoder's directory), at the same path on "
               "every node")
    s.add_argument("--replicas", type=_positive(int), default=1, help="Replicas (default: 1)")
    s.add_argument("--max-replicas", type=int, default=0,
                   help="Autoscale from --replicas up to this many on queue depth (Ray Serve adds a replica "
                        "while each holds more than --parallel requests); default: a fixed --replicas")
    s.add_argument("--cpus-per-replica", type=_positive(float), default=1.0,
                   help="CPUs Ray grants each replica; its model's threads follow (default: 1)")
    s.add_argument("--parallel", type=_positive(int), default=8,
                   help="Sequences a replica decodes together (iron serve's --parallel; default: 8)")
    s.add_argument("--queue", type=int, default=-1,
                   help="Requests a replica holds beyond --parallel (-1: 4 x --parallel); Ray's router queues "
                        "the rest")
    s.add_argument("-c", "--ctx-size", type=_positive(int), default=4096, help="KV-cache rows per sequence (4096)")
    s.add_argument("-b", "--batch-size", type=_positive(int), default=64, help="Prompt tokens a prefill call takes")
    s.add_argument("--api-key", default=None, help="Require 'Authorization: Bearer KEY' on every route but /health")
    s.add_argument("--host", default="127.0.0.1", help="The address Ray Serve's proxy listens on (127.0.0.1)")
    s.add_argument("--port", type=int, default=8000, help="Its port (default: 8000)")
    s.add_argument("--proxy-location", choices=("EveryNode", "HeadOnly"), default="EveryNode",
                   help="Where Ray Serve runs an HTTP proxy (default: EveryNode, each on --port; HeadOnly "
                        "where several Ray nodes share one machine)")
    s.add_argument("--access-log", action="store_true", help="Ray Serve's log line for every request")

    e = sub.add_parser("embed", help="Embed a column of texts with a sentence encoder (a Ray Data job)",
                       description="A Ray Data job: a pool of sentence-encoder actors embeds the input's texts; "
                                   "Parquet rows of the id, 'embedding' and 'error' are written to --output.")
    _common(e, "The sentence encoder's directory (all-MiniLM-L6-v2, EmbeddingGemma), on every node")
    _job(e, "The texts' column (default: text)")
    e.add_argument("--prompt-name", default=None,
                   help="The model's prompt put before each text (EmbeddingGemma's query, document, ...; none)")
    e.add_argument("--dimensions", type=_positive(int), default=None, help="Keep the first N values (Matryoshka)")

    g = sub.add_parser("generate", help="Answer a column of prompts or chat messages (a Ray Data job)",
                       description="A Ray Data job: a pool of engine actors answers the input's prompts (texts) or "
                                   "chat messages (lists of {role, content}); Parquet rows of the id, 'text', "
                                   "'finish_reason', 'prompt_tokens', 'completion_tokens' and 'error' go to --output.")
    _common(g, "The decoder (a GGUF file, or a Llama, Gemma 3 or Qwen2 directory), on every node")
    _job(g, "The prompts' column (default: messages, else prompt, else text)")
    g.add_argument("-n", "--max-tokens", type=int, default=128, help="Tokens to generate at most (-1: no limit)")
    g.add_argument("--temp", type=float, default=0.0, help="Sampling temperature; 0 (the default) is greedy")
    g.add_argument("--top-k", type=int, default=40, help="Sample from the k most likely tokens (0: all; 40)")
    g.add_argument("--top-p", type=float, default=0.95, help="Nucleus sampling's p (0.95)")
    g.add_argument("-s", "--seed", type=int, default=0, help="Random seed for sampling (0)")
    g.add_argument("--stop", action="append", default=[], help="A stop string (repeatable)")
    g.add_argument("--parallel", type=_positive(int), default=8, help="Sequences an actor decodes together (8)")
    g.add_argument("-c", "--ctx-size", type=_positive(int), default=2048, help="KV-cache rows per sequence (2048)")
    return top


def _job_options(a, cls, **extra):
    return cls(column=a.column, id_column=a.id_column, actors=a.actors, cpus_per_actor=a.cpus_per_actor,
               batch_size=a.batch_size, precision=a.precision, device=a.device, **extra)


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    try:
        if a.command == "serve":
            o = serve.ServeOptions(replicas=a.replicas, max_replicas=a.max_replicas,
                                   cpus_per_replica=a.cpus_per_replica, parallel=a.parallel,
                                   queue=None if a.queue < 0 else a.queue, context=a.ctx_size, batch=a.batch_size,
                                   precision=a.precision, device=a.device, api_key=a.api_key)
            serve.run(a.model, o, address=a.address, host=a.host, port=a.port, proxy_location=a.proxy_location,
                      access_log=a.access_log)
            return 0
        if a.command == "embed":
            o = _job_options(a, batch.EmbedOptions, prompt_name=a.prompt_name, dimensions=a.dimensions)
            run = batch.embed
        else:
            o = _job_options(a, batch.GenerateOptions, max_tokens=None if a.max_tokens < 0 else a.max_tokens,
                             temperature=a.temp, top_k=a.top_k, top_p=a.top_p, seed=a.seed, stop=a.stop,
                             parallel=a.parallel, context=a.ctx_size)
            run = batch.generate
        import ray
        # What can be checked before Ray starts is (the model's kind, the input's, the output).
        batch.check_job(a.model, a.input, a.output, encoder=a.command == "embed")
        ray.init(address=a.address, logging_level="WARNING")
        report = run(a.model, a.input, a.output, o)
        print(f"{a.command}: {report.rows} rows ({report.errors} failed, written with their error) in "
              f"{report.seconds:.1f} s on {report.actors} actor(s) -> {report.output}", file=sys.stderr)
        return 0
    except (OSError, ValueError) as e:
        print(f"python -m iron.ray {a.command}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
