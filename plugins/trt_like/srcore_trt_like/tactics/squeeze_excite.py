"""The fused squeeze-excite layer (``builder/fusion.py``'s ``fuse_squeeze_excite``): the global
average pool, the two small FCs with their activations and the channel-wise scale in one compiled
call: one read of the block input for the pool, one read and one write for the scale, no
intermediates in the arena and one kernel call per layer. (With the FCs as numpy GEMMs and the
activations as calls of their own, a layer was ~12 calls: 9-11 us on EfficientNet's 9k-37k element
blocks, of which ~2 us arithmetic.)"""
from __future__ import annotations

import numpy as np

from ..builder.network import Layer, Network
from ..kernels.activation import CODES
from ..kernels.squeeze_excite import _se_blocked, _se_planes


def squeeze_excite(layer: Layer, net: Network):
    """``y = x * gate(W2 act(W1 mean_hw(x) + b1) + b2)`` (per image and channel), one compiled call."""
    a = layer.attrs
    w1t, w2t = np.ascontiguousarray(a["w1"].T, np.float32), np.ascontiguousarray(a["w2"].T, np.float32)
    b1, b2 = np.ascontiguousarray(a["b1"], np.float32), np.ascontiguousarray(a["b2"], np.float32)
    act, gate = CODES[a["act"]], CODES[a["gate"]]
    if "nchwc" in a:   # NCHW16c in and out (builder/layout.py)
        N = a["x_shape"][0]
        B, L = net.shape(layer.inputs[0])[1], net.shape(layer.inputs[0])[4]
        P = int(np.prod(a["x_shape"][2:]))
        inv = np.full(L, np.float32(1.0) / np.float32(P), np.float32)

        def run_blocked(x, y):
            _se_blocked(x.reshape(N, -1), y.reshape(N, -1), B, P, inv, w1t, b1, w2t, b2, act, gate)
        return run_blocked
    N, C = net.shape(layer.inputs[0])[:2]

    def run(x, y):
        _se_planes(x.reshape(N, C, -1), y.reshape(N, C, -1), w1t, b1, w2t, b2, act, gate)
    return run

