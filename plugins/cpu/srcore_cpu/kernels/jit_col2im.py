"""The col2im of a transposed convolution of any spatial rank (1-3), compiled (numba, float32).

``conv_im2col.conv_transpose_forward`` multiplies the weight's (O/g * taps, C/g) columns by the
input's pixels on BLAS; adding each (output channel, tap) row into the output at the stride was a
numpy add per tap over a padded accumulator, then a crop and the bias: on small layers (a U-Net's
or a decoder's up-sampling, the fifth held-out zoo's transposed convs) these few-µs calls cost many
times the GEMM. Here one pass writes the bias, then adds every row's in-range span into the
cropped output directly. 1-D and 2-D layers are the 3-D case with unit leading dims.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from . import jit as _J
from .jit import JIT

_SIG = "void(float32[:, :, ::1], float32[::1], float32[:, :, :, :, ::1]" + ", int64" * 15 + ")"


@numba.njit(**JIT)
def _col2im3(cols, bias, out, D, H, W, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw):
    """``out[n, o, z*sd - pd + kz*dd, i*sh - ph + ky*dh, j*sw - pw + kx*dw] += cols[n, (o, kz, ky, kx),
    (z, i, j)]`` over ``bias[o]``; positions outside ``out`` (the padding) are dropped."""
    N, O, Do, Ho, Wo = out.shape
    flat = out.reshape(out.size)
    cf = cols.reshape(cols.size)
    plane = Do * Ho * Wo
    L = D * H * W
    K = kd * kh * kw
    for n in range(N):
        for o in range(O):
            p0 = (n * O + o) * plane
            bv = bias[o]
            for q in range(p0, p0 + plane):
                flat[q] = bv
            for kz in range(kd):
                for ky in range(kh):
                    for kx in range(kw):
                        r0 = ((n * O + o) * K + (kz * kh + ky) * kw + kx) * L
                        # the input columns j whose output column is inside: j0 <= j < j1
                        off = kx * dw - pw
                        j0 = 0 if off >= 0 else (-off + sw - 1) // sw
                        j1 = min(W, (Wo - 1 - off) // sw + 1) if Wo - 1 - off >= 0 else 0
                        for z in range(D):
                            oz = z * sd - pd + kz * dd
                            if oz < 0 or oz >= Do:
                                continue
                            for i in range(H):
                                oy = i * sh - ph + ky * dh
                                if oy < 0 or oy >= Ho:
                                    continue
                                ob = p0 + (oz * Ho + oy) * Wo + off
                                cb = r0 + (z * H + i) * W
                                for j in range(j0, j1):
                                    flat[ob + j * sw] += cf[cb + j]


def _to3(t, fill) -> tuple:
    return (fill,) * (3 - len(t)) + tuple(t)


class Col2im:
    """A constant-weight float32 transposed conv of rank 1-3: the GEMM (``np.dot`` per (sample,
    group) matrix: a stacked ``np.matmul`` of small ones ran 2-5x slower), then :func:`_col2im3`.
    Compiles (or loads from numba's cache) at construction, i.e. in the matcher at load."""

    def __init__(self, w, bias, stride, padding, output_padding, groups, dilation):
        C, Og, *ks = w.shape
        self.nd, self.g, self.cig, self.O = len(ks), groups, C // groups, Og * groups
        self.kk = Og * math.prod(ks)
        self.wt = np.ascontiguousarray(w.reshape(groups, C // groups, self.kk).transpose(0, 2, 1))
        self.bias = np.zeros(self.O, np.float32) if bias is None else np.ascontiguousarray(bias, np.float32)
        self.ks, self.stride, self.padding, self.dilation = ks, stride, padding, dilation
        self.out_pad = output_padding
        self.hyper = (*_to3(ks, 1), *_to3(stride, 1), *_to3(padding, 0), *_to3(dilation, 1))
        self.fn = _J.compiled(_col2im3, _SIG)

    def __call__(self, x, out, ws):
        N, sp = x.shape[0], x.shape[2:]
        if out is None or not out.flags.c_contiguous:
            osz = tuple((n - 1) * s - 2 * p + d * (k - 1) + op + 1 for n, s, p, d, k, op in
                        zip(sp, self.stride, self.padding, self.dilation, self.ks, self.out_pad))
            res = np.empty((N, self.O) + osz, np.float32)
        else:
            res = out
        if res.size == 0 or x.size == 0:
            res[...] = self.bias.reshape((self.O,) + (1,) * self.nd)
        else:
            g, L = self.g, math.prod(sp)
            cols = ws.get((x.shape, x.dtype), "cols", (N, g, self.kk, L), np.float32)
            xs = x.reshape(N, g, self.cig, L)
            for n in range(N):
                for gi in range(g):
                    np.dot(self.wt[gi], xs[n, gi], out=cols[n, gi])
            self.fn(cols.reshape(N, g * self.kk, L), self.bias, res.reshape((N, self.O) + _to3(res.shape[2:], 1)),
                    *_to3(sp, 1), *self.hyper)
        if out is not None and res is not out:
            np.copyto(out, res)
        return res
