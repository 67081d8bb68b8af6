"""Rearranging kernels: argsort (stable), repeat_interleave (every overload), pixel_shuffle /
pixel_unshuffle, im2col / col2im (``F.unfold`` / ``F.fold``).

im2col and col2im loop over the ``kh*kw`` kernel offsets and move one strided ``(N, C, oh, ow)``
slab each (a numpy slice assignment or ``+=``), so the work per call is ``kh*kw`` vectorised copies
whatever the image size.
"""
from __future__ import annotations

import functools

import numpy as np

from srcore.plugin import KernelError

from .per_shape import PerShape


def _fail(op, msg):
    return KernelError(f"{op}: {msg}")


def _write(out, r):
    if out is None:
        return r
    np.copyto(out, r)
    return out


# --- argsort ----------------------------------------------------------------------------------


def argsort(self, dim=-1, descending=False, *, stable=False, out=None):
    """``aten::argsort`` / ``argsort.stable`` / ``.stable_out``: int64 indices that sort ``self``
    along ``dim``; always stable (ties keep their order, also descending), NaN sorts as the largest.
    A stable order is a valid answer for ``stable=False`` too, and it is what torch's CPU gives."""
    from .reduce import _sorted_indices

    if self.ndim == 0:
        if dim not in (0, -1):
            raise _fail("aten::argsort", f"dim {dim} out of range for a 0-d tensor")
        return _write(out, np.zeros((), np.int64))
    if not -self.ndim <= dim < self.ndim:
        raise _fail("aten::argsort", f"dim {dim} out of range for a tensor of rank {self.ndim}")
    return _write(out, _sorted_indices(self, dim, descending).astype(np.int64, copy=False))


# --- repeat_interleave ------------------------------------------------------------------------


def _repeats(op, repeats, n):
    """``repeats`` (an int, a 0-d or one-element tensor, or a length-``n`` 1-D tensor) as int64 counts."""
    r = np.asarray(repeats)
    if r.dtype.kind not in "iub":
        raise _fail(op, f"repeats must be an integer tensor, got {r.dtype}")
    if r.ndim > 1:
        raise _fail(op, f"repeats must be 0-dim or 1-dim, got shape {r.shape}")
    r = r.astype(np.int64, copy=False)
    if r.size and r.min() < 0:
        raise _fail(op, "repeats can not be negative")
    if r.ndim == 1 and r.size != 1 and r.size != n:
        raise _fail(op, f"repeats must have the same size as input along dim: {r.size} vs {n}")
    return r.reshape(()) if r.size == 1 else r


def _check_output_size(op, got, output_size):
    if output_size is not None and got != output_size:
        raise _fail(op, f"the repeated size is {got}, but output_size={output_size}")


def repeat_interleave_tensor(repeats, *, output_size=None, out=None):
    """``aten::repeat_interleave.Tensor``: ``i`` repeated ``repeats[i]`` times (dtype of ``repeats``)."""
    op = "aten::repeat_interleave.Tensor"
    r = np.asarray(repeats)
    if r.ndim != 1:
        raise _fail(op, f"repeats must be a 1-D tensor, got shape {r.shape}")
    counts = _repeats(op, r, r.size)
    res = np.repeat(np.arange(r.size, dtype=r.dtype), np.broadcast_to(counts, (r.size,)))
    _check_output_size(op, res.size, output_size)
    return _write(out, res)


def repeat_interleave(self, repeats, dim=None, *, output_size=None, out=None):
    """``aten::repeat_interleave.self_Tensor`` / ``.self_int``: each element (of the flattened
    input when ``dim`` is None) repeated ``repeats`` times, or ``repeats[i]`` times for the i-th."""
    op = "aten::repeat_interleave"
    x = self.reshape(-1) if dim is None else self
    axis = 0 if dim is None else dim
    if x.ndim == 0 or not -x.ndim <= axis < x.ndim:
        raise _fail(op, f"dim {dim} out of range for a tensor of rank {self.ndim}")
    counts = _repeats(op, repeats, x.shape[axis])
    res = np.repeat(x, counts, axis=axis)
    _check_output_size(op, res.shape[axis], output_size)
    return _write(out, res)


# --- pixel_shuffle ----------------------------------------------------------------------------


def _copy_into(out, v):
    """Write the permuted view ``v`` into ``out`` (same elements, ``out``'s shape) in one copy."""
    if out.flags.c_contiguous:
        np.copyto(out.reshape(v.shape), v)
    else:
        np.copyto(out, v.reshape(out.shape))
    return out


