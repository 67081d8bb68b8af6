"""Upsampling: nearest and (bi)linear, separable over the spatial dims, and ``aten::__interpolate``.

Index and weight arithmetic follows ATen's ``UpSample.h`` (``nearest_idx``,
``area_pixel_compute_source_index``) in the input's float type, so results
match torch bit-for-bit on the indices and closely on the weights.
"""
from __future__ import annotations

import numpy as np

from srcore.errors import KernelError


def _ftype(x):
    return x.dtype if x.dtype.kind == "f" else np.dtype(np.float32)


def _scale(n_in, n_out, scale, align_corners, ft):
    if align_corners:
        return ft.type((n_in - 1) / (n_out - 1)) if n_out > 1 else ft.type(0)
    if scale is not None and scale > 0:
        return ft.type(1.0 / scale)
    return ft.type(n_in) / ft.type(n_out)


def _nearest_index(n_in, n_out, scale, exact, ft):
    if n_out == n_in and not exact:
        return np.arange(n_out)
    s = _scale(n_in, n_out, scale, False, ft)
    dst = np.arange(n_out, dtype=ft)
    src = np.floor((dst + ft.type(0.5)) * s) if exact else np.floor(dst * s)
    return np.minimum(src.astype(np.int64), n_in - 1)


def _sizes(x, nd, output_size, scale_factors):
    sp = x.shape[-nd:]
    if output_size is not None:
        osz = tuple(int(o) for o in output_size)
        return osz, [None] * nd if not scale_factors else list(scale_factors)
    if scale_factors is None:
        raise KernelError("upsample: either output_size or scale_factors must be given")
    sf = list(scale_factors)
    if len(sf) == 1:
        sf = sf * nd
    return tuple(int(n * s) for n, s in zip(sp, sf)), sf


def nearest(x, osz, scales, exact=False, out=None):
    """Nearest-neighbour resize of the trailing ``len(osz)`` dims."""
    nd = len(osz)
    ft = _ftype(x)
    for i, (n, o, s) in enumerate(zip(x.shape[-nd:], osz, scales)):
        idx = _nearest_index(n, o, s, exact, ft)
        axis = x.ndim - nd + i
        last = i == nd - 1
        x = np.take(x, idx, axis=axis, out=out if last and out is not None else None)
    return x


def linear(x, osz, align_corners, scales, out=None):
    """(Bi/tri)linear resize of the trailing dims, one separable pass per dim."""
    nd = len(osz)
    ft = _ftype(x)
    for i, (n, o, s) in enumerate(zip(x.shape[-nd:], osz, scales)):
        sc = _scale(n, o, s, align_corners, ft)
        dst = np.arange(o, dtype=ft)
        if align_corners:
            src = sc * dst
        else:
            src = np.maximum(sc * (dst + ft.type(0.5)) - ft.type(0.5), ft.type(0))
        i0 = np.minimum(src.astype(np.int64), n - 1)
        i1 = i0 + (i0 < n - 1)
        l1 = np.clip(src - i0.astype(ft), 0, 1).astype(ft)
        l0 = (ft.type(1) - l1).astype(ft)
        axis = x.ndim - nd + i
        bshape = (o,) + (1,) * (x.ndim - axis - 1)
        a = np.take(x, i0, axis=axis)
        np.multiply(a, l0.reshape(bshape), out=a)
        b = np.take(x, i1, axis=axis)
        np.multiply(b, l1.reshape(bshape), out=b)
        if i == nd - 1 and out is not None:
            x = np.add(a, b, out=out)
        else:
            x = np.add(a, b, out=a)
    return x


def upsample_nearest2d(self, output_size, scales_h=None, scales_w=None, out=None):
    """``aten::upsample_nearest2d``."""
    return nearest(self, tuple(output_size), [scales_h, scales_w], out=out)


def upsample_nearest2d_vec(input, output_size, scale_factors, out=None):
    """``aten::upsample_nearest2d.vec``."""
    osz, sc = _sizes(input, 2, output_size, scale_factors)
    return nearest(input, osz, sc, out=out)


def upsample_bilinear2d(self, output_size, align_corners, scales_h=None, scales_w=None, out=None):
    """``aten::upsample_bilinear2d``."""
    return linear(self, tuple(output_size), align_corners, [scales_h, scales_w], out=out)


def upsample_bilinear2d_vec(input, output_size, align_corners, scale_factors, out=None):
    """``aten::upsample_bilinear2d.vec``."""
    osz, sc = _sizes(input, 2, output_size, scale_factors)
    return linear(input, osz, align_corners, sc, out=out)


_LINEAR_MODES = {"linear": 1, "bilinear": 2, "trilinear": 3}


def __interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                  recompute_scale_factor=None, antialias=False, out=None):
    """``aten::__interpolate`` (all overloads): nearest, nearest-exact, linear, bilinear, trilinear."""
    nd = input.ndim - 2
    if nd < 1 or antialias:
        raise KernelError(f"interpolate: unsupported input rank {input.ndim} or antialias={antialias}")
    if size is not None and isinstance(size, int):
        size = [size] * nd
    if scale_factor is not None and not isinstance(scale_factor, (list, tuple)):
        scale_factor = [scale_factor] * nd
    osz, sc = _sizes(input, nd, size, scale_factor)
    if size is not None or recompute_scale_factor:
        sc = [None] * nd   # torch passes no scales when the size was given or recomputed
    if mode in ("nearest", "nearest-exact"):
        return nearest(input, osz, sc, exact=mode == "nearest-exact", out=out)
    if _LINEAR_MODES.get(mode) == nd:
        return linear(input, osz, bool(align_corners), sc, out=out)
    raise KernelError(f"interpolate: mode {mode!r} is not supported for a {input.ndim}-D input")
