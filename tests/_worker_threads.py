"""An xdist worker's intra-op threads: its share of the cores (``conftest.py`` calls :func:`share_cores`
in each worker; docs/testing.md)."""
from __future__ import annotations

import os

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def share_cores(workerinput) -> None:
    """An xdist worker's intra-op threads: its share of the cores, for it and the processes it starts."""
    if any(os.environ.get(v) for v in THREAD_VARIABLES):
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    share = str(max(1, cores // max(1, int(workerinput.get("workercount", 1)))))
    for v in THREAD_VARIABLES:
        os.environ[v] = share
    try:   # numpy's BLAS, when something loaded it before this hook
        from threadpoolctl import threadpool_limits
        threadpool_limits(int(share))
    except ImportError:
        pass