def pixel_shuffle(self, upscale_factor, *, out=None):
    """``aten::pixel_shuffle``: ``(*, C*r*r, H, W) -> (*, C, H*r, W*r)``."""
    r = upscale_factor
    if self.ndim < 3:
        raise _fail("aten::pixel_shuffle", f"input must be at least 3-D, got shape {self.shape}")
    if r <= 0:
        raise _fail("aten::pixel_shuffle", f"upscale_factor must be positive, got {r}")
    *b, c, h, w = self.shape
    if c % (r * r):
        raise _fail("aten::pixel_shuffle", f"{c} channels are not divisible by upscale_factor^2 = {r * r}")
    oc = c // (r * r)
    n = len(b)
    v = self.reshape(*b, oc, r, r, h, w)
    v = v.transpose(*range(n), n, n + 3, n + 1, n + 4, n + 2)   # (*, C, H, r, W, r)
    if out is None:
        return np.ascontiguousarray(v).reshape(*b, oc, h * r, w * r)
    return _copy_into(out, v)


def pixel_unshuffle(self, downscale_factor, *, out=None):
    """``aten::pixel_unshuffle``: ``(*, C, H*r, W*r) -> (*, C*r*r, H, W)``."""
    r = downscale_factor
    if self.ndim < 3:
        raise _fail("aten::pixel_unshuffle", f"input must be at least 3-D, got shape {self.shape}")
    if r <= 0:
        raise _fail("aten::pixel_unshuffle", f"downscale_factor must be positive, got {r}")
    *b, c, h, w = self.shape
    if h % r or w % r:
        raise _fail("aten::pixel_unshuffle", f"height {h} and width {w} must be divisible by {r}")
    n = len(b)
    v = self.reshape(*b, c, h // r, r, w // r, r)
    v = v.transpose(*range(n), n, n + 2, n + 4, n + 1, n + 3)   # (*, C, r, r, H/r, W/r)
    if out is None:
        return np.ascontiguousarray(v).reshape(*b, c * r * r, h // r, w // r)
    return _copy_into(out, v)


# --- im2col / col2im --------------------------------------------------------------------------


def _pair(op, name, v):
    t = tuple(v) if isinstance(v, (list, tuple)) else (v, v)
    if len(t) == 1:
        t = t * 2
    if len(t) != 2 or not all(isinstance(i, (int, np.integer)) for i in t):
        raise _fail(op, f"{name} must be two ints, got {v!r}")
    return tuple(int(i) for i in t)


def _geometry(op, size, kernel_size, dilation, padding, stride):
    """(kernel, dilation, padding, stride, blocks per dim) for a spatial ``size`` (H, W)."""
    k, d, p, s = (_pair(op, n, v) for n, v in (("kernel_size", kernel_size), ("dilation", dilation),
                                                 ("padding", padding), ("stride", stride)))
    if min(k) <= 0 or min(d) <= 0 or min(s) <= 0 or min(p) < 0:
        raise _fail(op, f"kernel_size {k}, dilation {d}, stride {s} must be positive and padding {p} "
                        "non-negative")
    blocks = tuple((size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2))
    if min(blocks) <= 0:
        raise _fail(op, f"the kernel {k} (dilation {d}) does not fit the padded input of size "
                        f"{tuple(size[i] + 2 * p[i] for i in range(2))}")
    return k, d, p, s, blocks


def im2col(self, kernel_size, dilation, padding, stride, *, out=None):
    """``aten::im2col`` (``F.unfold``): ``(N, C, H, W) -> (N, C*kh*kw, L)`` sliding blocks, channel
    major, then kernel row, kernel column; a 3-D input gives ``(C*kh*kw, L)``."""
    op = "aten::im2col"
    if self.ndim not in (3, 4):
        raise _fail(op, f"input must be 3-D or 4-D (N, C, H, W), got shape {self.shape}")
    x = self if self.ndim == 4 else self[None]
    n, c, h, w = x.shape
    (kh, kw), (dh, dw), (ph, pw), (sh, sw), (oh, ow) = _geometry(op, (h, w), kernel_size, dilation, padding,
                                                                 stride)
    if ph or pw:
        x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    cols = np.empty((n, c, kh, kw, oh, ow), self.dtype)
    for i in range(kh):
        r0 = i * dh
        for j in range(kw):
            c0 = j * dw
            cols[:, :, i, j] = x[:, :, r0:r0 + sh * (oh - 1) + 1:sh, c0:c0 + sw * (ow - 1) + 1:sw]
    res = cols.reshape(n, c * kh * kw, oh * ow)
    return _write(out, res if self.ndim == 4 else res[0])


def col2im(self, output_size, kernel_size, dilation, padding, stride, *, out=None):
    """``aten::col2im`` (``F.fold``): sums the ``(N, C*kh*kw, L)`` blocks back into ``(N, C, H, W)``
    (``output_size`` = (H, W)); a 2-D input gives ``(C, H, W)``."""
    op = "aten::col2im"
    if self.ndim not in (2, 3):
        raise _fail(op, f"input must be 2-D or 3-D (N, C*kh*kw, L), got shape {self.shape}")
    cols = self if self.ndim == 3 else self[None]
    h, w = _pair(op, "output_size", output_size)
    (kh, kw), (dh, dw), (ph, pw), (sh, sw), (oh, ow) = _geometry(op, (h, w), kernel_size, dilation, padding,
                                                                 stride)
    n, ck, L = cols.shape
    if ck % (kh * kw):
        raise _fail(op, f"dim 1 of the input ({ck}) must be divisible by the kernel size {kh}*{kw}")
    if L != oh * ow:
        raise _fail(op, f"expected {oh}*{ow} = {oh * ow} blocks (output_size {(h, w)}, kernel {(kh, kw)}, "
                        f"dilation {(dh, dw)}, padding {(ph, pw)}, stride {(sh, sw)}), got {L}")
    c = ck // (kh * kw)
    blocks = cols.reshape(n, c, kh, kw, oh, ow)
    img = np.zeros((n, c, h + 2 * ph, w + 2 * pw), self.dtype)
    for i in range(kh):
        r0 = i * dh
        for j in range(kw):
            c0 = j * dw
            img[:, :, r0:r0 + sh * (oh - 1) + 1:sh, c0:c0 + sw * (ow - 1) + 1:sw] += blocks[:, :, i, j]
    res = img[:, :, ph:ph + h, pw:pw + w]
    return _write(out, np.ascontiguousarray(res if self.ndim == 3 else res[0]))


# --- compiled im2col / col2im (``jit_fold.py``, numba) -----------------------------------------
_JIT_DTYPES = ("float32", "float64")


def _float_input(node) -> bool:
    from srcore.plugin import TensorType

    src = node.args[0].type if node.args else None
    return isinstance(src, TensorType) and src.dtype in _JIT_DTYPES


def _target(out, shape, dtype):
    """``out`` when the kernel can write it in place (C-contiguous, ``shape``, ``dtype``), else a new array."""
    if out is not None and out.flags.c_contiguous and out.shape == shape and out.dtype == dtype:
        return out
    return np.empty(shape, dtype)


def im2col_matcher(node):
    """``aten::im2col`` on float32/float64: the compiled kernel (compiled now, at load); None otherwise."""
    if not _float_input(node):
        return None
    from . import jit_fold as J

    J.compile_for(node.args[0].type.dtype)
    geometry = PerShape(node, ("kernel_size", "dilation", "padding", "stride"),
                        functools.partial(_geometry, "aten::im2col"))

    def im2col_jit(self, kernel_size, dilation, padding, stride, *, out=None):
        if self.dtype.name not in _JIT_DTYPES or self.ndim not in (3, 4):
            return im2col(self, kernel_size, dilation, padding, stride, out=out)
        x = self if self.ndim == 4 else self[None]
        n, c, h, w = x.shape
        (kh, kw), (dh, dw), (ph, pw), (sh, sw), (oh, ow) = geometry((h, w), kernel_size, dilation, padding, stride)
        shape = (n, c * kh * kw, oh * ow)
        res = _target(out, shape if self.ndim == 4 else shape[1:], self.dtype)
        J.im2col_flat(np.ascontiguousarray(x).reshape(-1), res.reshape(-1), n * c, h, w, kh, kw, dh, dw, ph, pw,
                      sh, sw, oh, ow)
        return _write(out, res) if res is not out else out
    return im2col_jit


def col2im_matcher(node):
    """``aten::col2im`` on float32/float64: the compiled kernel (compiled now, at load); None otherwise."""
    if not _float_input(node):
        return None
    from . import jit_fold as J

    J.compile_for(node.args[0].type.dtype)
    geometry = PerShape(node, ("output_size", "kernel_size", "dilation", "padding", "stride"),
                        functools.partial(_geometry, "aten::col2im"))

    def col2im_jit(self, output_size, kernel_size, dilation, padding, stride, *, out=None):
        if self.dtype.name not in _JIT_DTYPES or self.ndim not in (2, 3):
            return col2im(self, output_size, kernel_size, dilation, padding, stride, out=out)
        cols = self if self.ndim == 3 else self[None]
        h, w = size = _pair("aten::col2im", "output_size", output_size)
        (kh, kw), (dh, dw), (ph, pw), (sh, sw), (oh, ow) = geometry(size, kernel_size, dilation, padding, stride)
        n, ck, L = cols.shape
        if ck % (kh * kw) or L != oh * ow:
            return col2im(self, output_size, kernel_size, dilation, padding, stride, out=out)   # its message
        shape = (n, ck // (kh * kw), h, w)
        res = _target(out, shape if self.ndim == 3 else shape[1:], self.dtype)
        J.col2im_flat(np.ascontiguousarray(cols).reshape(-1), res.reshape(-1), n * (ck // (kh * kw)), h, w, kh, kw,
                      dh, dw, ph, pw, sh, sw, oh, ow)
        return _write(out, res) if res is not out else out
    return col2im_jit
