"""Online inference on Ray Serve: an HTTP deployment with dynamic batching.

Routes, under the application's ``route_prefix`` (``/`` by default):

``POST /`` (or ``/predict``)
    A JSON body ``{"inputs": {"x": [[...], ...]}}`` (TensorFlow Serving's columnar format; a
    one-input model also takes ``{"inputs": [[...], ...]}``) answers ``{"outputs": {"output":
    [[...], ...]}}``. A ``.npy`` body (``Content-Type: application/x-npy``, one-input models) or
    ``.npz`` body (``application/x-npz``, arrays named as the inputs) answers in the same format
    (``.npy`` for one output, else ``.npz``; ``Accept`` may ask for another). Every array's first
    dimension counts the request's rows.
``GET /health``
    ``{"status": "ok", "model": ..., "inputs": [...], "outputs": [...], "requests": n, "model_calls": m}``
    once the replica has loaded the model (``requests`` run so far in ``model_calls`` calls).
``GET /``
    The same description of the model.

Requests are checked one by one against the input specs before they join a batch: a bad one is
answered ``400`` with ``{"error": ...}`` naming the input, and never enters a batch. Requests that
arrive within ``batch_wait_timeout_s`` of each other (up to ``max_batch_size``) run as one model
call; if that call fails, each request of the batch is run alone, so only the culprit fails.
"""
from __future__ import annotations

import asyncio
import io
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..errors import ClusterError, KernelError, SrcoreError, SrcoreInputError
from ..scaleout.columns import ColumnMap, Rows
from ..scaleout.runner import BatchRunner
from ..scaleout.source import static_module
from .cluster import ModelRef, connect, model_ref_and_model, require_ray

NPY, NPZ, JSON = "application/x-npy", "application/x-npz", "application/json"


class BadRequest(SrcoreInputError):
    """A request the model cannot take (HTTP 400); names the input."""


