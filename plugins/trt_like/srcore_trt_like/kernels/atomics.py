"""An atomic counter for numba's parallel regions: the parts of a region handed out one at a time
(:func:`claim`), and the region that hands them out around a one-thread kernel (:func:`split`).

A region's parts split statically (part ``t`` of ``nt`` to thread ``t``) wait at the region's end for a
thread whose core another process holds, for its whole share; claimed one at a time from a counter,
the caller goes on taking parts while a late worker has not joined, and waits only for the part that
worker is running. Which thread runs a part never changes its bits.
"""
from __future__ import annotations

from types import FunctionType

import numpy as np
from numba import njit, prange
from srcore.plugin import omp_team as _omp_team

from .jit import PARALLEL_JIT


#: ``counter[0]`` before adding 1 to it, atomically (``counter``: a 1-element int64 array); the core's
#: intrinsic (``srcore.conv.omp_team``), which claims the parts of the core's own OpenMP regions too
claim = _omp_team.claim


def _claim_loop(nt, chunk, n, *args):
    """The template of every :func:`split` (``inner`` is bound per split): part ``t`` of the region
    claims chunks ``[a, a + chunk)`` of ``range(n)`` until none is left."""
    nxt = np.zeros(1, np.int64)
    for t in prange(nt):
        a = claim(nxt) * chunk
        while a < n:
            inner(t, a, min(n, a + chunk), *args)   # noqa: F821 (a global of each split)
            a = claim(nxt) * chunk


#: names given by :func:`split`: numba caches a split under its name, so two splits of one name
#: and signature would load each other's machine code
_NAMES: set[str] = set()


def split(inner, name: str):
    """``name(nt, chunk, n, *args)``: a ``parallel=True`` kernel whose ``nt`` parts claim chunks of
    ``chunk`` of ``range(n)`` one at a time, running ``inner(t, start, stop, *args)`` on each
    (``t``: the claiming part, for its scratch); ``inner`` a jitted one-thread kernel of this
    package (the on-disk cache is dropped when its source changes, :func:`.kernel_set`).

    Each split is :func:`_claim_loop`'s code with ``inner`` bound as a global, so the call is as
    direct (and inlinable) as in a loop written out per kernel, and it is cached on disk. A closure
    over ``inner``, or ``inner`` as an argument, compiles the same code but never hits numba's
    cache: its key pickles the closure's cells (or the signature's ``Dispatcher`` type), and a
    dispatcher pickles with a uuid new in each process (3-8 s of compiling a split at every start here).
    The run time is the written-out loop's (``benchmarks.rows_split_ab``, docs/performance-log.md);
    a cold cache compiles rows_split's six in ~1.4x the CPU time (14.1 s against 10.0 s), once.
    """
    if name in _NAMES:
        raise ValueError(f"a split named {name!r} exists already")
    _NAMES.add(name)
    fn = FunctionType(_claim_loop.__code__, dict(globals(), inner=inner), name)
    fn.__qualname__, fn.__doc__ = name, f"{inner.__name__} over numba's OpenMP team (:func:`split`)."
    return njit(**PARALLEL_JIT)(fn)
