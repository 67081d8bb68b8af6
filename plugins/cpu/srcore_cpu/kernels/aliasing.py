"""Cheap aliasing tests for a kernel's per-call checks.

``a.ctypes.data`` costs ~1.2 us a read (numpy builds a ctypes helper object each time), as much as a
small node's whole compiled kernel; ``np.may_share_memory`` (the arrays' bounds only) ~0.3 us. So
"is ``out`` the input itself" is asked of the bounds first and of the data pointers only when they
overlap: the common disjoint case costs one bounds test.
"""
from __future__ import annotations

import numpy as np


def same_start(a, b) -> bool:
    """Whether ``a`` and ``b`` start at the same address (an ``out`` that is the input itself)."""
    return a is b or (np.may_share_memory(a, b) and a.ctypes.data == b.ctypes.data)


def disjoint_or_same(a, b) -> bool:
    """Whether ``a`` and ``b`` do not overlap, or start at the same address: ``out`` a kernel may
    write while reading ``a`` element by element (itself, or elsewhere)."""
    return a is b or not np.may_share_memory(a, b) or (a.ctypes.data == b.ctypes.data) or not np.shares_memory(a, b)