def parse_request(body: bytes, content_type: str, specs) -> tuple[dict[str, np.ndarray], str]:
    """The request's arrays, checked against the specs and cast to their dtypes, and its format."""
    names = [s.name for s in specs]
    kind = (content_type or JSON).split(";")[0].strip().lower()
    if kind in (NPY, NPZ):
        try:
            loaded = np.load(io.BytesIO(body), allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise BadRequest(f"the body is not a readable {'.npy' if kind == NPY else '.npz'} file: {exc}") from None
        if kind == NPY:
            if not isinstance(loaded, np.ndarray):
                raise BadRequest("the body is an .npz file; send it as application/x-npz")
            if len(names) != 1:
                raise BadRequest(f"the model takes {len(names)} inputs ({', '.join(names)}): send an .npz body "
                                 "(application/x-npz) with one array per input")
            arrays = {names[0]: loaded}
        else:
            if isinstance(loaded, np.ndarray):
                raise BadRequest("the body is an .npy file; send it as application/x-npy")
            arrays = {k: loaded[k] for k in loaded.files}
    elif kind in (JSON, "text/json", ""):
        try:
            doc = json.loads(body or b"null")
        except ValueError as exc:
            raise BadRequest(f"the body is not JSON: {exc}") from None
        if not isinstance(doc, dict) or "inputs" not in doc:
            raise BadRequest('expected a JSON object {"inputs": {"<input name>": [rows...]}}')
        raw = doc["inputs"]
        if not isinstance(raw, dict):
            if len(names) != 1:
                raise BadRequest(f"the model takes {len(names)} inputs ({', '.join(names)}): "
                                 '"inputs" must be an object keyed by input name')
            raw = {names[0]: raw}
        arrays = {}
        for k, v in raw.items():
            try:
                arrays[k] = np.asarray(v)
            except ValueError:
                arrays[k] = np.asarray(None)
            if arrays[k].dtype == object or arrays[k].dtype.kind not in "biuf":
                raise BadRequest(f"input {k!r}: expected nested lists of numbers with one shape (rows first)")
    else:
        raise BadRequest(f"unsupported Content-Type {content_type!r}: send {JSON}, {NPY} or {NPZ}")
    return check_arrays(arrays, specs), kind


def check_arrays(arrays: dict[str, np.ndarray], specs) -> dict[str, np.ndarray]:
    """Names, dtypes (cast ``same_kind``), ranks and fixed dims of one request (any number of rows)."""
    from ..model import InputSpec
    from ..runtime.inputs import check

    names = [s.name for s in specs]
    unknown = [k for k in arrays if k not in names]
    if unknown:
        raise BadRequest(f"unknown input {', '.join(map(repr, unknown))}; the model's inputs are {', '.join(names)}")
    missing = [n for n in names if n not in arrays]
    if missing:
        raise BadRequest(f"missing input {', '.join(map(repr, missing))} (the model takes {', '.join(names)})")
    out = {}
    for s in specs:
        a = arrays[s.name]
        if s.dtype is not None and a.dtype != s.dtype:
            if not np.can_cast(a.dtype, np.dtype(s.dtype), "same_kind"):
                raise BadRequest(f"input {s.name!r}: expected {s.dtype} values, got {a.dtype}")
            a = a.astype(s.dtype)
        if a.ndim == 0:
            raise BadRequest(f"input {s.name!r}: expected rows (an array whose first dimension counts them), "
                             "got a single number")
        out[s.name] = a
    rows = {a.shape[0] for a in out.values()}
    if len(rows) > 1:
        raise BadRequest(f"the inputs have different numbers of rows: "
                         f"{', '.join(f'{k}: {a.shape[0]}' for k, a in out.items())}")
    any_rows = [InputSpec(s.name, s.dtype, None if s.shape is None else (None, *s.shape[1:])) for s in specs]
    try:
        check([out[s.name] for s in specs], any_rows)
    except SrcoreInputError as exc:
        raise BadRequest(str(exc)) from None
    return out


def encode_response(outputs: dict[str, np.ndarray], kind: str) -> tuple[bytes, str]:
    if kind == JSON:
        return json.dumps({"outputs": {k: v.tolist() for k, v in outputs.items()}}).encode(), JSON
    buf = io.BytesIO()
    if kind == NPY and len(outputs) == 1:
        np.save(buf, next(iter(outputs.values())), allow_pickle=False)
        return buf.getvalue(), NPY
    np.savez(buf, **outputs)
    return buf.getvalue(), NPZ


def _signature(arrays: dict[str, np.ndarray]) -> tuple:
    return tuple((k, a.dtype.str, a.shape[1:]) for k, a in arrays.items())


class ModelServer:
    """The deployment's replica: the model (one ``StaticModule``) and the batching logic.

    ``max_batch_size`` counts requests, as Ray Serve does; a request may carry many rows.
    """

    def __init__(self, model: ModelRef, options=None, max_batch_size: int = 32,
                 batch_wait_timeout_s: float = 0.01, outputs=None):
        from ..runtime.options import Options

        sm = static_module(model.source, options or Options(), model.fetcher())
        self.colmap = ColumnMap.build(sm.model, None, outputs)
        self.specs = self.colmap.specs
        self.runner = BatchRunner(sm, self.colmap)
        self.name = model.source.name
        self.digest = model.source.digest
        self._compute = ThreadPoolExecutor(1, thread_name_prefix="srcore-serve")
        #: requests answered by the model and model calls made for them (the health route shows both)
        self.requests = self.model_calls = 0

    def describe(self) -> dict[str, Any]:
        return {"status": "ok", "model": self.name, "sha256": self.digest,
                "inputs": [s.to_json() for s in self.specs], "outputs": self.colmap.output_columns,
                "requests": self.requests, "model_calls": self.model_calls}

    def run_group(self, requests: list[dict[str, np.ndarray]]) -> list[Any]:
        """One model call for requests of one signature; on failure, one call per request."""
        n = [len(next(iter(r.values()))) for r in requests]
        self.requests += len(requests)
        if len(requests) > 1:
            batch = {k: np.concatenate([r[k] for r in requests]) for k in requests[0]}
            self.model_calls += 1
            try:
                out = self.runner(batch, Rows("the batch", 0, sum(n)))
            except SrcoreError:
                return [self._run_one(r) for r in requests]
            bounds = np.cumsum([0, *n])
            return [{c: a[bounds[i]:bounds[i + 1]] for c, a in out.items()} for i in range(len(requests))]
        return [self._run_one(requests[0])]

    def _run_one(self, request: dict[str, np.ndarray]):
        self.model_calls += 1
        try:
            return self.runner(request, Rows("the request", 0, len(next(iter(request.values())))))
        except SrcoreError as exc:
            return exc

    async def predict_one(self, request: dict[str, np.ndarray]) -> Any:
        """One request's outputs (or its SrcoreError); the deployment batches this call."""
        return (await self.run_requests([request]))[0]

    async def run_requests(self, requests: list[dict[str, np.ndarray]]) -> list[Any]:
        """The outputs (or SrcoreError) of each request; requests of one signature run as one call."""
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault(_signature(r), []).append(i)
        loop = asyncio.get_running_loop()
        results: list[Any] = [None] * len(requests)
        for idx in groups.values():
            outs = await loop.run_in_executor(self._compute, self.run_group, [requests[i] for i in idx])
            for i, o in zip(idx, outs):
                results[i] = o
        return results

    async def handle(self, method: str, path: str, headers, body: bytes) -> tuple[int, bytes, str]:
        """``(status, body, content type)`` for one HTTP request (``path`` relative to the prefix)."""
        path = "/" + path.strip("/")
        if method == "GET" and path in ("/", "/health"):
            return 200, json.dumps(self.describe()).encode(), JSON
        if method != "POST" or path not in ("/", "/predict"):
            return 404, json.dumps({"error": f"no route {method} {path}: POST / or /predict, GET /health"}).encode(), JSON
        try:
            arrays, kind = parse_request(body, headers.get("content-type", JSON), self.specs)
        except BadRequest as exc:
            return 400, json.dumps({"error": str(exc)}).encode(), JSON
        result = await self.predict_one(arrays)
        if isinstance(result, SrcoreError):
            # the request alone made the model fail (others of its batch ran): its values are the cause
            status = 400 if isinstance(result, (SrcoreInputError, KernelError)) else 500
            return status, json.dumps({"error": str(result)}).encode(), JSON
        accept = (headers.get("accept") or "").split(";")[0].strip().lower()
        payload, ctype = encode_response(result, accept if accept in (JSON, NPY, NPZ) else kind)
        return 200, payload, ctype


def _deployment():
    """The Ray Serve deployment class (made on first use: importing ray.serve is slow)."""
    from ray import serve
    from starlette.requests import Request
    from starlette.responses import Response

    class SrcoreDeployment(ModelServer):
        def __init__(self, model, options=None, max_batch_size=32, batch_wait_timeout_s=0.01, outputs=None):
            super().__init__(model, options, max_batch_size, batch_wait_timeout_s, outputs)
            self.predict_one.set_max_batch_size(max_batch_size)
            self.predict_one.set_batch_wait_timeout_s(batch_wait_timeout_s)

        @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.01)
        async def predict_one(self, requests):
            return await self.run_requests(requests)

        async def __call__(self, request: Request) -> Response:
            prefix = request.scope.get("root_path", "")
            path = request.url.path[len(prefix):] if prefix and request.url.path.startswith(prefix) else request.url.path
            status, body, ctype = await self.handle(request.method, path, request.headers, await request.body())
            return Response(content=body, status_code=status, media_type=ctype)

        def check_health(self) -> None:
            self.describe()

    SrcoreDeployment.__name__ = SrcoreDeployment.__qualname__ = "SrcoreDeployment"
    return serve.deployment(SrcoreDeployment)


