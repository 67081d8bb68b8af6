"""Connecting to Dask, and sending the model file to every worker once (a worker plugin)."""
from __future__ import annotations

import contextlib
import os
from typing import Any

from ..errors import ClusterError, SrcoreError
from ..scaleout.address import check_reachable
from ..scaleout.source import ModelSource, local_model_path, payload_of

SCHEDULER_PORT = 8786
#: seconds to wait for the first worker of a cluster
WORKER_TIMEOUT = 60.0


def require_distributed():
    try:
        import distributed
    except ImportError:
        raise SrcoreError("srcore.dask needs Dask's distributed scheduler: pip install 'srcore[dask]'") from None
    return distributed


@contextlib.contextmanager
def _environment_kept():
    """Undo what starting local workers writes into this process's environment: Dask's nannies set
    ``distributed.nanny.pre-spawn-environ`` (OMP/MKL/OPENBLAS_NUM_THREADS=1, ...) in the *parent*
    before spawning, and never restore it, so every thread pool the caller starts afterwards (BLAS,
    OpenMP, an engine) would run single-threaded. (A nanny that restarts a crashed worker later writes
    them again; only the start is covered here.)"""
    saved = dict(os.environ)
    try:
        yield
    finally:
        if os.environ != saved:
            os.environ.clear()
            os.environ.update(saved)


def connect(address: str | None = None, workers: int | None = None, *, timeout: float = 10.0):
    """``(client, cluster)``: a client of the scheduler at ``address`` (``cluster`` None), or of a new
    local cluster of ``workers`` single-threaded worker processes on 127.0.0.1 (close both after use).
    An address where no scheduler answers raises ClusterError within ``timeout`` seconds."""
    distributed = require_distributed()
    cluster = None
    try:
        if address:
            check_reachable(address, "Dask", SCHEDULER_PORT)
            client = distributed.Client(address, timeout=f"{timeout}s")
        else:
            with _environment_kept():
                cluster = distributed.LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1,
                                                   processes=True, dashboard_address=None, host="127.0.0.1")
            client = distributed.Client(cluster, timeout=f"{timeout}s")
    except OSError as exc:
        if cluster is not None:
            cluster.close()
        raise ClusterError(f"cannot connect to the Dask scheduler at {address or '(a new local cluster)'}: {exc}") from None
    try:
        client.wait_for_workers(1, timeout=WORKER_TIMEOUT)
    except (TimeoutError, OSError):
        client.close()
        if cluster is not None:
            cluster.close()
        raise ClusterError(f"the Dask scheduler at {address} has no worker (none joined within "
                           f"{WORKER_TIMEOUT:g} s)") from None
    return client, cluster


def current_client():
    """The distributed client this process uses by default, or None (local schedulers)."""
    try:
        distributed = require_distributed()
    except SrcoreError:
        return None
    try:
        return distributed.get_client()
    except ValueError:
        return None


def _installer_class():
    from distributed.diagnostics.plugin import WorkerPlugin

    class ModelInstaller(WorkerPlugin):
        """Writes the model file to a worker's node cache when the worker starts (and on any worker
        that joins later, such as one restarted after a crash)."""

        def __init__(self, source: ModelSource, payload):
            self.source = source
            self.payload = payload

        def setup(self, worker) -> None:
            local_model_path(self.source, self.payload)

    return ModelInstaller


def install_model(client, source: ModelSource) -> str:
    """Send the model file to every worker of ``client`` once; returns the plugin's name
    (``client.unregister_worker_plugin(name)`` forgets it)."""
    name = f"srcore-model-{source.digest[:20]}"
    try:
        client.register_plugin(_installer_class()(source, payload_of(source)), name=name)
    except SrcoreError:
        raise
    except Exception as exc:  # a worker could not write it (disk full, read-only cache dir)
        raise ClusterError(f"could not send the model file {source.name} to the Dask workers: "
                           f"{type(exc).__name__}: {exc}") from None
    return name


def worker_count(client) -> int:
    """Worker threads of the cluster (the number of tasks it runs at once)."""
    info: dict[str, Any] = client.scheduler_info(n_workers=-1)["workers"]
    return sum(int(w.get("nthreads", 1)) for w in info.values()) or 1
