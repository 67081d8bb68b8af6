"""``aten::im2col`` / ``aten::col2im`` (``F.unfold`` / ``F.fold``), compiled.

The numpy kernels (``rearrange.py``) pad the image (``np.pad``) and move one strided slab per kernel
tap: ~10 numpy calls for a 3x3 kernel, 30-100 us on a (2, 2, 7, 8) image where torch takes a few.
Here one loop nest per (image, channel) plane writes every column element once (im2col) or adds it once (col2im).

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


# Both kernels index flat C-contiguous buffers with unsigned offsets (``np.uintp``): numba then emits
# no negative-index wraparound and LLVM vectorizes the stride-1 rows (2-3x numpy's slab copies on a
# (1, 16, 32, 32) 3x3 im2col; index views of the rows instead cost a reference count each).


@numba.njit(**JIT)
def im2col_flat(x, cols, planes, H, W, kh, kw, dh, dw, ph, pw, sh, sw, OH, OW):
    """``x`` (planes * H * W,) -> ``cols`` (planes * kh * kw * OH * OW,), both C order."""
    L = OH * OW
    for p in range(planes):
        xb = p * H * W
        for i in range(kh):
            h0 = i * dh - ph
            oh0, oh1 = _inside(h0, sh, H, OH)
            for j in range(kw):
                w0 = j * dw - pw
                ow0, ow1 = _inside(w0, sw, W, OW)
                cb = ((p * kh + i) * kw + j) * L
                for oh in range(OH):
                    d = cb + oh * OW
                    if oh < oh0 or oh >= oh1:
                        for ow in range(OW):
                            cols[np.uintp(d + ow)] = 0
                        continue
                    s = xb + (h0 + oh * sh) * W + w0
                    for ow in range(ow0):
                        cols[np.uintp(d + ow)] = 0
                    if sw == 1:
                        for ow in range(ow0, ow1):
                            cols[np.uintp(d + ow)] = x[np.uintp(s + ow)]
                    else:
                        for ow in range(ow0, ow1):
                            cols[np.uintp(d + ow)] = x[np.uintp(s + ow * sw)]
                    for ow in range(ow1, OW):
                        cols[np.uintp(d + ow)] = 0


@numba.njit(**JIT)
def col2im_flat(cols, img, planes, H, W, kh, kw, dh, dw, ph, pw, sh, sw, OH, OW):
    """``cols`` (planes * kh * kw * OH * OW,) summed into ``img`` (planes * H * W,), zeroed first."""
    L = OH * OW
    for k in range(planes * H * W):
        img[np.uintp(k)] = 0
    for p in range(planes):
        ib = p * H * W
        for i in range(kh):
            h0 = i * dh - ph
            oh0, oh1 = _inside(h0, sh, H, OH)
            for j in range(kw):
                w0 = j * dw - pw
                ow0, ow1 = _inside(w0, sw, W, OW)
                cb = ((p * kh + i) * kw + j) * L
                for oh in range(oh0, oh1):
                    s = cb + oh * OW
                    d = ib + (h0 + oh * sh) * W + w0
                    if sw == 1:
                        for ow in range(ow0, ow1):
                            img[np.uintp(d + ow)] += cols[np.uintp(s + ow)]
                    else:
                        for ow in range(ow0, ow1):
                            img[np.uintp(d + ow * sw)] += cols[np.uintp(s + ow)]


def compile_for(dtype: str) -> None:
    """Compile (or load from numba's cache) both kernels for ``dtype`` now: at load, not in a call."""
    a1 = numba.types.Array(numba.from_dtype(np.dtype(dtype)), 1, "C")
    ints = (numba.int64,) * 13
    im2col_flat.compile((a1, a1) + ints)
    col2im_flat.compile((a1, a1) + ints)
