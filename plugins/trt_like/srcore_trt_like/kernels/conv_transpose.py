"""The col2im of a transposed 2-D convolution, compiled (the ``conv_transpose`` layer's ``numba``
tactic, after its BLAS product): every (output channel, tap) row of the product's columns added into
the output plane at the stride, the padding cropped, over the bias.

U-Nets' up-sampling layers are often small (16-32 channels on 7x6 to 15x13 planes): there the
numpy tactic's col2im (a strided 6-D add, or a loop of strided adds) cost several times its
GEMM of ~0.1 M multiply-adds; a direct kernel summing over the input channels per pixel was no
faster than BLAS + this (its accumulator row went through memory per channel).
"""
from __future__ import annotations

import numba

from .jit import JIT


@numba.njit(**JIT)
def col2im_bias(cols, bias, out, H, W, kh, kw, sh, sw, ph, pw, dh, dw):
    """``out[n, o, i*sh - ph + ky*dh, j*sw - pw + kx*dw] += cols[n, (o, ky, kx), i * W + j]`` over
    ``bias[o]`` (positions outside ``out``, the padding, are dropped); ``cols`` is (N, O * kh * kw,
    H * W), ``out`` (N, O, Ho, Wo). Flat indices throughout (a sub-array view per row cost more
    than the row's few adds)."""
    N, O, Ho, Wo = out.shape
    flat = out.reshape(N * O * Ho * Wo)
    cf = cols.reshape(cols.size)
    plane_size = Ho * Wo
    # taps apart (stride == kernel, no padding or dilation, nothing past them: a U-Net's 2x2/2
    # up-sampling): every output written once, row by row, no fill and no read-modify-write
    apart = sh == kh and sw == kw and ph == 0 and pw == 0 and dh == 1 and dw == 1 and Ho == H * kh and Wo == W * kw
    HW = H * W
    for n in range(N):
        for o in range(O):
            p0 = (n * O + o) * plane_size
            bv = bias[o]
            if apart:
                r0 = (n * O + o) * kh * kw * HW
                for i in range(H):
                    for ky in range(kh):
                        ob = p0 + (i * kh + ky) * Wo
                        rk = r0 + ky * kw * HW + i * W
                        if kw == 2:   # two rows interleaved: a loop LLVM vectorizes
                            for j in range(W):
                                flat[ob + 2 * j] = cf[rk + j] + bv
                                flat[ob + 2 * j + 1] = cf[rk + HW + j] + bv
                        else:
                            for j in range(W):
                                for kx in range(kw):
                                    flat[ob + j * kw + kx] = cf[rk + kx * HW + j] + bv
                continue
            for q in range(p0, p0 + plane_size):
                flat[q] = bv
            for ky in range(kh):
                for kx in range(kw):
                    r0 = (n * O * kh * kw + (o * kh + ky) * kw + kx) * H * W
                    # the input columns j whose output column is inside: j0 <= j < j1
                    off = kx * dw - pw
                    j0 = 0 if off >= 0 else (-off + sw - 1) // sw
                    j1 = min(W, (Wo - 1 - off) // sw + 1) if Wo - 1 - off >= 0 else 0
                    for i in range(H):
                        oy = i * sh - ph + ky * dh
                        if oy < 0 or oy >= Ho:
                            continue
                        ob = p0 + oy * Wo + off
                        cb = r0 + i * W
                        for j in range(j0, j1):
                            flat[ob + j * sw] += cf[cb + j]
