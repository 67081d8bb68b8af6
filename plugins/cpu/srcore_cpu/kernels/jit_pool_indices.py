"""Max pooling that also returns indices (``max_pool2d_with_indices``, ``adaptive_max_pool2d``), compiled.

The numpy kernels (``pool.py``) loop in Python over the taps (or, adaptive, over every output cell),
several numpy calls each: a 3x3 pool with indices on (2, 8, 32, 32) took ~270 us against torch's ~15,
an adaptive max pool to 7x7 ~220 us. Here one loop nest per plane visits each window once.

Semantics are ATen's CPU kernels': a window starts from its first in-bounds element and keeps a
later element that is strictly larger or NaN (so of several NaN the last one wins, and -inf or the
dtype's lowest value keeps the first index); indices are flat over the plane (``h * W + w``).
Adaptive windows are ``[floor(i * H / OH), ceil((i + 1) * H / OH))``.
"""
from __future__ import annotations

import numba
import numpy as np

from .jit import JIT


@numba.njit(inline="always", **JIT)
def _window_max(x, p, h0, h1, dh, w0, w1, dw):
    """``(value, flat index)`` of plane ``p``'s window rows ``range(h0, h1, dh)``, columns
    ``range(w0, w1, dw)``: from its first element on, a strictly larger element or a NaN is kept."""
    W = x.shape[2]
    best = x[p, h0, w0]
    at = h0 * W + w0
    for h in range(h0, h1, dh):
        for w in range(w0, w1, dw):
            v = x[p, h, w]
            if v > best or v != v:
                best = v
                at = h * W + w
    return best, at


@numba.njit(**JIT)
def max_pool2d_planes(x, vals, idxs, kh, kw, sh, sw, ph, pw, dh, dw):
    """``x`` (planes, H, W) -> ``vals`` / ``idxs`` (planes, OH, OW)."""
    P, H, W = x.shape
    OH, OW = vals.shape[1], vals.shape[2]
    for p in range(P):
        for oh in range(OH):
            h0 = oh * sh - ph
            h1 = min(h0 + (kh - 1) * dh + 1, H)
            while h0 < 0:
                h0 += dh
            for ow in range(OW):
                w0 = ow * sw - pw
                w1 = min(w0 + (kw - 1) * dw + 1, W)
                while w0 < 0:
                    w0 += dw
                vals[p, oh, ow], idxs[p, oh, ow] = _window_max(x, p, h0, h1, dh, w0, w1, dw)


@numba.njit(**JIT)
def adaptive_max_pool2d_planes(x, vals, idxs):
    """``x`` (planes, H, W) -> ``vals`` / ``idxs`` (planes, OH, OW), adaptive windows."""
    P, H, W = x.shape
    OH, OW = vals.shape[1], vals.shape[2]
    for p in range(P):
        for oh in range(OH):
            h0 = (oh * H) // OH
            h1 = ((oh + 1) * H + OH - 1) // OH
            for ow in range(OW):
                w0 = (ow * W) // OW
                w1 = ((ow + 1) * W + OW - 1) // OW
                vals[p, oh, ow], idxs[p, oh, ow] = _window_max(x, p, h0, h1, 1, w0, w1, 1)


def compile_for(dtype: str) -> None:
    """Compile (or load from numba's cache) both kernels for ``dtype`` now: at load, not in a call."""
    a3 = numba.types.Array(numba.from_dtype(np.dtype(dtype)), 3, "C")
    i3 = numba.types.Array(numba.int64, 3, "C")
    ints = (numba.int64,) * 8
    max_pool2d_planes.compile((a3, a3, i3) + ints)
    adaptive_max_pool2d_planes.compile((a3, a3, i3))
