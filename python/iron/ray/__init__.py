"""IRON on Ray: past one machine (an optional extra, ``pip install .[ray]``).

- ``iron.ray.serve``: a Ray Serve application answering ``iron serve``'s OpenAI API (chat,
  completions, embeddings, streaming) from N replicas, each a model of its own on the CPUs Ray
  grants it; ``python -m iron.ray serve -m MODEL --replicas N [--address ADDR]``.
- ``iron.ray.batch``: Ray Data jobs over JSONL or Parquet, a pool of model actors taking batches
  of rows and writing Parquet with the input's ids; ``python -m iron.ray embed|generate``.

Ray is needed only here: ``import iron`` and the ``iron`` command never load it.
"""

try:
    import ray  # noqa: F401
except ImportError as e:  # pragma: no cover - what a user without the extra sees
    raise ImportError("iron.ray needs Ray (PyPI ray[serve,data] and pyarrow): pip install '.[ray]' from IRON's "
                      "checkout, or pip install 'ray[serve,data]' pyarrow") from e
