"""``iron serve`` on Ray Serve: the same OpenAI API (iron.Api: ``iron serve``'s own C++ routes,
checks and response shapes) behind Ray Serve's HTTP proxy, from N replicas. Each replica is a
Ray actor that opens the model on the CPUs Ray grants it (its threads follow ``num_cpus``) and
answers with a KV cache of its own; replicas share nothing, so Ray may route any request to any
of them, restart one that dies, and (with ``max_replicas``) add replicas while requests queue.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import asdict, dataclass

import ray
from ray import serve
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..api import Api


@dataclass
class ServeOptions:
    """What each replica opens and how Ray runs them (``python -m iron.ray serve --help``)."""
    replicas: int = 1             # replicas at start (and at least, when autoscaling)
    max_replicas: int = 0         # more than `replicas`: autoscale up to this many; 0: fixed
    cpus_per_replica: float = 1   # Ray's num_cpus for each; its threads follow it
    parallel: int = 8             # sequences decoding together in a replica
    queue: int | None = None      # requests waiting in a replica beyond them (None: 4 x parallel)
    context: int = 4096
    batch: int = 64
    precision: str = "highest"
    device: str = "cpu"
    api_key: str | None = None
    health_check_period_s: float = 5


def granted_threads(default: float) -> int:
    """The threads a replica or actor runs its model on: the CPUs Ray granted it (num_cpus)."""
    try:
        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", default)
    except Exception:  # outside an actor (a local test mode): what was asked
        cpus = default
    return max(1, int(round(cpus)))


@serve.deployment(name="iron")
class OpenAIReplica:
    """One replica: a model behind iron.Api, Ray Serve's HTTP requests handed to it as they are
    (method, path, headers, body) and its answers written back, streams as they are generated."""

    def __init__(self, model: str, options: dict, model_name: str):
        o = ServeOptions(**options)
        self.api = Api(model, o.parallel, context=o.context, batch=o.batch, queue=o.queue,
                       threads=granted_threads(o.cpus_per_replica), device=o.device, precision=o.precision,
                       api_key=o.api_key, model_name=model_name)

    async def __call__(self, request: Request) -> Response:
        body = await request.body()
        # The API's own path: an application deployed under a route prefix (/models/a) answers
        # /models/a/v1/... as /v1/...
        path, prefix = request.url.path, request.scope.get("root_path", "").rstrip("/")
        if prefix and path.startswith(prefix):
            path = path[len(prefix):] or "/"
        r = await self.api.ahandle(request.method, path, request.headers.items(), body)
        headers = dict(r.headers)
        if r.stream is None:
            return Response(r.body, status_code=r.status, media_type=r.content_type, headers=headers)
        return StreamingResponse(_events(r.stream), status_code=r.status, media_type=r.content_type,
                                 headers=headers)

    def check_health(self) -> None:
        """Ray's health check: a replica that drains (or whose model failed to stay) is
        replaced."""
        if self.api.draining:
            raise RuntimeError("the replica is draining")

    def __del__(self):
        api = getattr(self, "api", None)
        if api is not None:
            api.drain()
            api.close()


async def _events(stream):
    # Leaving early (the client left: Ray cancels this generator) cancels the sequence.
    with stream:
        async for chunk in stream:
            yield chunk


def application(model: str | os.PathLike, options: ServeOptions | None = None, model_name: str | None = None):
    """The Ray Serve application (``serve.run(application(...))``): ``model`` must be at the same
    path on every node that may hold a replica."""
    o = options or ServeOptions()
    if o.replicas < 1:
        raise ValueError(f"replicas is at least 1, not {o.replicas}")
    if o.max_replicas and o.max_replicas < o.replicas:
        raise ValueError(f"max_replicas ({o.max_replicas}) is less than replicas ({o.replicas})")
    path = os.path.abspath(os.fspath(model))
    if not os.path.exists(path):
        raise FileNotFoundError(f"{model}: no such model file or directory")
    name = model_name or os.path.basename(os.path.normpath(path))
    queue = 4 * o.parallel if o.queue is None or o.queue < 0 else o.queue
    settings = dict(
        ray_actor_options={"num_cpus": o.cpus_per_replica},
        # A replica takes what its slots and queue hold; Ray's router keeps the rest.
        max_ongoing_requests=o.parallel + queue,
        health_check_period_s=o.health_check_period_s,
        graceful_shutdown_timeout_s=10,
    )
    if o.max_replicas > o.replicas:
        # Scale on queue depth: above `parallel` requests a replica (every slot busy, some
        # queued), add replicas; below it, remove them.
        settings["autoscaling_config"] = {"min_replicas": o.replicas, "initial_replicas": o.replicas,
                                          "max_replicas": o.max_replicas, "target_ongoing_requests": o.parallel}
    else:
        settings["num_replicas"] = o.replicas
    return OpenAIReplica.options(**settings).bind(path, asdict(o), name)


def run(model: str | os.PathLike, options: ServeOptions | None = None, *, address: str | None = None,
        host: str = "127.0.0.1", port: int = 8000, proxy_location: str = "EveryNode",
        app_name: str = "iron", access_log: bool = False) -> None:
    """What ``python -m iron.ray serve`` does: connect to Ray (``address``; None: start a local
    Ray), start Serve's proxy on ``host:port``, deploy the application and wait; SIGINT or SIGTERM
    takes it down (and the local Ray with it). ``access_log``: Ray Serve's line per request."""
    app = application(model, options)
    ray.init(address=address, logging_level="WARNING")
    serve.start(http_options={"host": host, "port": port}, proxy_location=proxy_location)
    # No line per request from every replica (iron serve writes none either); warnings and the
    # controller's news (a replica restarted, added, removed) still show.
    serve.run(app, name=app_name, route_prefix="/", logging_config={"enable_access_log": access_log})
    o = options or ServeOptions()
    print(f"serving {os.path.basename(os.fspath(model))} on http://{host}:{port} with {o.replicas} replica(s)"
          f" (Ray at {ray.get_runtime_context().gcs_address})", flush=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    try:
        while not stop:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    # A second Ctrl-C (or the SIGINT a terminal sends the whole group, forwarded by a wrapper too)
    # would interrupt the shutdown with a traceback and leave Ray half torn down: once stopping,
    # the signals have nothing more to ask. Ignored before "stopping" is said, so that nothing
    # that reads the line can signal into the gap.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("stopping", flush=True)
    if address is not None:
        # Another's cluster: only this application goes (its replicas finish what they hold).
        serve.delete(app_name)
    # A Ray of this command's own goes whole with it (Serve's own shutdown hung there).
    ray.shutdown()
