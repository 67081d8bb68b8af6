"""``srcore batch --on dask``: the job's units as Dask tasks, the model loaded once per worker process.

When a worker process dies, the scheduler re-runs its unfinished (and lost) tasks on the others
(and on the restarted worker); the driver writes results in unit order, so every row is written
exactly once.
"""
from __future__ import annotations

from typing import Any

from ..errors import ClusterError, SrcoreError
from ..scaleout.job import Unit, Work, run_unit
from ..scaleout.runner import BatchRunner
from ..scaleout.source import check_transfer, static_module
from .cluster import connect, install_model, worker_count


def _runner(work: Work) -> BatchRunner:
    return BatchRunner(static_module(work.source, work.options), work.colmap)


def _load(work: Work) -> None:
    """On every worker before the job: load the model (a missing file fails the job now)."""
    _runner(work)


def _run(work: Work, unit: Unit):
    return run_unit(_runner(work), work.colmap, unit)


class DaskEngine:
    """Units as tasks on a Dask cluster: the scheduler at ``address``, else a local cluster of
    ``workers`` processes started for the job (default: one per CPU)."""

    name = "dask"

    def __init__(self, address: str | None = None, workers: int | None = None, *, transfer: str = "copy"):
        self.address = address
        self.workers = workers or 0
        self.transfer = check_transfer(transfer)
        self.client = None
        self._cluster = None
        self._plugin = None

    def start(self, work: Work) -> None:
        self.client, self._cluster = connect(self.address, self.workers or None)
        self.workers = self.workers or worker_count(self.client)
        if self.transfer == "copy":
            self._plugin = install_model(self.client, work.source)
        try:
            self.client.run(_load, work)
        except SrcoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - a worker that could not even try
            raise ClusterError(f"a Dask worker could not load the model: {type(exc).__name__}: {exc}") from None
        # each task carries the (small) Work itself: scattered data would die with the workers holding it
        self._work = work

    def submit(self, unit: Unit) -> Any:
        return self.client.submit(_run, self._work, unit, pure=False)

    def result(self, handle: Any, timeout: float):
        import distributed

        try:
            return handle.result(timeout=timeout)
        except (TimeoutError, distributed.TimeoutError):
            raise TimeoutError from None
        except SrcoreError:
            raise
        except distributed.KilledWorker as exc:
            raise ClusterError(f"Dask gave up on a batch after its workers died repeatedly: {exc}") from None
        except Exception as exc:  # a failure outside srcore's code on the worker
            raise ClusterError(f"a Dask task failed: {type(exc).__name__}: {exc}") from None

    def pids(self) -> list[int]:
        """The worker processes' ids (for tests that kill one)."""
        import os

        return list(self.client.run(os.getpid).values())

    def close(self) -> None:
        if self.client is None:
            return
        try:
            if self._plugin is not None:
                self.client.unregister_worker_plugin(self._plugin)
        except Exception:  # noqa: BLE001 - the cluster may be gone already; nothing left to undo
            pass
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()
        self.client = self._cluster = self._plugin = None
