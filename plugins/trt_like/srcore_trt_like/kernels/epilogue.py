"""The epilogues the conv kernels share: ``out = relu?(y + bias (+ residual))``, as a row loop, one
output channel down a pixel-major ``C^T`` column, and the 16 x 16 transposing row writer of the
vector kernels. relu keeps NaN like torch's (a NaN is not < 0). All ``inline="always"``: each
kernel gets its own specialised copy (``has_res``/``relu`` fold away)."""
from __future__ import annotations

import numpy as np
from numba import njit

from .jit import JIT
from .simd import vadd, vload_lanes, vrelu, vsplat_value, vstore_lanes, vtranspose16

_ZERO = np.float32(0.0)


@njit(inline="always", **JIT)
def row(y, orow, rrow, bias, has_res, relu, n):
    """``orow[:n] = relu?(y + bias (+ rrow))``. ``y`` may be ``orow``."""
    if has_res:
        if relu:
            for w in range(n):
                z = y[w] + bias + rrow[w]
                orow[w] = _ZERO if z < _ZERO else z
        else:
            for w in range(n):
                orow[w] = y[w] + bias + rrow[w]
    elif relu:
        for w in range(n):
            z = y[w] + bias
            orow[w] = _ZERO if z < _ZERO else z
    else:
        for w in range(n):
            orow[w] = y[w] + bias


@njit(inline="always", **JIT)
def column(cf, s, ldc, of, d, m, bo, rf, has_res, relu):
    """``of[d + e] = relu?(cf[s + e * ldc] + bo (+ rf[d + e]))`` for e < m: one channel of ``C^T``."""
    for e in range(m):
        z = cf[s + e * ldc] + bo
        if has_res:
            z += rf[d + e]
        if relu and z < _ZERO:
            z = _ZERO
        of[d + e] = z


@njit(inline="always", **JIT)
def write_rows(stage, sw, rows, out, n, h0, bias, res, has_res, relu, ob):
    """Staged pixels (row i, pixel w, 16 channels from ``ob``) -> ``out[n, ob + q, h0 + i, w]``, 16 x 16
    transposes with bias, residual and relu; rows < ``rows``, channels < O, pixels < Wo."""
    O, Ho, Wo = out.shape[1], out.shape[2], out.shape[3]
    HW = Ho * Wo
    of = out.reshape(-1)
    rf = res.reshape(-1)
    nq = min(16, O - ob)
    for i in range(rows):
        for w0 in range(0, Wo, 16):
            m = min(16, Wo - w0)
            t16 = vtranspose16(stage, (i * sw + w0) * 16, 16)
            for qq in range(nq):
                o = ob + qq
                d = (n * O + o) * HW + (h0 + i) * Wo + w0
                v = vadd(t16[qq], vsplat_value(bias[o]))
                if has_res:
                    v = vadd(v, vload_lanes(rf, d, m))
                if relu:
                    v = vrelu(v)
                vstore_lanes(of, d, v, m)
