"""Compiled row kernels: softmax, log-softmax and layer norm over the rows of a 2-D view, group
norm over the (channels of a group x spatial) rows of a 3-D view.

Each works on rows of a 2-D C-contiguous float32 view: one pass for the row statistics, one
for the result, with :mod:`.fastmath`'s vectorizable ``exp``. ``layer_norm`` computes the
mean and variance in float32 two-pass form, as torch's CPU kernel does (within 1e-6 of it);
``rms_norm`` the mean of squares alone (the fused written-out RMSNorm, ``builder/norm_fusion.py``).
"""
from __future__ import annotations

import numba
import numpy as np

from . import fastmath, simd
from .activation import apply_span
from .jit import ROWS_JIT

f32 = np.float32


#: softmax's exponents at or below this skip exp in the vector pass: exp(-87.33) is about float32's
#: smallest normal; below it ``fastmath.exp`` scales down into a subnormal, a microcode assist per
#: element, and BERT's masked keys (scores - 10000, far below) made the row cost 1.8x. Those give 0
#: there; the few in (:data:`_EXP_LO`, floor], whose results are subnormal (torch's too), are
#: counted and computed afterwards one by one (rare: the assist is paid only where it is needed)
_EXP_FLOOR = f32(-87.33)
#: below this float32's exp is 0 (``fastmath.exp``: subnormals down to -103.3)
_EXP_LO = f32(-104.0)


@numba.njit(**ROWS_JIT)
def _row_max(xr, scale, scratch):
    """max(scale * xr), NaN-propagating; 16-lane vectors (LLVM does not vectorize a select
    reduction without no-NaN flags: as a scalar scan the max cost more than the exp pass).
    ``scratch`` (>= 16 floats) takes the lanes for the final scan."""
    m = xr.shape[0]
    mx = f32(-np.inf)
    j = 0
    if m >= 16:
        sv = simd.vsplat_value(scale)
        acc = simd.vmul(simd.vload(xr, 0), sv)
        j = 16
        while j + 16 <= m:
            acc = simd.vmax_nan(acc, simd.vmul(simd.vload(xr, j), sv))
            j += 16
        simd.vstore(scratch, 0, acc)
        for lane in range(16):
            v = scratch[lane]
            mx = v if (v > mx or v != v) else mx
    while j < m:
        v = xr[j] * scale
        mx = v if (v > mx or v != v) else mx
        j += 1
    return mx


@numba.njit(**ROWS_JIT)
def max_rows(x, out, sign):
    """``out[r] = sign * max(sign * x[r])`` over the rows of a 2-D C-contiguous view: ``amax`` (sign
    1) or ``amin`` (-1) over trailing dims, NaN-propagating (numpy's reduce over rows of 25: ~0.2 us
    a row in its loop setup). Rows are offsets into the flat array, each 16-lane vectors, its tail
    one masked vector and the lanes reduced by shuffles: a point cloud's max over 40 points per
    channel cost ~33 ns a row as :func:`_row_max` calls on row slices, ~5 here."""
    m = x.shape[1]
    xf = x.reshape(-1)
    sv = simd.vsplat_value(sign)
    for r in range(x.shape[0]):
        b = r * m
        j = min(m, 16)
        if j == 0:
            out[r] = -sign * np.inf
            continue
        acc = simd.vmul(simd.vload_lanes(xf, b, j), sv)
        if j < 16:   # (lanes past the row: a copy of its first element, which changes no max)
            acc = simd.vmax_nan_lanes(simd.vsplat_value(xf[b] * sign), acc, j)
        while j + 16 <= m:
            acc = simd.vmax_nan(acc, simd.vmul(simd.vload(xf, b + j), sv))
            j += 16
        if j < m:
            acc = simd.vmax_nan_lanes(acc, simd.vmul(simd.vload_lanes(xf, b + j, m - j), sv), m - j)
        out[r] = sign * simd.vhmax_nan(acc)


