"""Bilinear 2-D upsampling as one compiled kernel (numba).

The numpy kernel (``upsample.py``) gathers along each axis with ``np.take``; along the last axis
that is a per-element copy, and it makes four passes over the output (two gathers, two multiplies
per axis); a 64x64 -> 128x128 align_corners upsample of 32 channels took 4-5x torch. Here, per
plane, every source row is interpolated along the width once (a gather of two taps per output
column), and each output row blends two of those rows (a vectorizable loop): torch's order of
operations, ``h0 * (w0 * x[h0, w0] + w1 * x[h0, w1]) + h1 * (...)``. The taps and weights are
``upsample.linear_taps`` (ATen's index arithmetic), computed once per input shape.
"""
from __future__ import annotations

import numba
import numpy as np

from . import jit as _J
from . import upsample as _U
from .jit import JIT

_SIG = ("void(float32[:, :, ::1], float32[:, :, ::1], int64[::1], int64[::1], float32[::1], float32[::1], "
        "int64[::1], int64[::1], float32[::1], float32[::1], float32[:, ::1])")


@numba.njit(**JIT)
def _bilinear(x, o, h0, h1, lh0, lh1, w0, w1, lw0, lw1, tmp):
    """``x`` (P, H, W) -> ``o`` (P, OH, OW); ``tmp`` (H, OW) holds a plane's width-interpolated rows
    (a per-call buffer: one kernel instance may serve concurrent calls)."""
    P, H, _ = x.shape
    OH, OW = o.shape[1], o.shape[2]
    for p in range(P):
        for r in range(H):
            row = x[p, r]
            t = tmp[r]
            for j in range(OW):
                t[j] = lw0[j] * row[w0[j]] + lw1[j] * row[w1[j]]
        for i in range(OH):
            a, b = lh0[i], lh1[i]
            t0, t1 = tmp[h0[i]], tmp[h1[i]]
            orow = o[p, i]
            for j in range(OW):
                orow[j] = a * t0[j] + b * t1[j]


class Bilinear2d:
    """``run(x, osz, align_corners, scales, out)`` for float32 C-contiguous (N, C, H, W) ``x``."""

    def __init__(self):
        self.kernel = _J.compiled(_bilinear, _SIG)
        self._taps = {}

    def taps(self, H, W, osz, align_corners, scales):
        key = (H, W, osz, align_corners, tuple(scales))
        t = self._taps.get(key)
        if t is None:
            ft = np.dtype(np.float32)
            th = _U.linear_taps(H, osz[0], scales[0], align_corners, ft)
            tw = _U.linear_taps(W, osz[1], scales[1], align_corners, ft)
            t = self._taps[key] = (th, tw)
        return t

    def __call__(self, x, osz, align_corners, scales, out):
        N, C, H, W = x.shape
        (h0, h1, lh0, lh1), (w0, w1, lw0, lw1) = self.taps(H, W, tuple(osz), bool(align_corners), scales)
        self.kernel(x.reshape(N * C, H, W), out.reshape(N * C, osz[0], osz[1]),
                    h0, h1, lh0, lh1, w0, w1, lw0, lw1, np.empty((H, osz[1]), np.float32))
        return out
