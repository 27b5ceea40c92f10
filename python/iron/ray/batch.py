"""Batch jobs on Ray Data: a column of texts embedded, or of prompts (texts or chat messages)
answered, by a pool of model actors, each taking a batch of rows per call and holding its model
between them. Input: JSONL (one object a line: .jsonl, .json, .ndjson) or Parquet (.parquet, or
a directory of either); output: a directory of Parquet files, one row per input row with the
input's id, in the input's order. A row that fails (a prompt longer than the context, messages
the model's template cannot render, a null text) is written with its error and the job goes on.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq
import ray
import ray.data

from ..encoder import Encoder, is_sentence_encoder
from ..engine import Engine
from .serve import granted_threads

JSON_SUFFIXES = (".jsonl", ".json", ".ndjson")


@dataclass
class JobOptions:
    """What every batch job takes (``python -m iron.ray embed --help``)."""
    column: str | None = None     # the texts' (or messages') column; None: the job's default names
    id_column: str = "id"         # kept in the output
    actors: int = 0               # model actors in the pool; 0: the cluster's CPUs / cpus_per_actor
    cpus_per_actor: float = 1     # Ray's num_cpus for each; its threads follow it
    batch_size: int = 0           # rows a call takes; 0: the job's default
    precision: str = "highest"
    device: str = "cpu"


@dataclass
class EmbedOptions(JobOptions):
    prompt_name: str | None = None
    dimensions: int | None = None


@dataclass
class GenerateOptions(JobOptions):
    max_tokens: int | None = 128
    temperature: float = 0.0      # greedy, as `iron generate`
    top_k: int = 40
    top_p: float = 0.95
    seed: int = 0
    stop: list[str] = field(default_factory=list)
    parallel: int = 8             # sequences an actor decodes together
    context: int = 2048
    prefill: int = 64             # prompt tokens a prefill call takes


def _input_format(path: str) -> str:
    """"json" or "parquet", from the file's name (or the names in a directory)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such input file or directory")
    names = [path]
    if os.path.isdir(path):
        names = [n for n in sorted(os.listdir(path)) if not n.startswith((".", "_"))]
        if not names:
            raise ValueError(f"{path}: an empty directory")
    kinds = {"json" if n.endswith(JSON_SUFFIXES) else "parquet" if n.endswith(".parquet") else None for n in names}
    if None in kinds or len(kinds) != 1:
        raise ValueError(f"{path}: the input is JSONL (.jsonl, .json, .ndjson) or Parquet (.parquet) files, "
                         "one kind, or a directory of them")
    return kinds.pop()


def read_input(path: str, columns: tuple[str, ...], id_column: str) -> tuple[ray.data.Dataset, str]:
    """The input as a dataset of the id column and the first of ``columns`` it has, read whole
    into Ray's object store (spilled to disk when it does not fit), and that column's name. A
    missing file or column is an error naming what the input has. The input is read before the
    model actors start: they hold every CPU, and Ray Data's file listing and reading tasks would
    otherwise wait for one forever."""
    fmt = _input_format(path)
    read = ray.data.read_json if fmt == "json" else ray.data.read_parquet
    try:
        ds = read(path)
        names = ds.schema().names
    except Exception as e:
        raise ValueError(f"{path}: cannot be read as {'JSONL' if fmt == 'json' else 'Parquet'}: {e}") from e
    have = [c for c in columns if c in names]
    if not have:
        wanted = " or ".join(f"'{c}'" for c in columns)
        raise ValueError(f"{path}: no column {wanted} (its columns: {', '.join(names)}); name one with --column")
    if id_column not in names:
        raise ValueError(f"{path}: no id column '{id_column}' (its columns: {', '.join(names)}); "
                         "name one with --id-column")
    return ds.select_columns([id_column, have[0]]).materialize(), have[0]


def _check_output(path: str) -> None:
    if os.path.isfile(path) or (os.path.isdir(path) and os.listdir(path)):
        raise FileExistsError(f"{path}: the output exists already (the job writes a new directory of Parquet files)")