@numba.njit(**ROWS_JIT)
def softmax_row(xr, orow, scale):
    """``orow = softmax(scale * xr)`` (one row: :func:`softmax_rows` and the split drivers)."""
    _softmax_row(xr, orow, scale, orow if xr.shape[0] >= 16 else xr)


@numba.njit(**ROWS_JIT)
def _softmax_row(xr, orow, scale, scratch):
    """``orow = softmax(scale * xr)``; ``scratch`` (>= 16 floats, or unused for rows under 16) is
    written before ``xr`` is read again: the caller's ``orow`` when it does not overlap ``xr``."""
    m = xr.shape[0]
    mx = _row_max(xr, scale, scratch)
    if mx == f32(-np.inf):   # a row of -inf: exp(-inf - 0) = 0 and the sum 0, as torch (NaN)
        mx = f32(0.0)
    s = f32(0.0)
    sub = f32(0.0)
    for j in range(m):
        t = xr[j] * scale - mx
        e = fastmath.exp(t if t > _EXP_FLOOR else _EXP_FLOOR)
        e = e if t > _EXP_FLOOR else f32(0.0)
        e = e if t == t else t
        orow[j] = e
        s += e
    for j in range(m):
        t = xr[j] * scale - mx
        sub += f32(1.0) if (t <= _EXP_FLOOR and t > _EXP_LO) else f32(0.0)
    if sub > f32(0.0):
        for j in range(m):
            t = xr[j] * scale - mx
            if t <= _EXP_FLOOR and t > _EXP_LO:
                e = fastmath.exp(t)
                orow[j] = e
                s += e
    inv = f32(1.0) / s
    for j in range(m):
        orow[j] *= inv


@numba.njit(**ROWS_JIT)
def softmax_rows(x, out, scale):
    """``out[r] = softmax(scale * x[r])`` for every row. ``out`` must not overlap ``x``: LLVM
    does not vectorize the loops when it cannot rule out the overlap (3x slower)."""
    for r in range(x.shape[0]):
        softmax_row(x[r], out[r], scale)


@numba.njit(**ROWS_JIT)
def softmax_rows_biased(x, out, c, divide, bias, bias_step, safe):
    """``out[r] = softmax(x[r] / c + bias[r * bias_step])`` (``divide``) or ``x[r] * c + ...``:
    attention's scaled scores plus an additive mask (``bias_step`` 0: one mask row for every row),
    in torch's order (scale, add, then softmax). ``safe``: a row whose every score is -inf gives
    zeros (``scaled_dot_product_attention``'s fully masked rows), not ``softmax``'s NaN. ``out``
    must not overlap ``x`` (3x slower)."""
    m = x.shape[1]
    scratch = np.empty(16, np.float32)
    for r in range(x.shape[0]):
        xr, br, o = x[r], bias[r * bias_step], out[r]
        if divide:
            for j in range(m):
                o[j] = xr[j] / c + br[j]
        else:
            for j in range(m):
                o[j] = xr[j] * c + br[j]
        mx = _row_max(o, f32(1.0), scratch)
        if mx == f32(-np.inf):
            mx = f32(0.0)
        # in place on the one array o (two arguments that may alias would send LLVM's loops to
        # their scalar path); the subnormal fix-up below recomputes its exponents from x and bias
        s = f32(0.0)
        sub = f32(0.0)
        for j in range(m):
            t = o[j] - mx
            e = fastmath.exp(t if t > _EXP_FLOOR else _EXP_FLOOR)
            e = e if t > _EXP_FLOOR else f32(0.0)
            e = e if t == t else t
            o[j] = e
            s += e
            sub += f32(1.0) if (t <= _EXP_FLOOR and t > _EXP_LO) else f32(0.0)
        if sub > f32(0.0):
            for j in range(m):
                t = (xr[j] / c + br[j] if divide else xr[j] * c + br[j]) - mx
                if t <= _EXP_FLOOR and t > _EXP_LO:
                    e = fastmath.exp(t)
                    o[j] = e
                    s += e
        # a row of -inf sums to 0 (every other row to >= 1, or NaN)
        inv = f32(0.0) if (safe and s == f32(0.0)) else f32(1.0) / s
        for j in range(m):
            o[j] *= inv


