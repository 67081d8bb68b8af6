"""``aten::histc`` and ``aten::searchsorted``, compiled.

The numpy kernels take many numpy calls for a few values: histc masks, copies and calls
``np.histogram`` (~50-100 us on 14 values against torch's ~5); searchsorted's vectorised binary
search (``index._bisect``) takes ~8 numpy calls per halving step (~80 us on 3 rows of 6). Here each
value is one loop iteration.

histc is ATen's CPU ``histogramdd`` with linear bin selection (Histogram.cpp, HistogramKernel.cpp):
the outer edges are cast to the input's dtype (they are the ends of a ``linspace`` of that dtype), a
value ``v`` with ``lo <= v <= hi`` (so NaN fails) goes to bin ``int((v - lo) * bins / (hi - lo))``,
computed in the input's dtype (``edges`` carries ``lo``, ``hi`` and ``bins`` in it), and ``v == hi``
to the last bin. The counts are kept in int64 (torch adds 1.0 in the input's dtype, which stops
counting at 2**24 in one float32 bin; below that the two agree).

searchsorted is ATen's ``cus_lower_bound`` / ``cus_upper_bound``: ``start = mid + 1`` while
``not (row[mid] >= v)`` (``>`` for ``right``), so NaN lands where torch puts it.
"""
from __future__ import annotations

import numba
import numpy as np

from .jit import JIT


@numba.njit(**JIT)
def histc_counts(x, edges, hist):
    """The counts of ``x`` (n,) into ``hist`` (bins,) of x's dtype; ``edges`` = ``[lo, hi, bins]`` in
    x's dtype."""
    lo, hi, nb = edges[0], edges[1], edges[2]
    span = hi - lo
    last = hist.shape[0] - 1
    counts = np.zeros(hist.shape[0], np.int64)
    for k in range(x.shape[0]):
        v = x[k]
        if v >= lo and v <= hi:
            q = (v - lo) * nb / span
            # q == bins: v == hi, the last bin's right edge; NaN (a zero or infinite span, where
            # torch's cast is undefined) too, rather than an index out of bounds
            counts[int(q) if q < nb else last] += 1
    for b in range(hist.shape[0]):
        hist[b] = counts[b]


@numba.njit(**JIT)
def search_rows(rows, vals, out, right):
    """``out[r, k]``: the insertion index of ``vals[r, k]`` in ``rows[r]`` (``rows`` of one row: that
    row for every ``r``)."""
    n = rows.shape[1]
    one = rows.shape[0] == 1
    for r in range(vals.shape[0]):
        row = 0 if one else r
        for k in range(vals.shape[1]):
            v = vals[r, k]
            lo = 0
            hi = n
            while lo < hi:
                mid = (lo + hi) >> 1
                m = rows[row, mid]
                go = not (m > v) if right else not (m >= v)
                if go:
                    lo = mid + 1
                else:
                    hi = mid
            out[r, k] = lo


def compile_histc(dtype: str) -> None:
    """Compile (or load from numba's cache) histc for ``dtype`` now: at load, not in a call."""
    t = numba.from_dtype(np.dtype(dtype))
    histc_counts.compile((numba.types.Array(t, 1, "A"), numba.types.Array(t, 1, "C"), numba.types.Array(t, 1, "C")))


def compile_search(dtype: str, out_dtype: str) -> None:
    """Compile (or load from numba's cache) searchsorted for values and rows of ``dtype``, indices of
    ``out_dtype``, now."""
    t = numba.from_dtype(np.dtype(dtype))
    search_rows.compile((numba.types.Array(t, 2, "A"), numba.types.Array(t, 2, "A"),
                         numba.types.Array(numba.from_dtype(np.dtype(out_dtype)), 2, "C"), numba.boolean))
