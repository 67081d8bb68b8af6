"""Direct grouped convolutions (numba): depthwise and small-group 1-D / 2-D convs without im2col.

im2col + GEMM suits convs with many input channels per group; a depthwise conv (one input channel
per group) has no reduction worth a GEMM: im2col copies every tap and then runs one tiny matrix
product per channel, and the per-tap ufunc loop of ``conv_im2col.py`` makes two passes over the
output per tap.

Here the work is vectorized over output channels (channels last): the input is first copied,
padded, into ``xt[ci, n, row, col, o] = x[n, g(o) * Cg + ci, row, col]`` (numpy transposing copies) (``g(o)`` the group of
output channel ``o``, ``Cg`` the input channels per group; for a depthwise conv with one output
per channel this is just the NHWC transpose), then for each output pixel ``acc[o] += w[kh, kw, ci,
o] * xt[ci, n, r, c, o]`` over the taps is one contiguous, vectorizable loop over ``o`` (a plane-wise
loop, vectorized over output columns, measured 5-20x slower on MobileNet's 7x7 and 14x14 planes: the
rows are too short). The accumulator goes to ``out`` (NCHW) as the pixel's column. MobileNetV3's
depthwise convs went from 1.2-5.3 ms (im2col / per-tap ufuncs) to 0.1-0.3 ms, torch 0.14-0.27 ms
(docs/performance-log.md).

Compiled at load (``jit.compiled``); parts over output rows when ``SRCORE_CPU_THREADS`` asks for more
than one thread (the kernels release the GIL).
"""
from __future__ import annotations

import numba
import numpy as np

from . import jit as _J
from . import parallel as _par
from .jit import JIT

_CONV_SIG = ("void(float32[:, :, :, :, ::1], float32[:, :, :, ::1], float32[::1], float32[:, :, :, ::1], "
             "int64, int64, int64, int64, int64, int64)")


@numba.njit(**JIT)
def _conv_channels_last(xt, wt, bias, out, sh, sw, dh, dw, i0, i1):
    """Output rows ``[i0, i1)`` of ``out`` (N, O, Ho, Wo) from the packed input ``xt`` and the
    weight ``wt`` (KH, KW, Cg, O)."""
    Cg, N = xt.shape[0], xt.shape[1]
    O, Wo = out.shape[1], out.shape[3]
    KH, KW = wt.shape[0], wt.shape[1]
    acc = np.empty(O, np.float32)
    for n in range(N):
        for i in range(i0, i1):
            for j in range(Wo):
                for o in range(O):
                    acc[o] = bias[o]
                for ci in range(Cg):
                    for kh in range(KH):
                        r = i * sh + kh * dh
                        for kw in range(KW):
                            c = j * sw + kw * dw
                            for o in range(O):
                                acc[o] += wt[kh, kw, ci, o] * xt[ci, n, r, c, o]
                for o in range(O):
                    out[n, o, i, j] = acc[o]


class DirectConv:
    """A grouped 2-D conv (a 1-D one as height 1) with fixed float32 weights: ``conv(x, out)``."""

    def __init__(self, weight, bias, stride, pads, dilation, groups, ws, threads=1):
        w = np.asarray(weight, np.float32)
        self.nd = w.ndim - 2
        if self.nd == 1:   # (O, Cg, K) -> (O, Cg, 1, K)
            w = w[:, :, None]
            stride, pads, dilation = (1,) + tuple(stride), [(0, 0)] + list(pads), (1,) + tuple(dilation)
        O, Cg = w.shape[:2]
        self.kh, self.kw = w.shape[2:]
        self.out_channels, self.cg, self.og = O, Cg, O // groups
        self.wt = np.ascontiguousarray(w.transpose(2, 3, 1, 0))          # (KH, KW, Cg, O)
        self.bias = (np.zeros(O, np.float32) if bias is None
                     else np.ascontiguousarray(bias, np.float32))
        self.stride, self.pads, self.dilation = tuple(stride), list(pads), tuple(dilation)
        self.ws, self.threads = ws, threads
        # input channel feeding each output channel, per ci (None: the identity, a plain transpose)
        src = (np.arange(O) // self.og) * Cg
        self.sources = None if Cg == 1 and self.og == 1 else [src + ci for ci in range(Cg)]
        self.kernel = _J.compiled(_conv_channels_last, _CONV_SIG)

    def out_shape(self, shape):
        x = shape if self.nd == 2 else (shape[0], shape[1], 1, shape[2])
        (sh, sw), (dh, dw) = self.stride, self.dilation
        ho = (x[2] + sum(self.pads[0]) - dh * (self.kh - 1) - 1) // sh + 1
        wo = (x[3] + sum(self.pads[1]) - dw * (self.kw - 1) - 1) // sw + 1
        return (x[0], self.out_channels, ho, wo) if self.nd == 2 else (x[0], self.out_channels, wo)

    def __call__(self, x, out):
        """``out`` (C-contiguous float32, the conv's output shape) := conv(x) (x float32, any strides)."""
        x4 = x if self.nd == 2 else x[:, :, None]
        o4 = out if self.nd == 2 else out[:, :, None]
        (plo, phi), (qlo, qhi) = self.pads
        N, _, H, W = x4.shape
        Hp, Wp = H + plo + phi, W + qlo + qhi
        xt = self.ws.get(None, "direct", (self.cg, N, Hp, Wp, self.out_channels), np.float32)
        # zero the border, then the interior: one transposing copy per input channel of a group
        if plo or phi:
            xt[:, :, :plo] = 0
            xt[:, :, Hp - phi:] = 0
        if qlo or qhi:
            xt[:, :, :, :qlo] = 0
            xt[:, :, :, Wp - qhi:] = 0
        inner = (slice(None), slice(plo, plo + H), slice(qlo, qlo + W))
        if self.sources is None:
            xt[(0,) + inner] = x4.transpose(0, 2, 3, 1)
        else:
            for ci, src in enumerate(self.sources):
                xt[(ci,) + inner] = x4[:, src].transpose(0, 2, 3, 1)
        (sh, sw), (dh, dw) = self.stride, self.dilation
        Ho = o4.shape[2]
        if self.threads > 1 and Ho >= 2 * self.threads:
            chunks = _par.split(Ho, self.threads)
            _par.run_parts(lambda i: self.kernel(xt, self.wt, self.bias, o4, sh, sw, dh, dw, *chunks[i]),
                           self.threads, self.threads)
        else:
            self.kernel(xt, self.wt, self.bias, o4, sh, sw, dh, dw, 0, Ho)
        return out
