"""libstdc++'s unstable ``std::sort``, ``std::partial_sort`` and ``std::nth_element``, step for step, on
(key, index) pairs compared by key only: the order torch's unstable quantized ``sort`` and ``topk``
leave equal keys in is theirs (ATen sorts the stored integers with them; GCC builds torch), so
srcore reproduces the algorithms, not just a sorted order.

``less(a, b)`` is the comparator: ``a < b`` (ascending) or ``a > b`` (descending); ``desc`` selects it.
Every function works in place on ``keys[lo:hi]`` and ``idx[lo:hi]`` (int64 arrays, swapped together).
"""
from __future__ import annotations

import numpy as np

_THRESHOLD = 16          # libstdc++'s _S_threshold


def _less(a, b, desc):
    return a > b if desc else a < b


def _lg(n):
    """floor(log2(n)) for n >= 1 (libstdc++'s ``__lg``)."""
    r = -1
    while n:
        n >>= 1
        r += 1
    return r


def _swap(keys, idx, i, j):
    keys[i], keys[j] = keys[j], keys[i]
    idx[i], idx[j] = idx[j], idx[i]


def _move_median_to_first(keys, idx, result, a, b, c, desc):
    if _less(keys[a], keys[b], desc):
        if _less(keys[b], keys[c], desc):
            _swap(keys, idx, result, b)
        elif _less(keys[a], keys[c], desc):
            _swap(keys, idx, result, c)
        else:
            _swap(keys, idx, result, a)
    elif _less(keys[a], keys[c], desc):
        _swap(keys, idx, result, a)
    elif _less(keys[b], keys[c], desc):
        _swap(keys, idx, result, c)
    else:
        _swap(keys, idx, result, b)


def _unguarded_partition(keys, idx, first, last, pivot, desc):
    while True:
        while _less(keys[first], keys[pivot], desc):
            first += 1
        last -= 1
        while _less(keys[pivot], keys[last], desc):
            last -= 1
        if not first < last:
            return first
        _swap(keys, idx, first, last)
        first += 1


def _partition_pivot(keys, idx, first, last, desc):
    mid = first + (last - first) // 2
    _move_median_to_first(keys, idx, first, first + 1, mid, last - 1, desc)
    return _unguarded_partition(keys, idx, first + 1, last, first, desc)


def _unguarded_linear_insert(keys, idx, last, desc):
    vk, vi = keys[last], idx[last]
    nxt = last - 1
    while _less(vk, keys[nxt], desc):
        keys[last], idx[last] = keys[nxt], idx[nxt]
        last = nxt
        nxt -= 1
    keys[last], idx[last] = vk, vi


def _insertion_sort(keys, idx, first, last, desc):
    if first == last:
        return
    for i in range(first + 1, last):
        if _less(keys[i], keys[first], desc):
            vk, vi = keys[i], idx[i]
            for j in range(i, first, -1):       # move_backward(first, i, i + 1)
                keys[j], idx[j] = keys[j - 1], idx[j - 1]
            keys[first], idx[first] = vk, vi
        else:
            _unguarded_linear_insert(keys, idx, i, desc)


def _final_insertion_sort(keys, idx, first, last, desc):
    if last - first > _THRESHOLD:
        _insertion_sort(keys, idx, first, first + _THRESHOLD, desc)
        for i in range(first + _THRESHOLD, last):
            _unguarded_linear_insert(keys, idx, i, desc)
    else:
        _insertion_sort(keys, idx, first, last, desc)


