"""Scratch memory shared by every node of a kernel module, one set per thread.

A conv kernel needs a padded input and a column (or Winograd) buffer that
are dead as soon as the node returns. Keeping them per node made
resnet_small's first run allocate ~115 MiB; one :class:`SharedWorkspace` per
module, grown to the largest request and handed out as views, costs about
the largest node's workspace instead. It subclasses ``threading.local``, so
each thread of a ``RuntimePool`` (or any caller thread) gets its own buffers
and concurrent calls never share scratch memory.

Contract: a view from :meth:`get` is valid until the next :meth:`get` of the
same role on the same thread; kernels use it only within one call.
"""
from __future__ import annotations

import math
import threading

import numpy as np


class SharedWorkspace(threading.local):
    """Per-thread flat buffers keyed by role (``"cols"``, ``"pad"``...), grown on demand."""

    def __init__(self):
        self.bufs: dict[tuple[str, np.dtype], np.ndarray] = {}

    def get(self, key, role, shape, dtype, zero=False):
        """A C-contiguous ``shape`` view of the role's buffer (``key`` is ignored: any shape fits)."""
        dtype = np.dtype(dtype)
        n = math.prod(shape)
        buf = self.bufs.get((role, dtype))
        if buf is None or buf.size < n:
            buf = np.empty(max(n, 1), dtype)
            self.bufs[(role, dtype)] = buf
        view = buf[:n].reshape(shape)
        if zero:
            view.fill(0)
        return view

    def nbytes(self) -> int:
        """Bytes held by the calling thread."""
        return sum(b.nbytes for b in self.bufs.values())


def pad_into(ws, key, x, pads, role="pad"):
    """``x`` (N, C, *spatial) zero-padded by ``pads`` [(lo, hi), ...] in a workspace buffer."""
    sp = x.shape[2:]
    shape = x.shape[:2] + tuple(n + lo + hi for n, (lo, hi) in zip(sp, pads))
    return fill_padded(ws.get(key, role, shape, x.dtype), x, pads)


def fill_padded(xp, x, pads):
    """Write ``x`` zero-padded by ``pads`` into ``xp`` (its padded shape) and return ``xp``.

    Only the border slabs are zeroed (the buffer is shared with other nodes, so its
    previous content is arbitrary), then the interior is copied: one pass over the input.
    Works on channel slices too (the parallel kernels pad their own channels).
    """
    sp = x.shape[2:]
    shape = xp.shape
    full = (slice(None),) * 2
    for d, (lo, hi) in enumerate(pads):
        pre = (slice(None),) * d
        if lo:
            xp[full + pre + (slice(0, lo),)] = 0
        if hi:
            xp[full + pre + (slice(shape[2 + d] - hi, None),)] = 0
    xp[full + tuple(slice(lo, lo + n) for n, (lo, _) in zip(sp, pads))] = x
    return xp
