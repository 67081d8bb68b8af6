"""Group norm as two compiled passes (numba): statistics, then one scale-and-shift write.

The numpy kernel (``norm.py``) makes ~8 passes with temporaries (mean, subtract, square, mean,
scale, weight, bias); on a U-Net's (1, 16, 128, 128) activation that was ~10x torch. Here each
(sample, group) is one contiguous block: one pass accumulates the sum and the sum of squares in
float64 around the block's first element (shifted data, so no catastrophic cancellation for
data far from zero), then one vectorizable pass writes ``x * a[c] + s[c]`` with
``a = rstd * weight``, ``s = bias - mean * a`` (torch's CPU kernel folds the same way).

Compiled at load by the matcher (``norm_match.py``); float32, C-contiguous input and output only,
anything else goes to the numpy kernel.
"""
from __future__ import annotations

import numba
import numpy as np

from . import jit as _J
from .jit import JIT

_F = np.float32
_SIG = ("void(float32[:, ::1], float32[::1], float32[::1], float32[:, ::1], float32[::1], float32[::1], "
        "int64, int64, float64)")


@numba.njit(**JIT)
def _group_norm(x, w, b, o, mean_out, rstd_out, C, groups, eps):
    """``x``, ``o``: (N * C, S) rows; ``w``, ``b``: (C,); ``mean_out``, ``rstd_out``: (N * groups,)."""
    rows, S = x.shape
    N = rows // C
    cpg = C // groups
    m = cpg * S
    for n in range(N):
        for g in range(groups):
            r0 = n * C + g * cpg
            k = np.float64(x[r0, 0]) if S > 0 else 0.0
            s0 = s1 = s2 = s3 = 0.0
            q0 = q1 = q2 = q3 = 0.0
            for r in range(r0, r0 + cpg):
                row = x[r]
                S4 = S - S % 4
                for i in range(0, S4, 4):
                    d0 = np.float64(row[i]) - k
                    d1 = np.float64(row[i + 1]) - k
                    d2 = np.float64(row[i + 2]) - k
                    d3 = np.float64(row[i + 3]) - k
                    s0 += d0
                    s1 += d1
                    s2 += d2
                    s3 += d3
                    q0 += d0 * d0
                    q1 += d1 * d1
                    q2 += d2 * d2
                    q3 += d3 * d3
                for i in range(S4, S):
                    d0 = np.float64(row[i]) - k
                    s0 += d0
                    q0 += d0 * d0
            s = (s0 + s1) + (s2 + s3)
            q = (q0 + q1) + (q2 + q3)
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
        self.kernel = _J.compiled(_group_norm, _SIG)

    def __call__(self, x, groups, weight, bias, eps, y, mean, rstd):
        N, C = x.shape[:2]
        rows = x.reshape(N * C, -1) if N * C else x.reshape(0, 0)
        self.kernel(rows, weight, bias, y.reshape(rows.shape), mean.reshape(-1), rstd.reshape(-1),
                    C, groups, float(eps))


# --- layer norm ---------------------------------------------------------------------------------
_LANES = 16
_LN_SIG = "void(float32[:, ::1], float32[::1], float32[::1], float32[:, ::1], float64)"
_LN_SIG_INPLACE = "void(float32[:, ::1], float32[::1], float32[::1], float64)"


@numba.njit(inline="always", **JIT)
def _row_sum(row, shift, acc):
    """``sum(row - shift)`` and ``sum((row - shift)^2)`` in float64, 16 independent lanes (a
    vectorized loop without reassociating any one sum)."""
    E = row.size
    E16 = E - E % _LANES
    for j in range(2 * _LANES):
        acc[j] = 0.0
    for i in range(0, E16, _LANES):
        for j in range(_LANES):
            d = np.float64(row[i + j]) - shift
            acc[j] += d
            acc[_LANES + j] += d * d
    s = 0.0
    q = 0.0
    for j in range(_LANES):
        s += acc[j]
        q += acc[_LANES + j]
    for i in range(E16, E):
        d = np.float64(row[i]) - shift
        s += d
        q += d * d
    return s, q


@numba.njit(inline="always", **JIT)
def _layer_norm_body(x, w, b, o, eps):
    """Rows of ``x`` (R, E) normalized into ``o`` (may be ``x``): statistics in float64 around the
    row's first element (as the group norm), then ``(x - mean) * rstd * w + b`` in float32."""
    R, E = x.shape
    acc = np.empty(2 * _LANES, np.float64)
    for r in range(R):
        row = x[r]
        k = np.float64(row[0]) if E > 0 else 0.0
        s, q = _row_sum(row, k, acc)
        dm = s / E
        var = q / E - dm * dm
        if var < 0.0:
            var = 0.0
        mean = _F(k + dm)
        rstd = _F(1.0 / np.sqrt(var + eps))
        orow = o[r]
        for i in range(E):
            orow[i] = (row[i] - mean) * rstd * w[i] + b[i]


@numba.njit(**JIT)
def _layer_norm(x, w, b, o, eps):
    _layer_norm_body(x, w, b, o, eps)


@numba.njit(**JIT)
def _layer_norm_inplace(x, w, b, eps):
    # one array: LLVM vectorizes the write (for two that alias, its overlap check picks the scalar loop)
    _layer_norm_body(x, w, b, x, eps)


class LayerNorm:
    """``run(x2, w, b, out2, eps)``: layer norm of the rows of 2-D float32 C-contiguous ``x2`` into
    ``out2`` (``out2`` may be ``x2``); ``w``, ``b`` float32 (E,). Compiled now."""

    def __init__(self):
        self.kernel = _J.compiled(_layer_norm, _LN_SIG)
        self.inplace = _J.compiled(_layer_norm_inplace, _LN_SIG_INPLACE)

    def __call__(self, x2, w, b, out2, eps):
        if out2.ctypes.data == x2.ctypes.data:
            self.inplace(x2, w, b, float(eps))
        else:
            self.kernel(x2, w, b, out2, float(eps))
