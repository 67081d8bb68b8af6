"""``srcore batch --on ray``: the job's units on Ray actors, one ``StaticModule`` each.

Actors restart when their process dies (``max_restarts=-1``) and Ray re-runs the calls they had
not answered (``max_task_retries``): a killed worker costs a retry, and the driver, which writes
results in unit order, still gets every unit's rows exactly once.
"""
from __future__ import annotations

import os
import time
from typing import Any

from ..errors import ClusterError, SrcoreError
from ..scaleout.job import Unit, UnitWorker, Work
from ..scaleout.source import check_transfer, payload_of
from .cluster import connect, require_ray, unwrap

#: how often Ray re-runs a call whose actor died before answering
MAX_TASK_RETRIES = 3


class _UnitActor:
    """A Ray actor holding a job's :class:`UnitWorker`. A SrcoreError while loading the model is kept
    and raised by every call, so the driver gets it as a task error (not a dead, restarting actor)."""

    def __init__(self, work: Work, payload: tuple):
        self._error = None
        fetch = None
        if payload:
            def fetch():
                import ray

                return ray.get(payload[0])
        try:
            self._worker = UnitWorker(work, fetch)
        except SrcoreError as exc:
            self._error = exc

    def ready(self) -> int:
        if self._error is not None:
            raise self._error
        return os.getpid()

    def run(self, unit: Unit):
        if self._error is not None:
            raise self._error
        return self._worker(unit)


class RayEngine:
    """Units on ``workers`` Ray actors (default: one per CPU of the cluster), each taking ``num_cpus``.

    ``address``: a running cluster (``HOST:PORT``, ``ray://HOST:PORT``, ``auto``), else a local one
    is started for the job and stopped after it. ``start_timeout``: seconds to wait for the first
    actor to load the model; actors not ready ``grace`` seconds later are dropped.
    """

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None, *, transfer: str = "copy",
                 num_cpus: float = 1, start_timeout: float = 120.0, grace: float = 10.0):
        self.address = address
        self.workers = workers or 0
        self.transfer = check_transfer(transfer)
        self.num_cpus = num_cpus
        self.start_timeout = start_timeout
        self.grace = grace
        self._owns_ray = False
        self._actors: list = []
        self._next = 0
        self._payload: tuple = ()

    def start(self, work: Work) -> None:
        ray = require_ray()
        self._owns_ray = connect(self.address, num_cpus=self.workers or None)
        cpus = ray.cluster_resources().get("CPU", 0)
        n = self.workers or max(1, int(cpus // self.num_cpus))
        if cpus < self.num_cpus:
            raise ClusterError(f"the Ray cluster has {cpus:g} CPUs; a worker needs {self.num_cpus:g}")
        self._payload = (ray.put(payload_of(work.source)),) if self.transfer == "copy" else ()
        actor = ray.remote(num_cpus=self.num_cpus, max_restarts=-1,
                           max_task_retries=MAX_TASK_RETRIES)(_UnitActor)
        self._actors = [actor.remote(work, self._payload) for _ in range(n)]
        self._actors = self._wait_ready()
        self.workers = len(self._actors)

    def _wait_ready(self) -> list:
        ray = require_ray()
        pending = {a.ready.remote(): a for a in self._actors}
        ready: list = []
        deadline = time.monotonic() + self.start_timeout
        while pending:
            left = (deadline if not ready else min(deadline, t_first + self.grace)) - time.monotonic()
            if left <= 0:
                break
            done, _ = ray.wait(list(pending), num_returns=1, timeout=min(left, 1.0))
            for ref in done:
                actor = pending.pop(ref)
                try:
                    ray.get(ref)
                except Exception as exc:  # the model did not load: every actor would say the same
                    raise unwrap(exc) from None
                if not ready:
                    t_first = time.monotonic()
                ready.append(actor)
        for actor in pending.values():
            ray.kill(actor)
        if not ready:
            raise ClusterError(f"no Ray worker started within {self.start_timeout:g} s (the cluster has "
                               f"{ray.cluster_resources().get('CPU', 0):g} CPUs, {ray.available_resources().get('CPU', 0):g} "
                               f"free; each worker takes {self.num_cpus:g})")
        return ready

    def submit(self, unit: Unit) -> Any:
        actor = self._actors[self._next % len(self._actors)]
        self._next += 1
        return actor.run.remote(unit)

    def result(self, handle: Any, timeout: float):
        ray = require_ray()
        try:
            return ray.get(handle, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            raise TimeoutError from None
        except ray.exceptions.RayError as exc:
            raise unwrap(exc) from None

    def pids(self) -> list[int]:
        """The actors' process ids (for tests that kill one)."""
        ray = require_ray()
        return ray.get([a.ready.remote() for a in self._actors], timeout=60)

    def close(self) -> None:
        if not self._actors and not self._owns_ray:
            return
        ray = require_ray()
        for a in self._actors:
            ray.kill(a)
        self._actors = []
        self._payload = ()
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False