def _pool(o: JobOptions):
    actors = o.actors or max(1, int(ray.cluster_resources().get("CPU", 1) // o.cpus_per_actor))
    return ray.data.ActorPoolStrategy(size=actors), actors


def _not_a(value, kind, column: str, what: str) -> str | None:
    """A row's error when its value is not of `kind` (a null among them), else None."""
    if isinstance(value, kind):
        return None
    return f"the '{column}' value is {'null' if value is None else type(value).__name__}, not {what}"


class _Embedder:
    """An actor of the embed job's pool: one encoder, a batch of rows per call."""

    def __init__(self, model: str, o: EmbedOptions, column: str, id_column: str):
        self.encoder = Encoder(model, threads=granted_threads(o.cpus_per_actor), device=o.device,
                               precision=o.precision)
        self.o, self.column, self.id_column = o, column, id_column

    def _embed(self, texts):
        return self.encoder.embed(texts, self.o.prompt_name, self.o.dimensions)

    def __call__(self, batch: pa.Table) -> pa.Table:
        texts = batch.column(self.column).to_pylist()
        vectors: list = [None] * len(texts)
        errors: list = [None] * len(texts)
        good = []
        for i, t in enumerate(texts):
            errors[i] = _not_a(t, str, self.column, "a text")
            if errors[i] is None:
                good.append(i)
        try:
            for i, v in zip(good, self._embed([texts[i] for i in good]) if good else []):
                vectors[i] = v
        except Exception:
            # One text spoils the batch: each alone, so that only it fails.
            for i in good:
                try:
                    vectors[i] = self._embed([texts[i]])[0]
                except Exception as e:
                    errors[i] = str(e)
        embedding = pa.array([None if v is None else v.tolist() for v in vectors], pa.list_(pa.float32()))
        return pa.table({self.id_column: batch.column(self.id_column), "embedding": embedding,
                         "error": pa.array(errors, pa.string())})


class _Generator:
    """An actor of the generate job's pool: one engine, a batch of rows per call, their requests
    decoded together (continuous batching, `parallel` at a time)."""

    def __init__(self, model: str, o: GenerateOptions, column: str, id_column: str):
        self.engine = Engine(model, o.parallel, context=o.context, batch=o.prefill,
                             threads=granted_threads(o.cpus_per_actor), device=o.device, precision=o.precision)
        self.o, self.column, self.id_column = o, column, id_column

    def __call__(self, batch: pa.Table) -> pa.Table:
        o = self.o
        prompts = batch.column(self.column).to_pylist()
        n = len(prompts)
        out = {"text": [None] * n, "finish_reason": [None] * n, "prompt_tokens": [None] * n,
               "completion_tokens": [None] * n, "error": [None] * n}
        streams = [None] * n
        # Every request submitted first (the engine batches what its slots hold; a full queue
        # waits here), then each read to its end.
        for i, p in enumerate(prompts):
            out["error"][i] = _not_a(p, (str, list), self.column, "a text or a list of messages")
            if out["error"][i] is not None:
                continue
            try:
                streams[i] = self.engine.stream(p, o.max_tokens, temperature=o.temperature, top_k=o.top_k,
                                                top_p=o.top_p, seed=o.seed, stop=o.stop)
            except Exception as e:
                out["error"][i] = str(e)
        for i, s in enumerate(streams):
            if s is None:
                continue
            try:
                out["text"][i] = s.text()
                out["finish_reason"][i] = s.finish_reason
                out["prompt_tokens"][i] = s.prompt_tokens
                out["completion_tokens"][i] = len(s.tokens)
            except Exception as e:
                out["text"][i] = None
                out["error"][i] = str(e)
        table = {self.id_column: batch.column(self.id_column)}
        table.update({k: pa.array(v, pa.int64() if k.endswith("tokens") else pa.string()) for k, v in out.items()})
        return pa.table(table)


@dataclass
class JobReport:
    rows: int
    errors: int
    seconds: float
    output: str
    actors: int


def check_job(model: str | os.PathLike, input: str, output: str, *, encoder: bool) -> str:
    """The model's absolute path, once it is the job's kind (an encoder for embed, a decoder for
    generate), the input is there as JSONL or Parquet and the output is new; else an error naming
    what is wrong, before Ray is started or joined."""
    _input_format(input)
    _check_output(output)
    return _model(model, encoder)


def _run(actor, model: str, input: str, output: str, o: JobOptions, columns: tuple[str, ...],
         rows: int) -> JobReport:
    _check_output(output)
    ray.data.DataContext.get_current().execution_options.preserve_order = True
    started = time.perf_counter()
    ds, column = read_input(input, (o.column,) if o.column else columns, o.id_column)
    compute, actors = _pool(o)
    ds = ds.map_batches(actor, fn_constructor_args=(model, o, column, o.id_column), batch_size=o.batch_size or rows,
                        batch_format="pyarrow", compute=compute, num_cpus=o.cpus_per_actor)
    ds.write_parquet(output, ray_remote_args={"num_cpus": 0})
    errors = pq.read_table(output, columns=["error"]).column("error")
    return JobReport(len(errors), len(errors) - errors.null_count, time.perf_counter() - started, output, actors)


def _model(path: str, encoder: bool) -> str:
    path = os.path.abspath(os.fspath(path))
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such model file or directory")
    if encoder and not is_sentence_encoder(path):
        raise ValueError(f"{path}: not a sentence encoder (a BERT-family or EmbeddingGemma directory); "
                         "generate takes a decoder")
    if not encoder and is_sentence_encoder(path):
        raise ValueError(f"{path}: a sentence encoder; embed takes it, generate a decoder (a GGUF file or "
                         "a Llama, Gemma 3 or Qwen2 directory)")
    return path


def embed(model: str | os.PathLike, input: str, output: str, options: EmbedOptions | None = None) -> JobReport:
    """Embeds column ``text`` (or ``options.column``) of ``input`` into ``output``: Parquet rows
    of the id, ``embedding`` (list of float32; null when the row failed) and ``error`` (null when
    it did not). Ray must be initialised (``ray.init``)."""
    # Large batches: the encoder compiles a version for each (sentences, bucket) shape a call
    # meets, and sorts a call's texts by length, so the fewer the calls, the fewer odd shapes.
    return _run(_Embedder, _model(model, True), input, output, options or EmbedOptions(), ("text",), 1024)


def generate(model: str | os.PathLike, input: str, output: str, options: GenerateOptions | None = None) -> JobReport:
    """Answers column ``messages`` (chat: lists of {"role", "content"}), else ``prompt``, else
    ``text`` (or ``options.column``) of ``input`` into ``output``: Parquet rows of the id,
    ``text``, ``finish_reason``, ``prompt_tokens``, ``completion_tokens`` and ``error``."""
    return _run(_Generator, _model(model, False), input, output, options or GenerateOptions(),
                ("messages", "prompt", "text"), 64)
