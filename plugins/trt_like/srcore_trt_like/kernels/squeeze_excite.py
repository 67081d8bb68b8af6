"""The squeeze-excite layer's compiled parts (``tactics/squeeze_excite.py``; ``kernels/block_split.py``
pools and excites inside a fused mobile block): the global average pool, the two small FCs with their
activations, the channel-wise scale, on NCHW planes and on NCHW16c blocks."""
from __future__ import annotations

import numpy as np
from numba import njit

from .activation import apply_span
from .jit import JIT
from .pool import row_sum8
from .simd import LANES, vadd, vload, vmul, vstore, vzero


@njit(**JIT)
def _pool(x, p):
    """``p[n, c] = mean(x[n, c])`` (``x`` as (N, C, H*W)), each plane by ``row_sum8``: with one
    running sum mobilenet_v3's 16x56x56 block pooled in 93 us, 12.5 us this way."""
    N, C, P = x.shape
    inv = np.float32(1.0) / np.float32(P)
    for n in range(N):
        for c in range(C):
            p[n, c] = row_sum8(x, n, c, P) * inv


@njit(**JIT)
def _scale(x, s, y):
    N, C, P = x.shape
    for n in range(N):
        for c in range(C):
            g = s[n, c]
            for i in range(P):
                y[n, c, i] = x[n, c, i] * g


@njit(**JIT)
def _pool_blocked(x, p, B, P, inv):
    """:func:`_pool` on NCHW16c ``x`` (flat, (B, H*W, 16) of one image; ``p`` (B * 16,); ``inv`` 1 / (H*W) in
    16 lanes): each lane summed
    as :func:`row_sum8` sums a plane (8 interleaved sums added pairwise: the same bits), in vectors."""
    P8 = P - P % 8
    for b in range(B):
        o = b * P * LANES
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = vzero()
        for i in range(0, P8 * LANES, 8 * LANES):
            a0 = vadd(a0, vload(x, o + i))
            a1 = vadd(a1, vload(x, o + i + 16))
            a2 = vadd(a2, vload(x, o + i + 32))
            a3 = vadd(a3, vload(x, o + i + 48))
            a4 = vadd(a4, vload(x, o + i + 64))
            a5 = vadd(a5, vload(x, o + i + 80))
            a6 = vadd(a6, vload(x, o + i + 96))
            a7 = vadd(a7, vload(x, o + i + 112))
        for i in range(P8 * LANES, P * LANES, LANES):
            a0 = vadd(a0, vload(x, o + i))
        total = vadd(vadd(vadd(a0, a1), vadd(a2, a3)), vadd(vadd(a4, a5), vadd(a6, a7)))
        vstore(p, b * LANES, vmul(total, vload(inv, 0)))


@njit(**JIT)
def _scale_blocked(x, s, y, B, P):
    """:func:`_scale` on NCHW16c ``x`` and ``y`` (flat, one image), ``s`` (B * 16,)."""
    for b in range(B):
        g = vload(s, b * LANES)
        o = b * P * LANES
        for i in range(o, o + P * LANES, LANES):
            vstore(y, i, vmul(vload(x, i), g))


@njit(**JIT)
def _excite(p, w1t, b1, w2t, b2, act, gate, h, g):
    """``g = gate(act(p @ w1t + b1) @ w2t + b2)`` of one image's pooled means ``p`` (C,): ``w1t``
    (C, R), ``w2t`` (R, C), ``h`` (R,) scratch; ``act``/``gate`` codes of :data:`..kernels.activation.CODES`
    (the activations' float32 formulas, as the in-place passes)."""
    C, R = w1t.shape
    for j in range(R):
        h[j] = b1[j]
    for c in range(C):
        pc = p[c]
        for j in range(R):
            h[j] += pc * w1t[c, j]
    apply_span(h, 0, R, act, np.float32(0.0))
    for c in range(C):
        g[c] = b2[c]
    for j in range(R):
        hj = h[j]
        for c in range(C):
            g[c] += hj * w2t[j, c]
    apply_span(g, 0, C, gate, np.float32(0.0))


@njit(**JIT)
def _se_blocked(x, y, B, P, inv, w1t, b1, w2t, b2, act, gate):
    """The layer on NCHW16c ``x``, ``y`` ((N, B * P * 16), each image flat); the padding
    channels' gate is 1."""
    C, R = w1t.shape
    p = np.empty(B * LANES, np.float32)
    s = np.ones(B * LANES, np.float32)
    h = np.empty(R, np.float32)
    for n in range(x.shape[0]):
        _pool_blocked(x[n], p, B, P, inv)
        _excite(p, w1t, b1, w2t, b2, act, gate, h, s[:C])
        _scale_blocked(x[n], s, y[n], B, P)


@njit(**JIT)
def _se_planes(x, y, w1t, b1, w2t, b2, act, gate):
    """The layer on NCHW ``x``, ``y`` as (N, C, H * W)."""
    N, C, _ = x.shape
    R = w1t.shape[1]
    p = np.empty((N, C), np.float32)
    g = np.empty((N, C), np.float32)
    h = np.empty(R, np.float32)
    _pool(x, p)
    for n in range(N):
        _excite(p[n], w1t, b1, w2t, b2, act, gate, h, g[n])
    _scale(x, g, y)