@numba.njit(**ROWS_JIT)
def softmax_block_biased(x, out, c, divide, bias, bias_step, mxs, safe):
    """:func:`softmax_rows_biased` (the same formulas) for short rows (under 16: a row's loops never
    fill a vector): the scaled, biased scores minus their row's max are written row by row, then
    exponentiated in one pass over the whole C-contiguous block, which vectorizes. ``mxs`` (>= rows
    floats) takes the row maxima; ``safe`` as there."""
    n, m = x.shape
    for r in range(n):
        xr, br, o = x[r], bias[r * bias_step], out[r]
        mx = f32(-np.inf)
        for j in range(m):
            v = xr[j] / c + br[j] if divide else xr[j] * c + br[j]
            o[j] = v
            mx = v if (v > mx or v != v) else mx
        if mx == f32(-np.inf):
            mx = f32(0.0)
        mxs[r] = mx
        for j in range(m):
            o[j] = o[j] - mx
    flat = out.reshape(n * m)
    sub = f32(0.0)
    for i in range(n * m):
        t = flat[i]
        e = fastmath.exp(t if t > _EXP_FLOOR else _EXP_FLOOR)
        e = e if t > _EXP_FLOOR else f32(0.0)
        e = e if t == t else t
        sub += f32(1.0) if (t <= _EXP_FLOOR and t > _EXP_LO) else f32(0.0)
        flat[i] = e
    for r in range(n):
        xr, br, o = x[r], bias[r * bias_step], out[r]
        if sub > f32(0.0):
            for j in range(m):
                t = (xr[j] / c + br[j] if divide else xr[j] * c + br[j]) - mxs[r]
                if t <= _EXP_FLOOR and t > _EXP_LO:
                    o[j] = fastmath.exp(t)
        s = f32(0.0)
        for j in range(m):
            s += o[j]
        inv = f32(0.0) if (safe and s == f32(0.0)) else f32(1.0) / s
        for j in range(m):
            o[j] *= inv


#: rows of one block of the block drivers below: ~16 KB of floats, so a block's three passes stay in L1
BLOCK_FLOATS = 4096


@numba.njit(**ROWS_JIT)
def softmax_blocks(x3, out3, zero, mxs):
    """:func:`softmax_block_biased` (scale 1, no bias: ``zero`` is one row of zeros) over each block
    ``x3[b]`` of rows: the plain softmax layer's rows of 16-64, which the per-row loops take 2.6x
    longer over (a 20-key row never fills the loops' vectors)."""
    for b in range(x3.shape[0]):
        softmax_block_biased(x3[b], out3[b], f32(1.0), False, zero, 0, mxs, False)


@numba.njit(**ROWS_JIT)
def log_softmax_block(x, out, e):
    """:func:`log_softmax_rows` (the same formulas) for short rows: ``x - max`` row by row, the
    exponents of the whole C-contiguous block in one vectorized pass into ``e`` (>= the block's
    size; exponents at or below :data:`_EXP_FLOOR` count 0: next to the row max's 1 they do not
    change the float32 sum), then each row's ``(x - max) - log(sum)``."""
    n, m = x.shape
    for r in range(n):
        xr, o = x[r], out[r]
        mx = _row_max(xr, f32(1.0), o)
        if mx == f32(-np.inf):
            mx = f32(0.0)
        for j in range(m):
            o[j] = xr[j] - mx
    flat = out.reshape(n * m)
    for i in range(n * m):
        t = flat[i]
        ex = fastmath.exp(t if t > _EXP_FLOOR else _EXP_FLOOR)
        ex = ex if t > _EXP_FLOOR else f32(0.0)
        e[i] = ex if t == t else t
    for r in range(n):
        o = out[r]
        s = f32(0.0)
        for j in range(m):
            s += e[r * m + j]
        ls = fastmath.log(s)
        for j in range(m):
            o[j] = o[j] - ls