def serve(model: Any, *, name: str = "srcore", route_prefix: str = "/", max_batch_size: int = 32,
          batch_wait_timeout_s: float = 0.01, num_replicas: int = 1, num_cpus: float = 1, options=None,
          outputs=None, transfer: str = "copy", host: str = "127.0.0.1", port: int = 8000,
          address: str | None = None) -> str:
    """Deploy ``model`` on Ray Serve as application ``name``; returns its URL (``http://host:port/prefix``).

    ``model``: a ``.srm`` path or a ``srcore.Model``; ``options``: a ``srcore.Options``. Connects to
    ``address`` (else the current or a new local Ray). ``host``/``port`` apply when this call starts
    Serve's HTTP proxy (a running Serve keeps its own). The call returns once the replicas answer;
    ``ray.serve.delete(name)`` removes the application. A model that does not load on a replica
    raises its SrcoreError here.
    """
    if isinstance(max_batch_size, bool) or not isinstance(max_batch_size, int) or max_batch_size < 1:
        raise SrcoreError(f"max_batch_size must be a whole number >= 1, got {max_batch_size!r}")
    if not isinstance(batch_wait_timeout_s, (int, float)) or batch_wait_timeout_s < 0:
        raise SrcoreError(f"batch_wait_timeout_s must be a number of seconds >= 0, got {batch_wait_timeout_s!r}")
    if not route_prefix.startswith("/"):
        raise SrcoreError(f"route_prefix must start with '/', got {route_prefix!r}")
    require_ray()
    connect(address)
    from ray import serve as ray_serve

    ref, loaded = model_ref_and_model(model, transfer)
    ColumnMap.build(loaded, None, outputs)   # the outputs= mapping is checked here, not on a replica
    _preflight(ref, options)
    ray_serve.start(http_options={"host": host, "port": port})
    app = _deployment().options(
        name=f"{name}-model", num_replicas=num_replicas, ray_actor_options={"num_cpus": num_cpus},
        max_ongoing_requests=max(100, 4 * max_batch_size),
    ).bind(ref, options, max_batch_size, batch_wait_timeout_s, outputs)
    try:
        ray_serve.run(app, name=name, route_prefix=route_prefix, blocking=False)
    except Exception as exc:  # a replica that failed to start: Serve says why in the deployment's status
        raise _deploy_error(exc, name) from None
    from ray.serve.context import _get_global_client

    http = _get_global_client().http_config
    return f"http://{http.host}:{http.port}{route_prefix.rstrip('/')}"


