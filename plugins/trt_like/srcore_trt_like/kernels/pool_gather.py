"""Max pooling of small planes by 16-lane gathers (squeezenet's 3x3/2 ceil-mode pool on 9x9 planes,
R(2+1)D's 2x2/2 pool on 8x8 ones).

The row kernels (``pool.py``, ``pool_vec.py``) pay per input row: a view, a copy into a padded
buffer, a phase split, a reduction across the taps, all for a handful of elements when a plane is
8 or 9 wide. Here every plane is one flat array and each output is the max of its window's
elements, read through a table of their offsets in the plane (``taps``, tap-major, built once per
shape by :func:`srcore_trt_like.conv.pool.gather_taps`): 16 outputs a gather and a vector max per
tap. A window's taps in the padding repeat one of its own elements (max is idempotent), so the
kernel has no bounds tests. Loaded SPR, CPU time: 1x64x8x8 2x2/2 8.8 -> 1.4 us, 2x32x9x9 3x3/2
ceil 11.4 -> 2.6 us against the row kernels. Average pooling the same way from a zero-padded copy of
each plane (:func:`avg_pool_gather`: an Inception branch's 3x3/1 pool on 11x9 planes).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .jit import JIT
from .simd import LANES, vadd, vgather, vmax_nan, vstore_lanes


@njit(**JIT)
def max_pool_gather(x, taps, ntaps, out, p0, p1):
    """``out`` plane p = the max over each window of ``x`` plane p, planes (n, c flattened) [p0, p1).
    ``taps``: (ntaps, P16) int32 flattened, P16 the plane's outputs rounded up to 16; the offsets
    in an input plane of each output's window elements. NaN propagates like torch's."""
    HW = x.shape[2] * x.shape[3]
    P = out.shape[2] * out.shape[3]
    P16 = taps.size // ntaps
    xf, of = x.reshape(-1), out.reshape(-1)
    for p in range(p0, p1):
        base = p * HW
        for o in range(0, P, LANES):
            acc = vgather(xf, base, taps, o)
            for t in range(1, ntaps):
                acc = vmax_nan(acc, vgather(xf, base, taps, t * P16 + o))
            vstore_lanes(of, p * P + o, acc, min(LANES, P - o))


@njit(**JIT)
def avg_pool_gather(x, taps, ntaps, div, Hp, Wp, ph, pw, out, p0, p1):
    """``out`` plane p = the sum over each window of ``x`` plane p divided by ``div`` (flat (Ho * Wo),
    torch's divisors), planes [p0, p1). Each plane is copied into an (Hp, Wp) buffer of zeros (``ph``
    rows above, ``pw`` columns left): a window's taps in the padding read zeros, so no tap is tested
    (an infinity in the window stays one). ``taps``: as :func:`max_pool_gather`'s, offsets in the buffer."""
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    P = out.shape[2] * out.shape[3]
    P16 = taps.size // ntaps
    buf = np.zeros(Hp * Wp, np.float32)
    of = out.reshape(-1)
    for p in range(p0, p1):
        n, c = p // C, p % C
        for h in range(H):
            src, r = x[n, c, h], (h + ph) * Wp + pw
            for w in range(W):
                buf[r + w] = src[w]
        for o in range(0, P, LANES):
            acc = vgather(buf, 0, taps, o)
            for t in range(1, ntaps):
                acc = vadd(acc, vgather(buf, 0, taps, t * P16 + o))
            vstore_lanes(of, p * P + o, acc, min(LANES, P - o))
        for i in range(P):
            of[p * P + i] /= div[i]
