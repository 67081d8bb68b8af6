"""Group norm as two compiled passes (numba): statistics, then one scale-and-shift write.

The numpy kernel (``norm.py``) makes ~8 passes with temporaries (mean, subtract, square, mean,
scale, weight, bias); on a U-Net's (1, 16, 128, 128) activation that was ~10x torch. Here each
(sample, group) is one contiguous block: one pass accumulates the sum and the sum of squares
around the mean of the block's first 16 elements (shifted data, so no catastrophic cancellation
for data far from zero; a second pass around the mean where that shift lies far from it) in float32 vector lanes
(``simd_vec``) over chunks of 512 elements, float64 across chunks (float64 lanes throughout ran
4x slower: 192 against 45 us on 128 x 3199, Sapphire Rapids), then one vectorizable pass writes ``x * a[c] + s[c]`` with
``a = rstd * weight``, ``s = bias - mean * a`` (torch's CPU kernel folds the same way).

Compiled at load by the matcher (``norm_match.py``); float32, C-contiguous input and output only,
anything else goes to the numpy kernel.
"""
from __future__ import annotations

import numba
import numpy as np

from srcore.plugin import simd_conv, simd_vec

from . import jit as _J
from .jit import JIT
from .aliasing import same_start

vadd, vfma, vload, vsplat, vstore = simd_vec.vadd, simd_vec.vfma, simd_vec.vload, simd_vec.vsplat, simd_vec.vstore

_F = np.float32
#: elements a float32 vector lane pair sums before the float64 total (16 per lane at 16 lanes)
_CHUNK = 512


def _sig(lanes: int) -> str:
    tag = "float32[:, ::1]" if lanes == 16 else "float32[::1]"   # simd_vec's width tag
    return ("void(float32[:, ::1], float32[::1], float32[::1], float32[:, ::1], float32[::1], float32[::1], "
            f"int64, int64, float64, {tag}, int64)")


@numba.njit(inline="always", **JIT)
def _block_sums(xf, b0, b1, k, tag, nl, buf):
    """``sum(x - k)`` and ``sum((x - k)^2)`` over ``xf[b0:b1]``: float32 vector lanes (the
    differences in float32) over chunks of :data:`_CHUNK`, float64 across chunks."""
    nk = vsplat(tag, -k)
    z = vsplat(tag, 0.0)
    s = q = 0.0
    bv = b0 + (b1 - b0) // (2 * nl) * (2 * nl)
    for c0 in range(b0, bv, _CHUNK):
        s0, s1, q0, q1 = z, z, z, z
        for i in range(c0, min(bv, c0 + _CHUNK), 2 * nl):
            d0 = vadd(vload(xf, i, z), nk)
            d1 = vadd(vload(xf, i + nl, z), nk)
            s0 = vadd(s0, d0)
            s1 = vadd(s1, d1)
            q0 = vfma(d0, d0, q0)
            q1 = vfma(d1, d1, q1)
        vstore(buf, 0, vadd(s0, s1))
        vstore(buf, nl, vadd(q0, q1))
        for j in range(nl):
            s += buf[j]
            q += buf[nl + j]
    for i in range(bv, b1):
        d = np.float64(xf[i] - k)
        s += d
        q += d * d
    return s, q


#: elements whose mean is the shift of a row's or group's sums (:func:`_shift`)
_SHIFT_ELEMENTS = 16


@numba.njit(inline="always", **JIT)
def _shift(xf, b0, m):
    """The value the sums of ``xf[b0:b0 + m]`` are taken around: the mean of its first
    :data:`_SHIFT_ELEMENTS` elements. One element lay more than a standard deviation from the mean
    in about a third of audio_conv1d's group-norm rows, each then summed a second time."""
    n = min(m, _SHIFT_ELEMENTS)
    if n <= 0:
        return _F(0.0)
    t = _F(0.0)
    for i in range(b0, b0 + n):
        t += xf[i]
    return _F(t / _F(n))


