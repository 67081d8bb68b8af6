"""One image of a kernel that takes a range of its work last (``kernel(*head, buffer, *tail, lo, hi)``) in
``nt`` parts over numba's OpenMP team: part ``t`` runs the t-th range of ``total`` units with its own
row of ``bufs``. For the 1-thread tile kernels whose range twins compute each unit as the whole call
does (``sgemm.conv1x1_range``: pixel panels; ``dense_tile.dense_range``: output rows), so the split
gives the 1-thread kernel's bits whatever the team that runs it.

The kernel is called by the address of its compiled code (``srcore.plugin.packed_call``), as
``blocked_split.py``'s drivers do: a region linking the kernel by name re-optimizes its code (seconds
of compiling, cold)."""
from __future__ import annotations

from numba import njit, prange

from srcore.plugin import packed_call as _pc

from .jit import PARALLEL_JIT
from .parallel import _part

_call = _pc.call_at


def address(kernel, head, buf, tail) -> int:
    """``fn`` of :func:`ranges` for ``kernel`` called with these arguments (``buf``: one part's buffer row)."""
    return _pc.address(kernel, (*head, buf, *tail, 0, 0))


@njit(**PARALLEL_JIT)
def ranges(fn, head, bufs, tail, total, nt):
    """``kernel(*head, bufs[t], *tail, lo, hi)`` for the ``nt`` parts ``[lo, hi)`` of ``range(total)``."""
    for t in prange(nt):
        a, b = _part(total, t, nt, 1)
        if b > a:
            _call(fn, head + (bufs[t],) + tail + (a, b))
