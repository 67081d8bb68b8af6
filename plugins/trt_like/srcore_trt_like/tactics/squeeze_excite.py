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


def squeeze_excite(layer: Layer, net: Network):
    """``y = x * gate(W2 act(W1 mean_hw(x) + b1) + b2)`` (per image and channel)."""
    a = layer.attrs
    w1t, b1, w2t, b2 = np.ascontiguousarray(a["w1"].T), a["b1"], np.ascontiguousarray(a["w2"].T), a["b2"]
    act = _activation.in_place(a["act"]) if a["act"] != "relu" else None
    relu = a["act"] == "relu"
    gate = _activation.in_place(a["gate"])
    N, C = net.shape(layer.inputs[0])[:2]

    def run(x, y):
        x3, y3 = x.reshape(N, C, -1), y.reshape(N, C, -1)
        # the pooled means per call (0.2 us), not per layer: an engine runs on several threads at
        # once and the kernels release the GIL (one shared buffer mixed two calls' gates)
        p = np.empty((N, C), np.float32)
        _pool(x3, p)
        h = p @ w1t
        h += b1
        if relu:
            np.maximum(h, 0, out=h)
        elif act is not None:
            act(h)
        s = h @ w2t
        s += b2
        gate(s)
        _scale(x3, s, y3)
    return run
