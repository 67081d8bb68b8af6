"""Selection: the k-th smallest of a float32 buffer, for the compiled segments' ``topk`` cut (the
shared quickselect of ``srcore.plugin.quickselect``, compiled once and cached on disk: numba's
``np.partition`` is compiled anew in every process that calls it from generated code).
"""
from __future__ import annotations

import numba
from srcore.plugin import quickselect

from .jit import JIT

_kth = quickselect.kth_smallest


@numba.njit(**JIT)
def kth_smallest(x, k, a):
    """The value ``np.sort(x)[k]`` (``0 <= k < len(x)``, ``x`` without NaN); ``a``: scratch of ``len(x)``
    or more (``x`` is left as it is)."""
    return _kth(x, x.shape[0], k, a)
