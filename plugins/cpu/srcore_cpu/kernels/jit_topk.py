"""``topk`` by a bounded heap per row (numba): one pass over the row, then the k kept sorted.

The numpy kernel (``reduce.topk``) selects with ``argpartition`` and checks for NaN and for ties at
the k-th value (falling back to a full stable sort), ~10 numpy passes per call; on a decoding
step's (8, 4000) logits with k = 50 that was ~3x torch. Here each row is scanned once against the
root of a k-element heap holding the worst kept element, so most elements cost one comparison.

Random rows still replace the root ~k ln(n / k) times (~220 sifts a row for k = 50 of 4000), and
those sifts were most of the time. So a row of at least :data:`_FILTER_MIN_RATIO` k elements
without NaN is first cut down: the maxima of ``4k`` or more blocks of the row are k or more
distinct elements, so the k-th best block maximum ``T`` (found by :func:`_kth_smallest`, a
quickselect: numba's ``np.partition`` took ~8 s of CPU to compile for the first dtype, 2 s for each
other, the whole kernel ~1.5 s without it) is no better than the k-th best element,
and every element of the top k is at least as good as ``T``. The heap then runs over only those
candidates (in index order, so ties come out as before): on random logits about 1.2 k of them
(~60 for k = 50 of 4000).

Order is torch's (and the numpy kernel's stable sort's): by value (NaN above everything for
``largest``, above everything for the smallest too, i.e. picked last), equal values by lower index
first. Scanning in index order, an element equal to the heap's worst never replaces it (the kept
one has the lower index), so ties at the k-th value are resolved as the stable sort does.
"""
from __future__ import annotations

import numba
import numpy as np

from srcore.plugin import quickselect

from . import jit as _J
from .jit import JIT


@numba.njit(forceinline=True, **JIT)
def _worse(va, ia, vb, ib, largest):
    """Whether (va, ia) ranks after (vb, ib) in the output order."""
    na, nb = va != va, vb != vb
    if largest:
        if na or nb:
            return (not na) and nb or (na and nb and ia > ib)
        return va < vb or (va == vb and ia > ib)
    if na or nb:
        return na and (not nb) or (na and nb and ia > ib)
    return va > vb or (va == vb and ia > ib)


@numba.njit(forceinline=True, **JIT)
def _sift_down(hv, hi, i, k, largest):
    """Restore the heap below ``i``: the worst-ranked element at the root."""
    while True:
        a = 2 * i + 1
        if a >= k:
            return
        b = a + 1
        w = a
        if b < k and _worse(hv[b], hi[b], hv[a], hi[a], largest):
            w = b
        if _worse(hv[w], hi[w], hv[i], hi[i], largest):
            hv[i], hv[w] = hv[w], hv[i]
            hi[i], hi[w] = hi[w], hi[i]
            i = w
        else:
            return


@numba.njit(forceinline=True, **JIT)
def _heap_push_scan(row, cand, m, k, largest, hv, hi):
    """The k best of ``row[cand[:m]]`` (``cand`` ascending) into the heap ``hv``/``hi``, worst at the root."""
    for j in range(k):
        hv[j] = row[cand[j]]
        hi[j] = cand[j]
    for j in range(k // 2 - 1, -1, -1):
        _sift_down(hv, hi, j, k, largest)
    thr = hv[0]
    for q in range(k, m):
        j = cand[q]
        v = row[j]
        # _worse(root, v) for a later index j, spelled out: one comparison for most elements
        if largest:
            better = v > thr or (v != v and thr == thr)
        else:
            better = v < thr or (thr != thr and v == v)
        if better:
            hv[0] = v
            hi[0] = j
            _sift_down(hv, hi, 0, k, largest)
            thr = hv[0]


@numba.njit(**JIT)
def _has_nan(row):
    """Whether ``row`` holds a NaN: one OR-reduction the loop vectorizer turns into SIMD compares."""
    nan = False
    for j in range(row.shape[0]):
        nan |= row[j] != row[j]
    return nan


@numba.njit(**dict(JIT, fastmath={"contract", "nnan", "nsz"}))
def _block_extremes(row, size, largest, bm):
    """The maximum (minimum) of each ``size``-element block of ``row`` into ``bm``; their count.
    Only for a row without NaN (checked first): ``nnan`` lets LLVM make the running max a SIMD max,
    ~3x the plain loop; infinities are still ordered as they should be."""
    n = row.shape[0]
    nb = 0
    for b0 in range(0, n, size):
        best = row[b0]
        if largest:
            for j in range(b0 + 1, min(b0 + size, n)):
                v = row[j]
                best = v if v > best else best
        else:
            for j in range(b0 + 1, min(b0 + size, n)):
                v = row[j]
                best = v if v < best else best
        bm[nb] = best
        nb += 1
    return nb


#: Hoare's selection of the k-th smallest, shared with trt_like's segments (srcore.quickselect)
_kth_smallest = quickselect.kth_smallest


@numba.njit(forceinline=True, **JIT)
def _candidates(row, k, largest, bm, cand, scratch):
    """The indices (ascending, into ``cand``) of the elements at least as good as the k-th best of
    the row's block maxima (minima), and their count; -1 when the row has NaN (no cut). ``scratch``:
    room for the block extremes, which the selection reorders."""
    n = row.shape[0]
    if _has_nan(row):
        return -1
    size = max(1, min(64, n // (4 * k)))
    nb = _block_extremes(row, size, largest, bm)
    # the k-th best block extreme (nb >= 4k of them): a selection, not a heap (the heap's ~k ln 4
    # sifts a row took as long as the scan)
    t = _kth_smallest(bm, nb, nb - k if largest else k - 1, scratch)
    m = 0
    for b in range(nb):   # only the blocks whose extreme reaches t hold candidates
        if (largest and bm[b] >= t) or (not largest and bm[b] <= t):
            for j in range(b * size, min(b * size + size, n)):
                v = row[j]
                if (largest and v >= t) or (not largest and v <= t):
                    cand[m] = j
                    m += 1
    return m


#: rows at least this many times k long are cut to candidates first (the block maxima need 4k blocks)
_FILTER_MIN_RATIO = 8


@numba.njit(**JIT)
def _topk_rows(x, k, largest, vals, idx):
    """``x`` (R, n) -> the k best of each row into ``vals``, ``idx`` (R, k), best first."""
    R, n = x.shape
    hv = np.empty(k, x.dtype)
    hi = np.empty(k, np.int64)
    cut = n >= _FILTER_MIN_RATIO * k
    nbk = -(-n // max(1, min(64, n // (4 * k)))) if cut else 1
    bm = np.empty(nbk, x.dtype)
    scratch = np.empty(nbk, x.dtype)
    cand = np.empty(n, np.int64)
    for r in range(R):
        row = x[r]
        m = _candidates(row, k, largest, bm, cand, scratch) if cut else -1
        if m < 0:   # every element a candidate
            m = n
            for j in range(n):
                cand[j] = j
        _heap_push_scan(row, cand, m, k, largest, hv, hi)
        # pop the worst to the back: the heap sorts itself best first
        for end in range(k - 1, -1, -1):
            vals[r, end] = hv[0]
            idx[r, end] = hi[0]
            hv[0] = hv[end]
            hi[0] = hi[end]
            _sift_down(hv, hi, 0, end, largest)


_SIG = "void({t}[:, ::1], int64, boolean, {t}[:, ::1], int64[:, ::1])"


def topk_rows(dtype):
    """The compiled kernel for ``dtype`` (float32, float64, int32 or int64), compiled now."""
    return _J.compiled(_topk_rows, _SIG.format(t=np.dtype(dtype).name))
