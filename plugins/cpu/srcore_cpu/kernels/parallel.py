"""Split large elementwise work across the intra-op threads BLAS is allowed to use.

numpy's ufunc loops release the GIL, so independent slices of a big elementwise
pass (the Winograd transforms) run in parallel on a small thread pool.
The degree is OpenBLAS's current thread count (``OPENBLAS_NUM_THREADS``,
``threadpoolctl.threadpool_limits``), read per call through the library's own
``openblas_get_num_threads`` (~0.3 us): at 1 thread, or when the library is not
found, :func:`run` just calls the parts in order on the caller's thread, so
the 1-thread path costs nothing extra. Calls from a pool thread run inline
(no nested fan-out), and a ``RuntimePool`` caller limited to 1 BLAS thread
stays single-threaded.
"""
from __future__ import annotations

import ctypes
import glob
import os
import threading
from concurrent.futures import ThreadPoolExecutor

_get_threads = None
_POOL: ThreadPoolExecutor | None = None
_LOCK = threading.Lock()
_IN_POOL = threading.local()


def _find_openblas():
    import numpy as np

    libdir = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libdir, "*openblas*.so*"))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_", "openblas_get_num_threads"):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype = ctypes.c_int
                return fn
    return lambda: 1


def threads() -> int:
    """The BLAS intra-op thread count now (1 inside a pool worker)."""
    global _get_threads
    if getattr(_IN_POOL, "yes", False):
        return 1
    if _get_threads is None:
        _get_threads = _find_openblas()
    return max(1, int(_get_threads()))


def _mark(fn, *a):
    _IN_POOL.yes = True
    return fn(*a)


def run(fn, parts, n=None):
    """``fn(part)`` for every part, on ``n`` (default :func:`threads`) threads; waits for all."""
    global _POOL
    n = threads() if n is None else n
    if n <= 1 or len(parts) <= 1:
        for p in parts:
            fn(p)
        return
    if _POOL is None:
        with _LOCK:
            if _POOL is None:
                _POOL = ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2) - 1),
                                           thread_name_prefix="srcore-cpu")
    futs = [_POOL.submit(_mark, fn, p) for p in parts[1:]]
    fn(parts[0])  # the caller does its share
    for f in futs:
        f.result()


def split(n_items: int, n: int) -> list[slice]:
    """``n`` contiguous slices covering ``range(n_items)`` (fewer if ``n_items < n``)."""
    n = max(1, min(n, n_items))
    q, r = divmod(n_items, n)
    out, s = [], 0
    for i in range(n):
        e = s + q + (i < r)
        out.append(slice(s, e))
        s = e
    return out
