"""The col2im of a transposed convolution of any spatial rank (1-3), compiled (numba, float32).

``conv_im2col.conv_transpose_forward`` multiplies the weight's (O/g * taps, C/g) columns by the
input's pixels on BLAS; adding each (output channel, tap) row into the output at the stride was a
numpy add per tap over a padded accumulator, then a crop and the bias: on small layers (a U-Net's
or a decoder's up-sampling, the fifth held-out zoo's transposed convs) these few-µs calls cost many
times the GEMM. Here one pass writes the bias, then adds every row's in-range span into the
cropped output directly. 1-D and 2-D layers are the 3-D case with unit leading dims.
"""
from __future__ import annotations

import numba

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


def col2im_fn():
    """The compiled kernel (compiled or loaded from numba's cache now: called by the matcher at load)."""
    return _J.compiled(_col2im3, _SIG)


def _to3(t, fill):
    return (fill,) * (3 - len(t)) + tuple(t)


def col2im(fn, cols, bias, out, sp, ks, stride, padding, dilation):
    """``fn`` (:func:`col2im_fn`) on a rank-1..3 layer: ``cols`` (N, O * taps, pixels), ``out`` (N, O, *osz)."""
    out5 = out.reshape(out.shape[:2] + _to3(out.shape[2:], 1))
    fn(cols, bias, out5, *_to3(sp, 1), *_to3(ks, 1), *_to3(stride, 1), *_to3(padding, 0), *_to3(dilation, 1))
