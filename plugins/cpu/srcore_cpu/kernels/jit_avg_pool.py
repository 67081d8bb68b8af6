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


@numba.njit(inline="always", **JIT)
def _windows(n, o_count, k, s, p):
    """Per output index along one dim: the window's in-bounds ``[lo, hi)`` and its length cut at
    ``n + p`` only (the divisor with ``count_include_pad``)."""
    lo = np.empty(o_count, np.int64)
    hi = np.empty(o_count, np.int64)
    full = np.empty(o_count, np.int64)
    for o in range(o_count):
        a = o * s - p
        b = min(a + k, n + p)
        full[o] = b - a
        lo[o] = max(a, 0)
        hi[o] = min(b, n)
    return lo, hi, full


@numba.njit(**JIT)
def avg_pool3d_flat(x, y, P, D, H, W, OD, OH, OW, kd, kh, kw, sd, sh, sw, pd, ph, pw, include_pad, divisor):
    """``x`` (P * D * H * W,) -> ``y`` (P * OD * OH * OW,), both C order; ``divisor`` 0: none given.

    A row of outputs ``y[p, od, oh, :]`` is summed at once: for each in-bounds (d, h) and kernel
    column j, the inputs at ``ow * sw - pw + j`` are added to a row accumulator, which keeps each
    output's own order (d, h, then w ascending) torch's. Flat buffers with unsigned offsets
    (``np.uintp``): no negative-index wraparound, so the stride-1 row loops vectorize."""
    dlo, dhi, dfull = _windows(D, OD, kd, sd, pd)
    hlo, hhi, hfull = _windows(H, OH, kh, sh, ph)
    wlo, whi, wfull = _windows(W, OW, kw, sw, pw)
    # kernel column j reads inside the row for the outputs [jlo[j], jhi[j])
    jlo = np.empty(kw, np.int64)
    jhi = np.empty(kw, np.int64)
    for j in range(kw):
        a = j - pw
        jlo[j] = min((-a + sw - 1) // sw if a < 0 else 0, OW)
        jhi[j] = max(min((W - 1 - a) // sw + 1 if a < W else 0, OW), jlo[j])
    zero = y.dtype.type(0)
    one = y.dtype.type(1)
    # the w factor of each output's divisor; an output with no element in bounds divides its 0 by 1
    wn = np.empty(OW, np.int64)
    for ow in range(OW):
        wn[ow] = wfull[ow] if include_pad else whi[ow] - wlo[ow]
    acc = np.empty(OW, y.dtype)
    den = np.empty(OW, y.dtype)
    for od in range(OD):
        for oh in range(OH):
            empty = dlo[od] >= dhi[od] or hlo[oh] >= hhi[oh]
            dh_n = dfull[od] * hfull[oh] if include_pad else (dhi[od] - dlo[od]) * (hhi[oh] - hlo[oh])
            for ow in range(OW):
                n = divisor if divisor != 0 else dh_n * wn[ow]
                den[ow] = one if empty or wlo[ow] >= whi[ow] else y.dtype.type(n)
            for p in range(P):
                yb = ((p * OD + od) * OH + oh) * OW
                if empty:
                    for ow in range(OW):
                        y[np.uintp(yb + ow)] = zero
                    continue
                for ow in range(OW):
                    acc[ow] = zero
                for d in range(dlo[od], dhi[od]):
                    for h in range(hlo[oh], hhi[oh]):
                        xb = ((p * D + d) * H + h) * W
                        for j in range(kw):
                            lo, hi, at = jlo[j], jhi[j], xb + j - pw
                            if sw == 1:
                                for ow in range(lo, hi):
                                    acc[np.uintp(ow)] += x[np.uintp(at + ow)]
                            else:
                                for ow in range(lo, hi):
                                    acc[np.uintp(ow)] += x[np.uintp(at + ow * sw)]
                for ow in range(OW):
                    y[np.uintp(yb + ow)] = acc[np.uintp(ow)] / den[np.uintp(ow)]   # torch: sum / int64 divisor


def compile_for(dtype: str) -> None:
    """Compile (or load from numba's cache) the kernel for ``dtype`` now: at load, not in a call."""
    a1 = numba.types.Array(numba.from_dtype(np.dtype(dtype)), 1, "C")
    avg_pool3d_flat.compile((a1, a1) + (numba.int64,) * 16 + (numba.boolean, numba.int64))
