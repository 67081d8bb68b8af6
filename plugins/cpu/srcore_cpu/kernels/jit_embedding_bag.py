"""``nn.EmbeddingBag`` as one compiled gather-reduce (numba): each bag's rows summed (weighted),
averaged or maxed straight into its output row, the auxiliary outputs written in the same pass.

The numpy kernel (``embedding_bag.py``) takes ~20 numpy calls (searchsorted, bincount, ``add.at``,
a loop per bag for max): 20-60 us a table on a recommendation model's few bags of a few ids, where
the arithmetic is a few hundred flops. Semantics are that kernel's (tested against torch): rows in
position order, ``padding_idx`` rows in no bag, a max kept unless a later row is greater (torch's:
a NaN only in a bag's first row stays), empty bags zero. Offsets that are not non-decreasing from 0 or above go to the numpy kernel.
"""
from __future__ import annotations

import numba
import numpy as np

from . import jit as _J
from .jit import JIT

SUM, MEAN, MAX = 0, 1, 2
#: the kernel's answers: done, an index out of range, offsets the numpy kernel must take, not one
#: per-sample weight per index
OK, OUT_OF_RANGE, UNSORTED, BAD_WEIGHTS = 0, 1, 2, 3


@numba.njit(**JIT)
def _bags(weight, indices, offsets, psw, has_psw, mode, bags, pad, output, o2b, counts, maxidx):
    """Bags ``[offsets[b], offsets[b + 1])`` (the last to the end of ``indices``) reduced into
    ``output``; ``o2b`` (each index's bag) written when it has one entry per index, ``counts``
    and ``maxidx`` (flat) zeroed, then the bag sizes (mean, max), the sizes again (mean) or the
    argmax ids (max). ``pad`` < 0: no padding row."""
    n, no = indices.shape[0], offsets.shape[0]
    num, d = weight.shape
    if has_psw and psw.shape[0] != n:
        return BAD_WEIGHTS
    for p in range(n):
        if indices[p] < 0 or indices[p] >= num:
            return OUT_OF_RANGE
    if no and (offsets[0] != 0 or offsets[no - 1] > n):   # torch refuses these (the numpy kernel says why)
        return UNSORTED
    for k in range(no):
        if k and offsets[k] < offsets[k - 1]:
            return UNSORTED
    counts[:] = 0
    maxidx[:] = 0
    if o2b.shape[0] == n:
        b = 0
        for p in range(n):
            while b + 1 < bags and offsets[b + 1] <= p:
                b += 1
            o2b[p] = b
    for b in range(bags):
        s = min(offsets[b], n)
        e = min(offsets[b + 1] if b + 1 < no else n, n)
        orow = output[b]
        orow[:] = 0
        cnt = 0
        for p in range(s, e):
            i = indices[p]
            if i == pad:
                continue
            row = weight[i]
            if mode == MAX:
                if cnt == 0:
                    for j in range(d):
                        orow[j] = row[j]
                        maxidx[b * d + j] = i
                else:
                    for j in range(d):
                        v = row[j]
                        if v > orow[j]:   # torch's rule: a later NaN never wins, a first one stays
                            orow[j] = v
                            maxidx[b * d + j] = i
            elif has_psw:
                w = psw[p]
                for j in range(d):
                    orow[j] += row[j] * w
            else:
                for j in range(d):
                    orow[j] += row[j]
            cnt += 1
        if mode != SUM:
            counts[b] = cnt
        if mode == MEAN:
            maxidx[b] = cnt
            if cnt > 1:
                c = orow.dtype.type(cnt)
                for j in range(d):
                    orow[j] /= c
    return OK


_SIG = "int64({w}[:, ::1], {i}[::1], {o}[::1], {w}[::1], boolean, int64, int64, int64, {w}[:, ::1], int64[::1], " \
       "int64[::1], int64[::1])"


def bag_kernel(weight: str, indices: str, offsets: str):
    """The compiled kernel for these dtypes (float32/64 weights, int32/64 ids and offsets), compiled now."""
    return _J.compiled(_bags, _SIG.format(w=np.dtype(weight).name, i=np.dtype(indices).name,
                                          o=np.dtype(offsets).name))
