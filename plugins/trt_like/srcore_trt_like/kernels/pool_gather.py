"""Max pooling of small planes by 16-lane gathers (squeezenet's 3x3/2 ceil-mode pool on 9x9 planes,
R(2+1)D's 2x2/2 pool on 8x8 ones).

The row kernels (``pool.py``, ``pool_vec.py``) pay per input row: a view, a copy into a padded
buffer, a phase split, a reduction across the taps, all for a handful of elements when a plane is
8 or 9 wide. Here every plane is one flat array and each output is the max of its window's
elements, read through a table of their offsets in the plane (``taps``, tap-major, built once per
shape by :func:`srcore_trt_like.conv.pool.gather_taps`): 16 outputs a gather and a vector max per
tap. A window's taps in the padding repeat one of its own elements (max is idempotent), so the
kernel has no bounds tests. Loaded SPR, CPU time: 1x64x8x8 2x2/2 8.8 -> 1.4 us, 2x32x9x9 3x3/2
ceil 11.4 -> 2.6 us against the row kernels.
"""
from __future__ import annotations

from numba import njit

from .jit import JIT
from .simd import LANES, vgather, vmax_nan, vstore_lanes


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