def _load_on_a_worker(ref: ModelRef, options) -> None:
    from ..runtime.options import Options

    static_module(ref.source, options or Options(), ref.fetcher())


def _preflight(ref: ModelRef, options, timeout: float = 120.0) -> None:
    """Load the model once on a Ray worker as a replica would: a model that cannot load there fails
    here in seconds, with its SrcoreError (Serve would retry the replica for a minute, then say less)."""
    ray = require_ray()
    from .cluster import unwrap

    task = ray.remote(num_cpus=0, max_retries=0)(_load_on_a_worker)
    try:
        ray.get(task.remote(ref, options), timeout=timeout)
    except ray.exceptions.GetTimeoutError:
        raise ClusterError(f"no Ray worker loaded the model within {timeout:g} s") from None
    except ray.exceptions.RayError as exc:
        raise unwrap(exc) from None


def _deploy_error(exc: Exception, name: str) -> SrcoreError:
    """The error of a failed deployment: the srcore error a replica raised, when Serve's status has it."""
    cause = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
    try:
        from ray import serve as ray_serve

        app = ray_serve.status().applications.get(name)
        for dep in (app.deployments.values() if app is not None else ()):
            text = dep.message or ""
            at = text.rfind("\nsrcore.")
            if at >= 0:
                cause = text[at + 1:].strip()
                break
    except Exception:  # noqa: BLE001 - the status is a nicety; Serve's own message stays
        pass
    return ClusterError(f"the Ray Serve application {name!r} did not start: {cause}")
