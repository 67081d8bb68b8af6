"""Compiled row kernels: softmax, log-softmax and layer norm over the rows of a 2-D view, group
norm over the (channels of a group x spatial) rows of a 3-D view.

Each works on rows of a 2-D C-contiguous float32 view: one pass for the row statistics, one
for the result, with :mod:`.fastmath`'s vectorizable ``exp``. ``layer_norm`` computes the
mean and variance in float32 two-pass form, as torch's CPU kernel does (within 1e-6 of it).
"""
from __future__ import annotations

import numba
import numpy as np

from . import fastmath
from .jit import ROWS_JIT

f32 = np.float32


@numba.njit(**ROWS_JIT)
def _row_max(xr, scale):
    """max(scale * xr); 16 running maxima so that LLVM vectorizes the scan (a plain select
    reduction stays scalar without no-NaN flags)."""
    acc = np.full(16, f32(-np.inf), dtype=np.float32)
    m = xr.shape[0]
    j = 0
    while j + 16 <= m:
        for lane in range(16):
            v = xr[j + lane] * scale
            acc[lane] = v if v > acc[lane] else acc[lane]
        j += 16
    mx = f32(-np.inf)
    for lane in range(16):
        mx = acc[lane] if acc[lane] > mx else mx
    while j < m:
        v = xr[j] * scale
        mx = v if v > mx else mx
        j += 1
    return mx


@numba.njit(**ROWS_JIT)
def softmax_row(xr, orow, scale):
    """``orow = softmax(scale * xr)`` (one row: :func:`softmax_rows` and the split drivers)."""
    m = xr.shape[0]
    mx = _row_max(xr, scale)
    if mx == f32(-np.inf):   # a row of -inf: exp(-inf - 0) = 0 and the sum 0, as torch (NaN)
        mx = f32(0.0)
    s = f32(0.0)
    for j in range(m):
        e = fastmath.exp(xr[j] * scale - mx)
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
def log_softmax_rows(x, out):
    n, m = x.shape
    for r in range(n):
        xr, orow = x[r], out[r]
        mx = _row_max(xr, f32(1.0))
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
def group_norm_rows(x, w, b, eps, out):
    """Group norm of ``x`` (N * G, C / G, S): each row's mean and biased variance over its
    C / G x S values (two passes, float32, as layer norm), then ``x * a + c`` per channel with
    ``a = rstd * w``, ``c = b - mean * a`` (torch's CPU kernel folds the affine the same way);
    ``w``, ``b`` are (G, C / G)."""
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
            for j in range(sp):
                out[r, c, j] = x[r, c, j] * a + k
