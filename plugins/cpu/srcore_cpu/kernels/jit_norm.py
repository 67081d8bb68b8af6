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
