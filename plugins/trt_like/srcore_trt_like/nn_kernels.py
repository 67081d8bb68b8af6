"""Compiled row kernels for the engine: softmax, log-softmax, layer norm, and multi-head
attention around BLAS matrix products.

Each works on rows of a 2-D C-contiguous float32 view: one pass for the row statistics, one
for the result, with :mod:`.fastmath`'s vectorizable ``exp``. ``layer_norm`` computes the
mean and variance in float32 two-pass form, as torch's CPU kernel does (within 1e-6 of it).
"""
from __future__ import annotations

import numba
import numpy as np

from . import fastmath
from .network import Layer, Network

# reductions (row sums) vectorize only if LLVM may reassociate them; NaN/inf handling is kept
_OPTS = dict(fastmath.jit_options(), cache=True, fastmath={"contract", "reassoc"})
f32 = np.float32


@numba.njit(**_OPTS)
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


@numba.njit(**_OPTS)
def softmax_rows(x, out, scale):
    """``out[r] = softmax(scale * x[r])`` for every row. ``out`` must not overlap ``x``: LLVM
    does not vectorize the loops when it cannot rule out the overlap (3x slower)."""
    n, m = x.shape
    for r in range(n):
        xr, orow = x[r], out[r]
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


@numba.njit(**_OPTS)
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


@numba.njit(**_OPTS)
def layer_norm_rows(x, w, b, eps, out):
    """``(x - mean) / sqrt(var + eps) * w + b`` over each row (biased variance, two passes)."""
    n, m = x.shape
    inv_m = f32(1.0) / f32(m)
    for r in range(n):
        xr, orow = x[r], out[r]
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


def softmax(layer: Layer, net: Network):
    """Softmax/log-softmax over the last dim (other dims: the numpy tactic); the plan never
    hands a layer overlapping input and output."""
    shape = net.shape(layer.inputs[0])
    if layer.attrs["dim"] != len(shape) - 1:
        return None
    m = shape[-1]
    one = f32(1.0)
    if layer.kind == "log_softmax":
        def run(x, out):
            log_softmax_rows(x.reshape(-1, m), out.reshape(-1, m))
    else:
        def run(x, out):
            softmax_rows(x.reshape(-1, m), out.reshape(-1, m), one)
    return run


def layer_norm(layer: Layer, net: Network):
    n, eps = layer.attrs["size"], f32(layer.attrs["eps"])
    w = layer.attrs["weight"] if layer.attrs["weight"] is not None else np.ones(n, f32)
    b = layer.attrs["bias"] if layer.attrs["bias"] is not None else np.zeros(n, f32)
    w, b = np.ascontiguousarray(w, f32), np.ascontiguousarray(b, f32)

    def run(x, out):
        layer_norm_rows(x.reshape(-1, n), w, b, eps, out.reshape(-1, n))
    return run


def attention(layer: Layer, net: Network):
    """Per batch and head: ``S = q k^T`` (BLAS, into a per-thread scratch), the scaled softmax
    in place (compiled), ``out[:, head] = P v`` (BLAS, written straight into the (L, E) layout)."""
    import threading

    B, L, E3 = net.shape(layer.inputs[0])
    E = E3 // 3
    H = layer.attrs["heads"]
    D = E // H
    scale = f32(layer.attrs["scale"])
    tls = threading.local()

    def run(qkv, out):
        try:
            s, p, t = tls.scratch
        except AttributeError:
            s, p, t = tls.scratch = np.empty((L, L), f32), np.empty((L, L), f32), np.empty((L, D), f32)
        for bi in range(B):
            x = qkv[bi]
            o = out[bi]
            for h in range(H):
                c = h * D
                np.dot(x[:, c:c + D], x[:, E + c:E + c + D].T, out=s)   # strided views: no copies
                softmax_rows(s, p, scale)
                np.dot(p, x[:, 2 * E + c:2 * E + c + D], out=t)
                o[:, c:c + D] = t
    run.blas = "openblas"
    return run


FACTORIES = {"softmax": softmax, "log_softmax": softmax, "layer_norm": layer_norm, "attention": attention}
