"""The vol2col of a 3-D convolution, compiled (the ``conv3d`` layer's ``vol2col_gemm`` tactic): every
(input channel, tap) row of the columns gathered from one zero-padded (C, T, H, W) input, so that
the convolution is one BLAS product of the (O, C * kt * kh * kw) weight by these
(C * kt * kh * kw, To * Ho * Wo) columns.

Flat arrays indexed by unsigned integers: numba wraps every signed index for negative values,
which kept the copy loops scalar (2.5-3.5x slower on R(2+1)D's 3x3x3 and 1x3x3 layers, SPR); the
padding is in the input (the tactic copies it into a zeroed scratch): no bounds tests per row
(a version testing them ran 1.4x slower)."""
from __future__ import annotations

import numba
from numba import uint64

from .jit import JIT


@numba.njit(**JIT)
def vol2col(xp, cols, kt, kh, kw, st, sh, sw, dt, dh, dw, To, Ho, Wo):
    """``cols[(c, a, b, e), (t, i, j)] = xp[c, t*st + a*dt, i*sh + b*dh, j*sw + e*dw]``; ``xp`` is the
    padded (C, Tp, Hp, Wp) input, ``cols`` (C * kt * kh * kw, To * Ho * Wo)."""
    C, Tp, Hp, Wp = xp.shape
    xf = xp.reshape(C * Tp * Hp * Wp)
    cf = cols.reshape(cols.size)
    usw = uint64(sw)
    q = uint64(0)
    for c in range(C):
        for a in range(kt):
            for b in range(kh):
                for e in range(kw):
                    for t in range(To):
                        for i in range(Ho):
                            s0 = uint64(((c * Tp + t * st + a * dt) * Hp + i * sh + b * dh) * Wp + e * dw)
                            for j in range(Wo):
                                uj = uint64(j)
                                cf[q + uj] = xf[s0 + uj * usw]
                            q += uint64(Wo)
