"""The fused squeeze-excite layer (``builder/fusion.py``'s ``fuse_squeeze_excite``): the global
average pool, the two small FCs with their activations and the channel-wise scale in one step:
one read of the block input for the pool, one read and one write for the scale, no intermediates
in the arena and one layer dispatch instead of five."""
from __future__ import annotations

import numpy as np
from numba import njit

from ..builder.network import Layer, Network
from ..kernels import activation as _activation
from ..kernels.jit import JIT
from ..kernels.pool import row_sum8
from ..kernels.simd import LANES, vadd, vload, vmul, vstore, vzero


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


def squeeze_excite(layer: Layer, net: Network):
    """``y = x * gate(W2 act(W1 mean_hw(x) + b1) + b2)`` (per image and channel)."""
    a = layer.attrs
    w1t, b1, w2t, b2 = np.ascontiguousarray(a["w1"].T), a["b1"], np.ascontiguousarray(a["w2"].T), a["b2"]
    act = _activation.in_place(a["act"]) if a["act"] != "relu" else None
    relu = a["act"] == "relu"
    gate = _activation.in_place(a["gate"])

    def excite(p):
        """The gates ``gate(W2 act(W1 p + b1) + b2)`` of pooled means ``p`` (N, C)."""
        h = p @ w1t
        h += b1
        if relu:
            np.maximum(h, 0, out=h)
        elif act is not None:
            act(h)
        g = h @ w2t
        g += b2
        gate(g)
        return g

    if "nchwc" in a:   # NCHW16c in and out (builder/layout.py): the padding channels' gate is 1
        N, C = a["x_shape"][:2]
        B, L = net.shape(layer.inputs[0])[1], net.shape(layer.inputs[0])[4]

        P = int(np.prod(a["x_shape"][2:]))
        inv = np.full(L, np.float32(1.0) / np.float32(P), np.float32)

        def run_blocked(x, y):
            xf, yf = x.reshape(N, -1), y.reshape(N, -1)
            p = np.empty((N, B * L), np.float32)
            for n in range(N):
                _pool_blocked(xf[n], p[n], B, P, inv)
            s = np.ones((N, B * L), np.float32)
            s[:, :C] = excite(p[:, :C])
            for n in range(N):
                _scale_blocked(xf[n], s[n], yf[n], B, P)
        return run_blocked
    N, C = net.shape(layer.inputs[0])[:2]

    def run(x, y):
        x3, y3 = x.reshape(N, C, -1), y.reshape(N, C, -1)
        # the pooled means per call (0.2 us), not per layer: an engine runs on several threads at
        # once and the kernels release the GIL (one shared buffer mixed two calls' gates)
        p = np.empty((N, C), np.float32)
        _pool(x3, p)
        _scale(x3, excite(p), y3)
    return run