@numba.njit(**JIT)
def _group_norm(x, w, b, o, mean_out, rstd_out, C, groups, eps, tag, nl):
    """``x``, ``o``: (N * C, S) rows; ``w``, ``b``: (C,); ``mean_out``, ``rstd_out``: (N * groups,);
    ``tag``, ``nl``: the vector width (``simd_vec``)."""
    rows, S = x.shape
    N = rows // C
    cpg = C // groups
    m = cpg * S
    xf = x.reshape(-1)   # a group's rows are one contiguous block
    buf = np.empty(2 * nl, np.float32)
    for n in range(N):
        for g in range(groups):
            r0 = n * C + g * cpg
            b0 = r0 * S
            k = _shift(xf, b0, m)
            s, q = _block_sums(xf, b0, b0 + m, k, tag, nl, buf)
            dm = s / m
            var = q / m - dm * dm
            if dm * dm > var:
                # the first element far from the mean: q / m - dm^2 cancels; again around the mean
                # (the group is in cache)
                k = _F(k + dm)
                s, q = _block_sums(xf, b0, b0 + m, k, tag, nl, buf)
                dm = s / m
                var = q / m - dm * dm
            if var < 0.0:
                var = 0.0
            mean = k + dm
            rstd = 1.0 / np.sqrt(var + eps)
            mean_out[n * groups + g] = mean
            rstd_out[n * groups + g] = rstd
            for c in range(cpg):
                a = rstd * w[g * cpg + c]
                sh = _F(b[g * cpg + c] - mean * a)
                af = _F(a)
                row = x[r0 + c]
                orow = o[r0 + c]
                for i in range(S):
                    orow[i] = row[i] * af + sh


class GroupNorm:
    """``run(x, groups, weight, bias, eps, y, mean, rstd)``: the compiled kernel, compiled now."""

    def __init__(self):
        self.lanes = simd_conv.lanes()
        self.tag = np.zeros((1, 1) if self.lanes == 16 else 1, np.float32)
        self.kernel = _J.compiled(_group_norm, _sig(self.lanes))

    def __call__(self, x, groups, weight, bias, eps, y, mean, rstd):
        N, C = x.shape[:2]
        rows = x.reshape(N * C, -1) if N * C else x.reshape(0, 0)
        self.kernel(rows, weight, bias, y.reshape(rows.shape), mean.reshape(-1), rstd.reshape(-1),
                    C, groups, float(eps), self.tag, self.lanes)


# --- layer norm ---------------------------------------------------------------------------------
def _ln_sig(lanes: int, inplace: bool) -> str:
    tag = "float32[:, ::1]" if lanes == 16 else "float32[::1]"
    out = "" if inplace else "float32[:, ::1], "
    return f"void(float32[:, ::1], float32[::1], float32[::1], {out}float64, {tag}, int64)"


@numba.njit(inline="always", **JIT)
def _layer_norm_body(x, w, b, o, eps, tag, nl):
    """Rows of ``x`` (R, E) normalized into ``o`` (may be ``x``): each row's sums around the mean of
    its first elements (:func:`_shift`) in float32 vector lanes, float64 across chunks
    (:func:`_block_sums`, as the group norm; again around the mean when that shift lies far from
    it), then ``(x - mean) * rstd * w + b``
    in float32. Float64 lanes per element took 1.6x as long (26 against 16 us CPU time on
    bert_encoder's (128, 256) rows, Sapphire Rapids, loaded machine)."""
    R, E = x.shape
    xf = x.reshape(-1)
    buf = np.empty(2 * nl, np.float32)
    for r in range(R):
        b0 = r * E
        k = _shift(xf, b0, E)
        s, q = _block_sums(xf, b0, b0 + E, k, tag, nl, buf)
        dm = s / E
        var = q / E - dm * dm
        if dm * dm > var:
            k = _F(k + dm)
            s, q = _block_sums(xf, b0, b0 + E, k, tag, nl, buf)
            dm = s / E
            var = q / E - dm * dm
        if var < 0.0:
            var = 0.0
        mean = _F(k + dm)
        rstd = _F(1.0 / np.sqrt(var + eps))
        row = x[r]
        orow = o[r]
        for i in range(E):
            orow[i] = (row[i] - mean) * rstd * w[i] + b[i]


@numba.njit(**JIT)
def _layer_norm(x, w, b, o, eps, tag, nl):
    _layer_norm_body(x, w, b, o, eps, tag, nl)


@numba.njit(**JIT)
def _layer_norm_inplace(x, w, b, eps, tag, nl):
    # one array: LLVM vectorizes the write (for two that alias, its overlap check picks the scalar loop)
    _layer_norm_body(x, w, b, x, eps, tag, nl)


class LayerNorm:
    """``run(x2, w, b, out2, eps)``: layer norm of the rows of 2-D float32 C-contiguous ``x2`` into
    ``out2`` (``out2`` may be ``x2``); ``w``, ``b`` float32 (E,). Compiled now."""

    def __init__(self):
        self.lanes = simd_conv.lanes()
        self.tag = np.zeros((1, 1) if self.lanes == 16 else 1, np.float32)
        self.kernel = _J.compiled(_layer_norm, _ln_sig(self.lanes, False))
        self.inplace = _J.compiled(_layer_norm_inplace, _ln_sig(self.lanes, True))

    def __call__(self, x2, w, b, out2, eps):
        if same_start(out2, x2):
            self.inplace(x2, w, b, float(eps), self.tag, self.lanes)
        else:
            self.kernel(x2, w, b, out2, float(eps), self.tag, self.lanes)
