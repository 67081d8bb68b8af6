"""Compiled resizing of (planes, H, W) float32 arrays from precomputed index tables (one pass over
the output: numpy's version makes two full-size temporaries per dim)."""
from __future__ import annotations

import numba
import numpy as np

from .jit import JIT

f32 = np.float32


@numba.njit(**JIT)
def nearest_planes(x, h, w, out):
    """``out[p, i, j] = x[p, h[i], w[j]]``."""
    P, Ho, Wo = out.shape
    for p in range(P):
        for i in range(Ho):
            row = x[p, h[i]]
            o = out[p, i]
            for j in range(Wo):
                o[j] = row[w[j]]


@numba.njit(**JIT)
def bilinear_planes(x, h0, h1, lh, w0, w1, lw, out):
    """Bilinear: the two rows blended by ``lh``, then the two columns by ``lw`` (ATen's order of
    weights: ``(1 - l) * a + l * b`` per dim)."""
    P, Ho, Wo = out.shape
    W = x.shape[2]
    tmp = np.empty(W, np.float32)
    one = f32(1.0)
    for p in range(P):
        for i in range(Ho):
            a, b = x[p, h0[i]], x[p, h1[i]]
            l1 = lh[i]
            l0 = one - l1
            for k in range(W):
                tmp[k] = a[k] * l0 + b[k] * l1
            o = out[p, i]
            for j in range(Wo):
                m1 = lw[j]
                o[j] = tmp[w0[j]] * (one - m1) + tmp[w1[j]] * m1


@numba.njit(**JIT)
def linear_rows(x, i0, i1, l1, out):
    """1-D linear resizing of the last dim (``upsample_linear1d``): ``(1 - l1[j]) * x[p, i0[j]] +
    l1[j] * x[p, i1[j]]``, ATen's two taps per output and nothing else (a 2-D kernel's unit weight on
    the other dim would turn an infinity into NaN)."""
    P, Wo = out.shape
    one = f32(1.0)
    for p in range(P):
        row = x[p]
        o = out[p]
        for j in range(Wo):
            m1 = l1[j]
            o[j] = row[i0[j]] * (one - m1) + row[i1[j]] * m1


@numba.njit(**JIT)
def nearest_add_planes(a, x, h, w, relu, out):
    """``out[p, i, j] = a[p, i, j] + x[p, h[i], w[j]]``, then ``max(0, .)`` if ``relu`` (NaN kept)."""
    P, Ho, Wo = out.shape
    zero = f32(0.0)
    for p in range(P):
        for i in range(Ho):
            row, ar, o = x[p, h[i]], a[p, i], out[p, i]
            for j in range(Wo):
                v = ar[j] + row[w[j]]
                o[j] = zero if relu and v < zero else v
