"""The ``conv3d`` layer's tactics (a 3-D convolution the builder could not fold into a 2-D one:
``builder/volume.py``): ``vol2col_gemm``, the compiled vol2col (:mod:`..kernels.vol2col`) then one
BLAS product per image and group with the bias added; ``numpy``, a sum over the taps of strided views of the
padded input (always applicable). Both apply a fused activation in place after the bias. The
build times both."""
from __future__ import annotations

import numpy as np

from ..builder.network import Layer, Network
from ..kernels.activation import in_place
from ..kernels.scratch import SCRATCH
from ..kernels.vol2col import vol2col


def _activation(layer: Layer):
    """The fused activation applied in place on the output (``builder/fusion.py``), or a no-op."""
    act = in_place(layer.attrs.get("activation", "none"), layer.attrs.get("negative_slope", 0.01))
    return act or (lambda y: None)


def _geometry(layer: Layer, net: Network):
    a = layer.attrs
    w = a["weight"]
    N, C, T, H, W = net.shape(layer.inputs[0])
    _, O, To, Ho, Wo = net.shape(layer.outputs[0])
    return w, a["bias"], a["stride"], a["padding"], a["dilation"], a["groups"], (N, C, T, H, W), (O, To, Ho, Wo)


def vol2col_gemm(layer: Layer, net: Network):
    w, b, (st, sh, sw), (pt, ph, pw), (dt, dh, dw), g, (N, C, T, H, W), (O, To, Ho, Wo) = _geometry(layer, net)
    kt, kh, kw = w.shape[2:]
    Cg, Og, P = C // g, O // g, To * Ho * Wo
    K = Cg * kt * kh * kw
    wg = np.ascontiguousarray(np.asarray(w, np.float32).reshape(g, Og, K))
    bias = None if b is None else np.ascontiguousarray(b, np.float32).reshape(g, Og, 1)
    padded = (C, T + 2 * pt, H + 2 * ph, W + 2 * pw)
    inner = (slice(None), slice(pt, pt + T), slice(ph, ph + H), slice(pw, pw + W))
    any_pad = (pt, ph, pw) != (0, 0, 0)
    act = _activation(layer)

    def run(x, out):
        o = out.reshape(N, g, Og, P)
        for n in range(N):
            xp = x[n]
            if any_pad:
                xp = SCRATCH.get("vol2col_pad", padded)
                xp.fill(0.0)
                xp[inner] = x[n]
            cols = SCRATCH.get("vol2col", (g * K, P))
            vol2col(xp, cols, kt, kh, kw, st, sh, sw, dt, dh, dw, To, Ho, Wo)
            cols = cols.reshape(g, K, P)
            for gi in range(g):   # np.dot per matrix (a stacked np.matmul is slower on small ones)
                np.dot(wg[gi], cols[gi], out=o[n, gi])
                if bias is not None:
                    np.add(o[n, gi], bias[gi], out=o[n, gi])
        act(out)
    return run


def numpy_conv3d(layer: Layer, net: Network):
    w, b, (st, sh, sw), (pt, ph, pw), (dt, dh, dw), g, (N, C, T, H, W), (O, To, Ho, Wo) = _geometry(layer, net)
    kt, kh, kw = w.shape[2:]
    Cg, Og = C // g, O // g
    wg = np.asarray(w, np.float32).reshape(g, Og, Cg, kt, kh, kw)
    bias = None if b is None else np.asarray(b, np.float32).reshape(1, O, 1, 1, 1)
    act = _activation(layer)

    def run(x, out):
        xp = np.pad(x, ((0, 0), (0, 0), (pt, pt), (ph, ph), (pw, pw))).reshape(N, g, Cg, T + 2 * pt, H + 2 * ph,
                                                                                W + 2 * pw)
        acc = np.zeros((N, g, Og, To, Ho, Wo), np.float32)
        for a in range(kt):
            for bb in range(kh):
                for e in range(kw):
                    win = xp[:, :, :, a * dt:a * dt + st * (To - 1) + 1:st, bb * dh:bb * dh + sh * (Ho - 1) + 1:sh,
                             e * dw:e * dw + sw * (Wo - 1) + 1:sw]
                    acc += np.einsum("goc,ngcthw->ngothw", wg[:, :, :, a, bb, e], win)
        y = acc.reshape(N, O, To, Ho, Wo)
        np.add(y, bias, out=out) if bias is not None else np.copyto(out, y)
        act(out)
    return run