@numba.njit(**ROWS_JIT)
def log_softmax_blocks(x3, out3, e):
    """:func:`log_softmax_block` over each block ``x3[b]`` of rows."""
    for b in range(x3.shape[0]):
        log_softmax_block(x3[b], out3[b], e)


@numba.njit(**ROWS_JIT)
def softmax_short_rows(x, out, log, t, mxs, sums):
    """Softmax (``log``: log-softmax) over short rows (under 16 floats: a row's own loops never
    fill a vector, and the per-row work cost more than the exps; SSD's 504 rows of 5 classes
    took 7.4 us, 3.4 us here). The block is transposed into ``t`` (rows * m floats), so every
    pass runs across rows in vectors, and transposed back into ``out``. ``mxs``, ``sums``: >= rows
    floats. The formulas are :func:`softmax_row`'s and :func:`log_softmax_rows`' (sums left to right)."""
    n, m = x.shape
    xf, of = x.reshape(n * m), out.reshape(n * m)
    for j in range(m):    # (column-outer both ways: the strided side is the cheaper one here)
        for r in range(n):
            t[j * n + r] = xf[r * m + j]
    for r in range(n):
        mxs[r] = t[r]
    for j in range(1, m):
        for r in range(n):
            v, c = t[j * n + r], mxs[r]
            mxs[r] = v if (v > c or v != v) else c
    for r in range(n):
        mxs[r] = f32(0.0) if mxs[r] == f32(-np.inf) else mxs[r]
        sums[r] = f32(0.0)
    sub = f32(0.0)
    for j in range(m):
        for r in range(n):
            d = t[j * n + r] - mxs[r]
            e = fastmath.exp(d if d > _EXP_FLOOR else _EXP_FLOOR)
            e = e if d > _EXP_FLOOR else f32(0.0)
            e = e if d == d else d
            sub += f32(1.0) if (d <= _EXP_FLOOR and d > _EXP_LO) else f32(0.0)
            t[j * n + r] = e
            sums[r] += e
    if sub > f32(0.0):   # subnormal results, one by one (see _EXP_FLOOR)
        for r in range(n):
            sums[r] = f32(0.0)
            for j in range(m):
                d = xf[r * m + j] - mxs[r]
                if d <= _EXP_FLOOR and d > _EXP_LO:
                    t[j * n + r] = fastmath.exp(d)
                sums[r] += t[j * n + r]
    if log:
        # torch's order, (x - max) - log(sum) (see log_softmax_rows)
        for r in range(n):
            sums[r] = fastmath.log(sums[r])
        for j in range(m):
            for r in range(n):
                of[r * m + j] = (xf[r * m + j] - mxs[r]) - sums[r]
    else:
        for r in range(n):
            sums[r] = f32(1.0) / sums[r]
        for j in range(m):
            for r in range(n):
                of[r * m + j] = t[j * n + r] * sums[r]


@numba.njit(**ROWS_JIT)
def log_softmax_rows(x, out):
    n, m = x.shape
    for r in range(n):
        xr, orow = x[r], out[r]
        mx = _row_max(xr, f32(1.0), orow)
        if mx == f32(-np.inf):
            mx = f32(0.0)
        s = f32(0.0)
        for j in range(m):
            s += fastmath.exp(xr[j] - mx)
        # torch's order, (x - max) - log(sum): max + log(sum) rounded first loses the low bits of
        # every result when max is large (x = 90: an error of ulp(90), 40 ulp of a result ~0.4)
        ls = fastmath.log(s)
        for j in range(m):
            orow[j] = (xr[j] - mx) - ls


