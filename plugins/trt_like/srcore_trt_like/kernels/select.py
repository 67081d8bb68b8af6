"""Selection: the k-th smallest of a float32 buffer, for the compiled segments' ``topk`` cut.

numba's ``np.partition`` is compiled anew in every process that calls it from generated code (its
quickselect is not in any on-disk cache there): ~8 s of CPU at the first segment holding a long
``topk``, ~0.4 s each after. This kernel is compiled once and cached on disk with the others.
"""
from __future__ import annotations

import numba

from .jit import JIT


@numba.njit(**JIT)
def kth_smallest(x, k, a):
    """The value ``np.sort(x)[k]`` (``0 <= k < len(x)``, ``x`` without NaN), found by Hoare's
    selection in ``a`` (scratch of ``len(x)`` or more: ``x`` is copied there and reordered; ``x``
    is left as it is). Each pass partitions ``[lo, hi]`` around the median of its ends and middle,
    then keeps the side holding place ``k``."""
    for i in range(x.shape[0]):
        a[i] = x[i]
    lo, hi = 0, x.shape[0] - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        # the median of three in a[mid]: sorted, adversarial-free on sorted and reversed buffers
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
