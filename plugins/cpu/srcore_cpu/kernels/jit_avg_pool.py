"""``aten::avg_pool3d``, compiled.

The numpy kernel (``pool._avg_pool``) pads into a scratch buffer and adds one strided slab per kernel
tap, then divides by a broadcast divisor array: ~10 numpy calls even for a (3, 1, 1) kernel, ~60 us
on the (2, 1, 4, 7, 6) volume of ``F.local_response_norm`` where torch takes a few. Here one loop
nest per plane sums each window.

Semantics are ATen's CPU ``cpu_avg_pool3d`` (AvgPoolKernel.cpp): the window ``[o * s - p, o * s - p
+ k)`` is cut at ``size + p`` (that length is the divisor with ``count_include_pad``), then at the
input (that length without it); the in-bounds elements are summed in the input's dtype in (d, h, w)
order from 0, and divided by ``divisor_override`` when given; a window with no element in bounds
gives 0.
"""
from __future__ import annotations

import numba
import numpy as np

from .jit import JIT


@numba.njit(**JIT)
def avg_pool3d_planes(x, y, kd, kh, kw, sd, sh, sw, pd, ph, pw, include_pad, divisor):
    """``x`` (planes, D, H, W) -> ``y`` (planes, OD, OH, OW); ``divisor`` 0: none given."""
    P, D, H, W = x.shape
    OD, OH, OW = y.shape[1], y.shape[2], y.shape[3]
    zero = y.dtype.type(0)
    for p in range(P):
        for od in range(OD):
            d0 = od * sd - pd
            d1 = min(d0 + kd, D + pd)
            nd = d1 - d0
            d0, d1 = max(d0, 0), min(d1, D)
            for oh in range(OH):
                h0 = oh * sh - ph
                h1 = min(h0 + kh, H + ph)
                nh = h1 - h0
                h0, h1 = max(h0, 0), min(h1, H)
                for ow in range(OW):
                    w0 = ow * sw - pw
                    w1 = min(w0 + kw, W + pw)
                    nw = w1 - w0
                    w0, w1 = max(w0, 0), min(w1, W)
                    if d0 >= d1 or h0 >= h1 or w0 >= w1:
                        y[p, od, oh, ow] = 0
                        continue
                    if divisor != 0:
                        n = divisor
                    elif include_pad:
                        n = nd * nh * nw
                    else:
                        n = (d1 - d0) * (h1 - h0) * (w1 - w0)
                    acc = zero
                    for d in range(d0, d1):
                        for h in range(h0, h1):
                            for w in range(w0, w1):
                                acc += x[p, d, h, w]
                    y[p, od, oh, ow] = acc / y.dtype.type(n)   # torch: scalar_t sum / int64 divisor


def compile_for(dtype: str) -> None:
    """Compile (or load from numba's cache) the kernel for ``dtype`` now: at load, not in a call."""
    a4 = numba.types.Array(numba.from_dtype(np.dtype(dtype)), 4, "C")
    avg_pool3d_planes.compile((a4, a4) + (numba.int64,) * 9 + (numba.boolean, numba.int64))
