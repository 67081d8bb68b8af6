"""``aten::im2col`` / ``aten::col2im`` (``F.unfold`` / ``F.fold``), compiled.

The numpy kernels (``rearrange.py``) pad the image (``np.pad``) and move one strided slab per kernel
tap: ~10 numpy calls for a 3x3 kernel, 30-100 us on a (2, 2, 7, 8) image where torch takes a few.
Here one loop nest per (image, channel) writes every column element once (im2col) or adds it once (col2im).

Semantics are ATen's CPU ``im2col`` / ``col2im`` (aten/src/ATen/native/im2col.h): column row
``(c, i, j)`` (channel, kernel row, kernel column), block ``(oh, ow)`` reads image pixel
``(oh * sh - ph + i * dh, ow * sw - pw + j * dw)``, zero outside the image; col2im adds the
columns into a zeroed image in that same order (taps outer, blocks inner), so its sums are
torch's bit for bit.
"""
from __future__ import annotations

import numba
import numpy as np

from .jit import JIT


@numba.njit(inline="always", **JIT)
def _inside(o0, step, n, size):
    """``[lo, hi)``: the blocks ``o`` of ``range(size)`` whose pixel ``o0 + o * step`` is in
    ``range(n)`` (``step`` > 0)."""
    lo = 0
    if o0 < 0:
        lo = (-o0 + step - 1) // step
    hi = 0
    if o0 < n:
        hi = (n - 1 - o0) // step + 1
    return min(lo, size), min(max(hi, lo), size)


@numba.njit(**JIT)
def im2col_into(x, cols, kh, kw, dh, dw, ph, pw, sh, sw, OW):
    """``x`` (N, C, H, W), any strides -> ``cols`` (N, C*kh*kw, OH*OW)."""
    N, C, H, W = x.shape
    OH = cols.shape[2] // OW
    for n in range(N):
        for c in range(C):
            for i in range(kh):
                h0 = i * dh - ph
                oh0, oh1 = _inside(h0, sh, H, OH)
                for j in range(kw):
                    w0 = j * dw - pw
                    ow0, ow1 = _inside(w0, sw, W, OW)
                    row = (c * kh + i) * kw + j
                    for oh in range(OH):
                        at = oh * OW
                        if oh < oh0 or oh >= oh1:
                            for ow in range(OW):
                                cols[n, row, at + ow] = 0
                            continue
                        h = h0 + oh * sh
                        for ow in range(ow0):
                            cols[n, row, at + ow] = 0
                        for ow in range(ow0, ow1):
                            cols[n, row, at + ow] = x[n, c, h, w0 + ow * sw]
                        for ow in range(ow1, OW):
                            cols[n, row, at + ow] = 0


@numba.njit(**JIT)
def col2im_into(cols, img, kh, kw, dh, dw, ph, pw, sh, sw, OW):
    """``cols`` (N, C*kh*kw, OH*OW), any strides, summed into ``img`` (N, C, H, W), zeroed first."""
    N, C, H, W = img.shape
    OH = cols.shape[2] // OW
    for n in range(N):
        for c in range(C):
            for h in range(H):
                for w in range(W):
                    img[n, c, h, w] = 0
            for i in range(kh):
                h0 = i * dh - ph
                oh0, oh1 = _inside(h0, sh, H, OH)
                for j in range(kw):
                    w0 = j * dw - pw
                    ow0, ow1 = _inside(w0, sw, W, OW)
                    row = (c * kh + i) * kw + j
                    for oh in range(oh0, oh1):
                        h = h0 + oh * sh
                        at = oh * OW
                        for ow in range(ow0, ow1):
                            img[n, c, h, w0 + ow * sw] += cols[n, row, at + ow]


def compile_for(dtype: str) -> None:
    """Compile (or load from numba's cache) both kernels for ``dtype`` now: at load, not in a call.
    Inputs of any strides (a transposed ``F.fold`` input is common), outputs C-contiguous."""
    t = numba.from_dtype(np.dtype(dtype))
    ints = (numba.int64,) * 9
    im2col_into.compile((numba.types.Array(t, 4, "A"), numba.types.Array(t, 3, "C")) + ints)
    col2im_into.compile((numba.types.Array(t, 3, "A"), numba.types.Array(t, 4, "C")) + ints)
