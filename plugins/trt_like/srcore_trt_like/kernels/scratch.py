"""Per-thread scratch buffers shared by every conv/pool tactic of the process.

A tactic's scratch (Winograd tiles, im2col columns, row buffers) is dead as
soon as the call returns, so one set of flat buffers per thread, grown to the
largest request and handed out as views, costs the largest tactic's scratch
instead of the sum over layers. It is a ``threading.local``: concurrent calls
from several Python threads (one runtime each) never share memory, and no
lock is taken per call. Inside an engine call the set is the call's execution
context's (``contexts.py``: at most one per core, reused by every thread).

Contract: a view from :meth:`Scratch.get` is valid until the next ``get`` of
the same role on the same thread; tactics use it within one call only.
"""
from __future__ import annotations

import math
import threading

import numpy as np


class Scratch(threading.local):
    """Flat float32 buffers keyed by role (``"wino_v"``, ``"cols"``...), grown on demand."""

    def __init__(self):
        #: the thread's own buffers; ``bufs`` is the set in use: these, or an engine call's context's
        #: (``contexts.py``) while the thread runs one
        self.own: dict[str, np.ndarray] = {}
        self.bufs: dict[str, np.ndarray] = self.own

    def get(self, role: str, shape: tuple[int, ...], dtype=np.float32) -> np.ndarray:
        """A C-contiguous ``shape`` view of the role's buffer (previous contents arbitrary)."""
        n = max(math.prod(shape), 1)
        key = role if dtype == np.float32 else f"{role}:{np.dtype(dtype).name}"
        buf = self.bufs.get(key)
        if buf is None or buf.size < n:
            # 64-byte aligned so numba's vector loads and BLAS see aligned rows
            raw = np.empty(n + 16, dtype)
            off = (-raw.ctypes.data % 64) // raw.itemsize
            buf = raw[off:off + n]
            self.bufs[key] = buf
        return buf[:math.prod(shape)].reshape(shape)

    def release(self) -> None:
        """Drop the calling thread's buffers (after timing every candidate, they are sized for the
        largest; the winners' calls grow them back to what they need)."""
        self.bufs.clear()

    def nbytes(self) -> int:
        """Bytes held by the calling thread."""
        return sum(b.nbytes for b in self.bufs.values())


#: the one workspace of every tactic in this package
SCRATCH = Scratch()
