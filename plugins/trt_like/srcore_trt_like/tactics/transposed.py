"""The ``conv_transpose`` layer's ``numba`` tactic: the product of the weight's (O/g * kh * kw, C/g)
columns by the input's pixels on BLAS, then the compiled col2im with the bias
(:mod:`..kernels.conv_transpose`); ``numpy`` (:func:`.numpy_layers.conv_transpose`) does the
col2im in numpy. The build times both."""
from __future__ import annotations

import numpy as np

from ..builder.network import Layer, Network
from ..kernels.conv_transpose import col2im_bias
from ..kernels.scratch import SCRATCH


def gemm_col2im(layer: Layer, net: Network):
    w, b = layer.attrs["weight"], layer.attrs["bias"]
    (sh, sw), (ph, pw), (dh, dw) = layer.attrs["stride"], layer.attrs["padding"], layer.attrs["dilation"]
    g = layer.attrs["groups"]
    C, Og, kh, kw = w.shape
    Cig, KK = C // g, Og * kh * kw
    N, _, H, W = net.shape(layer.inputs[0])
    wt = np.ascontiguousarray(np.asarray(w, np.float32).reshape(g, Cig, KK).transpose(0, 2, 1))
    bias = np.zeros(Og * g, np.float32) if b is None else np.ascontiguousarray(b, np.float32)

    def run(x, out):
        cols = SCRATCH.get("convt_cols", (N, g, KK, H * W))
        xs = x.reshape(N, g, Cig, H * W)
        for n in range(N):   # np.dot per matrix: a stacked np.matmul ran 2-5x slower
            for gi in range(g):
                np.dot(wt[gi], xs[n, gi], out=cols[n, gi])
        col2im_bias(cols.reshape(N, g * KK, H * W), bias, out, H, W, kh, kw, sh, sw, ph, pw, dh, dw)
    return run