@numba.njit(**ROWS_JIT)
def layer_norm_row(xr, w, b, eps, orow):
    """Layer norm of one row (:func:`layer_norm_rows` and the split drivers)."""
    m = xr.shape[0]
    inv_m = f32(1.0) / f32(m)
    s = f32(0.0)
    for j in range(m):
        s += xr[j]
    mu = s * inv_m
    q = f32(0.0)
    for j in range(m):
        d = xr[j] - mu
        q += d * d
    rstd = f32(1.0) / np.sqrt(q * inv_m + eps)
    for j in range(m):
        orow[j] = (xr[j] - mu) * rstd * w[j] + b[j]


@numba.njit(**ROWS_JIT)
def layer_norm_rows(x, w, b, eps, out):
    """``(x - mean) / sqrt(var + eps) * w + b`` over each row (biased variance, two passes)."""
    for r in range(x.shape[0]):
        layer_norm_row(x[r], w, b, eps, out[r])


@numba.njit(**ROWS_JIT)
def channel_norm_planes(x, w, b, eps, out, mu, rs):
    """Layer norm over the channels of each position of ``x`` (N, C, P): the mean and biased variance
    of ``x[n, :, p]`` (two passes, float32, as :func:`layer_norm_row`), then ``* w[c] + b[c]``; the
    statistics of a whole plane at once (``mu``, ``rs``: P floats), so every pass runs along P."""
    N, C, P = x.shape
    inv = f32(1.0) / f32(C)
    for n in range(N):
        for p in range(P):
            mu[p] = f32(0.0)
            rs[p] = f32(0.0)
        for c in range(C):
            for p in range(P):
                mu[p] += x[n, c, p]
        for p in range(P):
            mu[p] *= inv
        for c in range(C):
            for p in range(P):
                d = x[n, c, p] - mu[p]
                rs[p] += d * d
        for p in range(P):
            rs[p] = f32(1.0) / np.sqrt(rs[p] * inv + eps)
        for c in range(C):
            wc, bc = w[c], b[c]
            for p in range(P):
                out[n, c, p] = (x[n, c, p] - mu[p]) * rs[p] * wc + bc


@numba.njit(**ROWS_JIT)
def rms_norm_rows(x, w, eps, out):
    """``x / sqrt(mean(x * x) + eps) * w`` over each row (layer norm without the mean; the mean of
    squares divides the float32 sum by the count, as torch's ``mean``)."""
    m = x.shape[1]
    fm = f32(m)
    for r in range(x.shape[0]):
        xr, orow = x[r], out[r]
        q = f32(0.0)
        for j in range(m):
            q += xr[j] * xr[j]
        rstd = f32(1.0) / np.sqrt(q / fm + eps)
        for j in range(m):
            orow[j] = xr[j] * rstd * w[j]


@numba.njit(**ROWS_JIT)
def group_norm_rows(x, w, b, eps, out, code, slope):
    """Group norm of ``x`` (N * G, C / G, S): each row's mean and biased variance over its
    C / G x S values (two passes, float32, as layer norm), then ``x * a + c`` per channel with
    ``a = rstd * w``, ``c = b - mean * a`` (torch's CPU kernel folds the affine the same way);
    ``w``, ``b`` are (G, C / G). Activation ``code`` (``activation.CODES``, ``slope`` leaky relu's)
    is applied to each channel's values as they are written, still in L1."""
    n, cg, sp = x.shape
    groups = w.shape[0]
    inv = f32(1.0) / f32(cg * sp)
    for r in range(n):
        g = r % groups
        s = f32(0.0)
        for c in range(cg):
            for j in range(sp):
                s += x[r, c, j]
        mu = s * inv
        q = f32(0.0)
        for c in range(cg):
            for j in range(sp):
                d = x[r, c, j] - mu
                q += d * d
        rstd = f32(1.0) / np.sqrt(q * inv + eps)
        for c in range(cg):
            a = rstd * w[g, c]
            k = b[g, c] - mu * a
            orow = out[r, c]
            for j in range(sp):
                orow[j] = x[r, c, j] * a + k
            if code != 0:
                apply_span(orow, 0, sp, code, slope)
