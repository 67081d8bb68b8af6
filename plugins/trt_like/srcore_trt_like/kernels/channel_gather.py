"""numba kernel of the fused channel shuffle (``builder/shuffle.py``): output planes copied from
input planes by a table."""
from __future__ import annotations

from numba import njit

from .jit import JIT


@njit(**JIT)
def gather_planes(xs, outs, table):
    """``outs[o][n, oc] = xs[i][n, ic]`` for every row ``(o, oc, i, ic)`` of ``table`` and every
    image ``n``; ``xs`` and ``outs`` tuples of 4-D float32 arrays with the same planes."""
    N = outs[0].shape[0]
    for n in range(N):
        for m in range(table.shape[0]):
            o, oc, i, ic = table[m, 0], table[m, 1], table[m, 2], table[m, 3]
            src = xs[i][n, ic]
            dst = outs[o][n, oc]
            for h in range(dst.shape[0]):
                for w in range(dst.shape[1]):
                    dst[h, w] = src[h, w]
