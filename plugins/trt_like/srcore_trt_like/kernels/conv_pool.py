"""numba kernels of the fused conv + max pool (``conv_pool.py``): the packed conv's output is pooled
while it is in cache, straight from the GEMM's pixel-major ``C^T``, 16 output channels per vector,
and only the pooled tensor is written (NCHW, bias and relu applied after the max: they are
monotonic, so ``max(z) + b`` and ``relu(max(z))`` are bit-identical to pooling ``relu(z + b)``).

:func:`part` is one thread's share: a range of pooled rows. It gathers, multiplies and reduces
across the kernel's columns the conv rows they need, a few rows at a time, into a buffer of
column-reduced rows, then reduces across rows and writes the pooled rows.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import epilogue
from . import gemm as _g
from . import packed as _k
from .jit import JIT, plain_args
from .simd import vload, vmax_nan, vsplat_value, vstore

_NEG_INF = np.float32(-np.inf)


@plain_args
@njit(**JIT)
def part(xph, kh, kw, sh, ph, dh, joff, seg, Hc, Wc, wf, K, MB, step, pool, a, b, xp, ct, hm, stage, bias, relu, out,
         n):
    """Pooled rows [a, b) of image n; the conv's output is Hc x Wc. ``pool`` = (kh, kw, sh, sw, ph, pw)
    of the max pool (no dilation); ``step``: conv rows per GEMM; ``xp``, ``ct``, ``hm``, ``stage``:
    this part's buffers (operand of ``step`` rows' blocks, their C^T, the column-reduced conv rows
    the part needs, one pooled row)."""
    C = xph.shape[0]
    O, Wp = out.shape[1], out.shape[3]
    pkh, pkw, psh, psw, pph, ppw = pool[0], pool[1], pool[2], pool[3], pool[4], pool[5]
    ldc = 64 * MB
    lo = max(0, a * psh - pph)
    hi = min(Hc, (b - 1) * psh - pph + pkh)
    nvec = (O + 15) // 16
    for r0 in range(lo, hi, step):
        r1 = min(hi, r0 + step)
        pb0, pb1 = (r0 * Wc) // 6, (r1 * Wc + 5) // 6
        _k.gather(xph, kh, kw, sh, ph, dh, joff, seg, pb0, pb1, xp, pb0, 0, C)
        _g.gemm(wf, 0, xp.reshape(-1), 0, ct, 0, K, MB, 0, MB, 0, pb1 - pb0, ldc)
        for r in range(r0, r1):
            for wo in range(Wp):
                d = ((r - lo) * Wp + wo) * ldc
                for v in range(nvec):
                    acc = vsplat_value(_NEG_INF)
                    for j in range(pkw):
                        w = wo * psw - ppw + j
                        if 0 <= w < Wc:
                            acc = vmax_nan(acc, vload(ct, (r * Wc + w - 6 * pb0) * ldc + 16 * v))
                    vstore(hm, d + 16 * v, acc)
    for ho in range(a, b):
        for v in range(nvec):
            for wo in range(Wp):
                acc = vsplat_value(_NEG_INF)
                for i in range(pkh):
                    r = ho * psh - pph + i
                    if 0 <= r < Hc:
                        acc = vmax_nan(acc, vload(hm, ((r - lo) * Wp + wo) * ldc + 16 * v))
                vstore(stage, 16 * wo, acc)
            epilogue.write_rows(stage, Wp + 16, 1, out, n, ho, bias, out, False, relu, 16 * v)