# -- heaps (offsets from ``first``) ------------------------------------------------------------------------
def _push_heap(keys, idx, first, hole, top, vk, vi, desc):
    parent = (hole - 1) // 2
    while hole > top and _less(keys[first + parent], vk, desc):
        keys[first + hole], idx[first + hole] = keys[first + parent], idx[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    keys[first + hole], idx[first + hole] = vk, vi


def _adjust_heap(keys, idx, first, hole, length, vk, vi, desc):
    top = hole
    second = hole
    while second < (length - 1) // 2:
        second = 2 * (second + 1)
        if _less(keys[first + second], keys[first + second - 1], desc):
            second -= 1
        keys[first + hole], idx[first + hole] = keys[first + second], idx[first + second]
        hole = second
    if (length & 1) == 0 and second == (length - 2) // 2:
        second = 2 * (second + 1)
        keys[first + hole], idx[first + hole] = keys[first + second - 1], idx[first + second - 1]
        hole = second - 1
    _push_heap(keys, idx, first, hole, top, vk, vi, desc)


def _make_heap(keys, idx, first, last, desc):
    length = last - first
    if length < 2:
        return
    parent = (length - 2) // 2
    while True:
        _adjust_heap(keys, idx, first, parent, length, keys[first + parent], idx[first + parent], desc)
        if parent == 0:
            return
        parent -= 1


def _pop_heap(keys, idx, first, last, result, desc):
    vk, vi = keys[result], idx[result]
    keys[result], idx[result] = keys[first], idx[first]
    _adjust_heap(keys, idx, first, 0, last - first, vk, vi, desc)


def _heap_select(keys, idx, first, middle, last, desc):
    _make_heap(keys, idx, first, middle, desc)
    for i in range(middle, last):
        if _less(keys[i], keys[first], desc):
            _pop_heap(keys, idx, first, middle, i, desc)


def _sort_heap(keys, idx, first, last, desc):
    while last - first > 1:
        last -= 1
        _pop_heap(keys, idx, first, last, last, desc)


# -- the algorithms --------------------------------------------------------------------------------------
def partial_sort(keys, idx, first, middle, last, desc):
    """``std::partial_sort``."""
    _heap_select(keys, idx, first, middle, last, desc)
    _sort_heap(keys, idx, first, middle, desc)


def _introsort_loop(keys, idx, first, last, depth, desc):
    while last - first > _THRESHOLD:
        if depth == 0:
            partial_sort(keys, idx, first, last, last, desc)
            return
        depth -= 1
        cut = _partition_pivot(keys, idx, first, last, desc)
        _introsort_loop(keys, idx, cut, last, depth, desc)
        last = cut


def sort(keys, idx, first, last, desc):
    """``std::sort``."""
    if first != last:
        _introsort_loop(keys, idx, first, last, _lg(last - first) * 2, desc)
        _final_insertion_sort(keys, idx, first, last, desc)


def nth_element(keys, idx, first, nth, last, desc):
    """``std::nth_element``."""
    if first == last or nth == last:
        return
    depth = _lg(last - first) * 2
    while last - first > 3:
        if depth == 0:
            _heap_select(keys, idx, first, nth + 1, last, desc)
            _swap(keys, idx, first, nth)
            return
        depth -= 1
        cut = _partition_pivot(keys, idx, first, last, desc)
        if cut <= nth:
            first = cut
        else:
            last = cut
    _insertion_sort(keys, idx, first, last, desc)


def topk_row(keys, idx, k, largest, sorted_):
    """ATen's ``topk_impl_loop`` on one row (``keys`` the values, ``idx`` their positions): a partial sort
    when ``k * 64 <= n``, else ``nth_element`` and, if ``sorted_``, a sort of the first ``k - 1``."""
    n = len(keys)
    desc = bool(largest)
    if k * 64 <= n:
        partial_sort(keys, idx, 0, k, n, desc)
    else:
        nth_element(keys, idx, 0, k - 1, n, desc)
        if sorted_:
            sort(keys, idx, 0, k - 1, desc)


def _jit():
    """The functions above compiled with numba where it runs (same code, same steps), else as they are.
    Explicit signatures: one specialization each (int64 positions, bool direction), compiled on import."""
    try:
        import numba
    except ImportError:      # pragma: no cover - numba is a dependency; pure Python is only slower
        return
    g = globals()
    a = "int64[::1], int64[::1]"
    sigs = {
        "_less": "boolean(int64, int64, boolean)",
        "_lg": "int64(int64)",
        "_swap": f"void({a}, int64, int64)",
        "_move_median_to_first": f"void({a}, int64, int64, int64, int64, boolean)",
        "_unguarded_partition": f"int64({a}, int64, int64, int64, boolean)",
        "_partition_pivot": f"int64({a}, int64, int64, boolean)",
        "_unguarded_linear_insert": f"void({a}, int64, boolean)",
        "_insertion_sort": f"void({a}, int64, int64, boolean)",
        "_final_insertion_sort": f"void({a}, int64, int64, boolean)",
        "_push_heap": f"void({a}, int64, int64, int64, int64, int64, boolean)",
        "_adjust_heap": f"void({a}, int64, int64, int64, int64, int64, boolean)",
        "_make_heap": f"void({a}, int64, int64, boolean)",
        "_pop_heap": f"void({a}, int64, int64, int64, boolean)",
        "_heap_select": f"void({a}, int64, int64, int64, boolean)",
        "_sort_heap": f"void({a}, int64, int64, boolean)",
        "partial_sort": f"void({a}, int64, int64, int64, boolean)",
        "_introsort_loop": f"void({a}, int64, int64, int64, boolean)",
        "sort": f"void({a}, int64, int64, boolean)",
        "nth_element": f"void({a}, int64, int64, int64, boolean)",
        "topk_row": f"void({a}, int64, boolean, boolean)",
    }
    for name, sig in sigs.items():
        g[name] = numba.njit(sig, cache=True, nogil=True)(g[name])


_jit()


def sort_rows(keys: np.ndarray, desc: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each row of the 2-D ``keys`` sorted by ``std::sort``: (sorted keys, int64 original positions)."""
    k = np.ascontiguousarray(keys.astype(np.int64))
    idx = np.empty(k.shape, np.int64)
    for r in range(k.shape[0]):
        idx[r] = np.arange(k.shape[1])
        sort(k[r], idx[r], 0, int(k.shape[1]), bool(desc))
    return k, idx


def topk_rows(keys: np.ndarray, k: int, largest: bool, sorted_: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each row's top ``k`` as ATen's ``topk_impl_loop`` leaves them: (keys, int64 positions), (rows, k)."""
    work = np.ascontiguousarray(keys.astype(np.int64))
    idx = np.empty(work.shape, np.int64)
    for r in range(work.shape[0]):
        idx[r] = np.arange(work.shape[1])
        if k:
            topk_row(work[r], idx[r], int(k), bool(largest), bool(sorted_))
    return work[:, :k].copy(), idx[:, :k].copy()
