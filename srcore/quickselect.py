"""The k-th smallest of a float32 buffer by Hoare's selection (numba), shared by the backends
(``srcore.plugin.quickselect``: the cpu plugin's ``topk`` cut and trt_like's compiled segments).

numba's ``np.partition`` is compiled anew in every process that calls it from generated code (its
quickselect is in no on-disk cache there): ~8 s of CPU for the first dtype, ~2 s for each other. This
kernel is compiled once and cached on disk.
"""
from __future__ import annotations

import numba

#: releases the GIL, cached on disk, IEEE division, FMA contraction only
JIT = dict(nogil=True, cache=True, error_model="numpy", fastmath={"contract"})


@numba.njit(**JIT)
def kth_smallest(x, n, k, a):
    """The value ``np.sort(x[:n])[k]`` (``0 <= k < n``, no NaN in ``x[:n]``), found in the scratch ``a``
    (``n`` or more long: ``x[:n]`` is copied there and reordered; ``x`` is left as it is). Each pass
    partitions ``[lo, hi]`` around the median of its ends and middle, then keeps the side holding place
    ``k``."""
    for i in range(n):
        a[i] = x[i]
    lo, hi = 0, n - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        # the median of three in a[mid]: no quadratic case on sorted or reversed buffers
        if a[mid] < a[lo]:
            a[mid], a[lo] = a[lo], a[mid]
        if a[hi] < a[lo]:
            a[hi], a[lo] = a[lo], a[hi]
        if a[hi] < a[mid]:
            a[hi], a[mid] = a[mid], a[hi]
        pivot = a[mid]
        i, j = lo, hi
        while i <= j:
            while a[i] < pivot:
                i += 1
            while pivot < a[j]:
                j -= 1
            if i <= j:
                a[i], a[j] = a[j], a[i]
                i += 1
                j -= 1
        if k <= j:
            hi = j
        elif k >= i:
            lo = i
        else:   # j < k < i: a[k] equals the pivot
            return a[k]
    return a[k]
