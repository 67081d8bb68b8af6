"""Compiled kernels of two data layers the numpy tactics do in many small passes (each a few µs of
numpy calls on an embedding bag's handful of ids: 10-25 µs a layer, the cpu plugin's whole op ~1):

* :func:`search_rows`: torch's binary search (``cus_lower_bound`` / ``cus_upper_bound``) per value;
* :func:`scatter_reduce3`: ``scatter_reduce`` of an index of the source's shape along the middle
  dim of (outer, n, inner) views, each element combined in index order (numpy's ``ufunc.at``
  order), ``amax`` / ``amin`` as numpy's ``maximum`` / ``minimum`` (a NaN wins).

Plain IEEE arithmetic (no contraction): the same bits as the numpy tactics.
"""
from __future__ import annotations

import numba
import numpy as np

from .jit import EXACT_JIT

_JIT = dict(EXACT_JIT, cache=True)


@numba.njit(**_JIT)
def search_rows(seq, values, sorter, use_sorter, right, shift, out):
    """``out[r, j]``: the insertion point of ``values[r, j]`` in row ``r`` of ``seq`` (through
    ``sorter``'s row when ``use_sorter``) plus ``shift``; ``!(mid >= v)`` (``right``: ``!(mid > v)``)
    moves right."""
    rows, m = seq.shape
    for r in range(rows):
        for j in range(values.shape[1]):
            v = values[r, j]
            lo, hi = 0, m
            while lo < hi:
                mid = lo + ((hi - lo) >> 1)
                mv = seq[r, sorter[r, mid]] if use_sorter else seq[r, mid]
                go = not (mv > v) if right else not (mv >= v)
                if go:
                    lo = mid + 1
                else:
                    hi = mid
            out[r, j] = lo + shift


@numba.njit(**_JIT)
def scatter_reduce3(out, src, idx, op, include, count):
    """``out`` (outer, n, inner) holds ``self``; ``src`` and ``idx`` (outer, k, inner). ``op``: 0 sum,
    1 mean, 2 prod, 3 amax, 4 amin; without ``include`` the reached places start from the identity;
    ``mean`` counts in ``count`` (zeros of ``out``'s shape) and divides the reached places. Returns
    the flat place in ``idx`` of the first index outside ``[0, n)`` (nothing written), or -1."""
    o, k, inner = idx.shape
    n = out.shape[1]
    for a in range(o):
        for p in range(k):
            for b in range(inner):
                if idx[a, p, b] < 0 or idx[a, p, b] >= n:
                    return (a * k + p) * inner + b
    if not include:
        ident = np.float32(0.0) if op < 2 else np.float32(1.0) if op == 2 else \
            np.float32(-np.inf) if op == 3 else np.float32(np.inf)
        for a in range(o):
            for p in range(k):
                for b in range(inner):
                    out[a, idx[a, p, b], b] = ident
    for a in range(o):
        for p in range(k):
            for b in range(inner):
                t = idx[a, p, b]
                x = out[a, t, b]
                y = src[a, p, b]
                if op < 2:
                    out[a, t, b] = x + y
                elif op == 2:
                    out[a, t, b] = x * y
                elif op == 3:
                    out[a, t, b] = y if (y > x or y != y) and x == x else x
                else:
                    out[a, t, b] = y if (y < x or y != y) and x == x else x
                if op == 1:
                    count[a, t, b] += np.float32(1.0)
    if op == 1:
        for a in range(o):
            for t in range(out.shape[1]):
                for b in range(inner):
                    c = count[a, t, b]
                    if c > 0:
                        out[a, t, b] = out[a, t, b] / (c + np.float32(1.0) if include else c)
    return -1
