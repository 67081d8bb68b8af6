"""Upsampling of quantized tensors, as torch's QuantizedCPU kernels: nearest and nearest-exact (2-D,
3-D: the stored integers gathered, parameters kept) and bilinear 2-D (the output keeps the input's
parameters; torch's float32 arithmetic and its two roundings, see :func:`upsample_bilinear2d_out`).
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import QDTYPES, KernelError, aten_capability

from ._common import F32, buffer, channels_last, channels_last_buffer, ints, require_per_tensor, wrap


def _same(x, arr):
    return wrap(arr, x.qdtype, x.qparams)


def _nearest_index(out_len: int, in_len: int, scale, exact: bool = False) -> np.ndarray:
    """torch's source index of each output position, in float32 with ``s = 1 / scale`` (given) or
    ``in / out``: ``nearest_idx`` (the same size, exact doubling, else ``min(floor(i * s), in - 1)``), or
    nearest-exact's ``min(floor((i + 0.5) * s), in - 1)``."""
    i = np.arange(out_len)
    if not exact and out_len == in_len:
        return i
    if not exact and out_len == 2 * in_len:
        return i >> 1
    s = F32(1.0 / scale) if scale is not None and scale > 0 else F32(in_len) / F32(out_len)
    pos = (i.astype(F32) + F32(0.5)) * s if exact else i.astype(F32) * s
    return np.minimum(np.floor(pos).astype(np.int64), in_len - 1)


def _upsample_nearest(op: str, self, output_size, scales, exact: bool, out):
    """Nearest upsampling of the last ``len(output_size)`` dims of an (N, C, *spatial) tensor."""
    x = require_per_tensor(self, op)
    a, k = ints(x), len(output_size)
    if a.ndim != k + 2:
        raise KernelError(f"{op}: expects a {k + 2}-D input, got shape {list(a.shape)}")
    size = tuple(int(v) for v in output_size)
    idx = [_nearest_index(o, n, sc, exact) for o, n, sc in zip(size, a.shape[2:], scales)]
    res = buffer(out, a.shape[:2] + size, x.qdtype)
    res[...] = a[(slice(None), slice(None), *np.ix_(*idx))]
    return _same(x, res)


def upsample_nearest2d_out(self, output_size, scales_h=None, scales_w=None, *, out=None):
    return _upsample_nearest("aten::upsample_nearest2d", self, output_size, (scales_h, scales_w), False, out)


def upsample_nearest3d_out(self, output_size, scales_d=None, scales_h=None, scales_w=None, *, out=None):
    return _upsample_nearest("aten::upsample_nearest3d", self, output_size, (scales_d, scales_h, scales_w), False, out)


def upsample_nearest_exact2d_out(self, output_size, scales_h=None, scales_w=None, *, out=None):
    return _upsample_nearest("aten::_upsample_nearest_exact2d", self, output_size, (scales_h, scales_w), True, out)


def upsample_nearest_exact3d_out(self, output_size, scales_d=None, scales_h=None, scales_w=None, *, out=None):
    return _upsample_nearest("aten::_upsample_nearest_exact3d", self, output_size, (scales_d, scales_h, scales_w),
                             True, out)


def _upsample_vec(op: str, k: int, exact: bool):
    """The ``.vec`` overload (``F.interpolate``'s): ``output_size``, or ``floor(in * s)`` with the scales."""
    def vec(input, output_size, scale_factors):
        a = ints(require_per_tensor(input, op))
        if output_size is not None:
            return _upsample_nearest(op, input, output_size, (None,) * k, exact, None)
        if scale_factors is None:
            raise KernelError(f"{op}: give output_size or scale_factors")
        if a.ndim != k + 2 or len(scale_factors) != k:
            raise KernelError(f"{op}: {len(scale_factors)} scale factors for an input of shape {list(a.shape)}")
        sc = [float(s) for s in scale_factors]
        size = [int(np.floor(n * s)) for n, s in zip(a.shape[2:], sc)]
        return _upsample_nearest(op, input, size, sc, exact, None)
    return vec


upsample_nearest2d_vec = _upsample_vec("aten::upsample_nearest2d", 2, False)
upsample_nearest3d_vec = _upsample_vec("aten::upsample_nearest3d", 3, False)
upsample_nearest_exact2d_vec = _upsample_vec("aten::_upsample_nearest_exact2d", 2, True)
upsample_nearest_exact3d_vec = _upsample_vec("aten::_upsample_nearest_exact3d", 3, True)


# -- bilinear ---------------------------------------------------------------------------------------------
#: channels per vectorized step of torch's channels-last bilinear kernel: a quarter of ``Vectorized<qint8>``
#: under AVX2 (the kernel is registered with plain REGISTER_DISPATCH: no AVX512 build, see
#: ``srcore.plugin.vector_bytes``)
_NHWC_VEC_CHANNELS = 8


def _fma(a, b, c):
    """float32 ``fma(a, b, c)``: one rounding of the exact ``a * b + c`` (a product of two float32 values
    is exact in float64)."""
    return (np.asarray(a, np.float64) * b + c).astype(F32)


def _linear_taps(out_len: int, in_len: int, align_corners: bool, scale, fused: bool):
    """torch's ``area_pixel_compute_scale`` / ``area_pixel_compute_source_index`` in float32 (``fused``:
    ``scale * (i + 0.5) - 0.5`` as one fma): per output position the first source index, the offset
    (0 or 1) to the second, and the two weights."""
    if align_corners:
        r = F32(in_len - 1) / F32(out_len - 1) if out_len > 1 else F32(0)
        src = r * np.arange(out_len, dtype=F32)
    else:
        r = F32(1.0 / scale) if scale is not None and scale > 0 else F32(in_len) / F32(out_len)
        i = np.arange(out_len, dtype=F32) + F32(0.5)
        src = _fma(r, i, F32(-0.5)) if fused else r * i - F32(0.5)
        src = np.where(src < 0, F32(0), src).astype(F32)
    i0 = src.astype(np.int64)
    step = (i0 < in_len - 1).astype(np.int64)
    l1 = (src - i0.astype(F32)).astype(F32)
    return i0, step, (F32(1) - l1).astype(F32), l1


def _blend(src, taps_h, taps_w, mul_add):
    """``h0 * (w0 * q00 + w1 * q01) + h1 * (w0 * q10 + w1 * q11)`` over (N, C, H, W) ``src``, each
    ``a * x + b * y`` as ``mul_add(a, x, b, y)``."""
    h0i, hs, h0, h1 = taps_h
    w0i, ws, w0, w1 = taps_w
    hi, wi, hs, ws = h0i[:, None], w0i[None, :], hs[:, None], ws[None, :]
    top = mul_add(w0, src[:, :, hi, wi], w1, src[:, :, hi, wi + ws])
    bottom = mul_add(w0, src[:, :, hi + hs, wi], w1, src[:, :, hi + hs, wi + ws])
    return mul_add(h0[:, None], top, h1[:, None], bottom)


def _plain(a, x, b, y):
    return a * x + b * y


def _fused_first(a, x, b, y):
    return _fma(a, x, b * y)


def _fused_second(a, x, b, y):
    return _fma(b, y, a * x)


def upsample_bilinear2d_out(self, output_size, align_corners, scales_h=None, scales_w=None, *, out=None):
    """torch's quantized bilinear upsampling, the output to the input's parameters:
    ``h0 * (w0 * q00 + w1 * q01) + h1 * (w0 * q10 + w1 * q11) - zp`` in float32 on the stored integers,
    requantized with a scale of 1 (``nearbyint(zp + r)``). Torch's NCHW kernel computes it as written;
    its channels-last one (a conv's output, as srcore holds it too) is built with fma contraction:
    the source positions fused, and each ``a * x + b * y`` fused on its first product, except over whole
    blocks of 8 channels (its AVX2 vector loop), where the second one is (measured against torch
    2.13 on quint8/qint8, zero points odd and even, channel counts around the block); its
    DEFAULT-capability build (``ATEN_CPU_CAPABILITY=default``) computes as the NCHW one."""
    op = "aten::upsample_bilinear2d"
    xq = require_per_tensor(self, op)
    a = ints(xq)
    info, zp = QDTYPES[xq.qdtype], xq.qparams.zero_point
    if a.ndim != 4 or a.shape[1] == 0:
        raise KernelError(f"{op}: expects a non-empty 4-D input, got shape {list(a.shape)}")
    oh, ow = (int(v) for v in output_size)
    N, C, H, W = a.shape
    if min(H, W, oh, ow) <= 0:
        raise KernelError(f"{op}: input ({H}, {W}) and output ({oh}, {ow}) sizes must be greater than 0")
    nhwc = channels_last(a) is not None
    shape = (N, C, oh, ow)
    cl = channels_last_buffer(out, shape, xq.qdtype) if nhwc else None
    res = cl[0] if cl is not None else buffer(out, shape, xq.qdtype)
    if not nhwc and (H, W) == (oh, ow):   # torch's NCHW kernel copies
        res[...] = a
        return _same(xq, res)
    # (torch's DEFAULT-capability build of the channels-last kernel: no fma, no vector loop)
    fused = nhwc and aten_capability() != "DEFAULT"
    taps_h = _linear_taps(oh, H, align_corners, scales_h, fused)
    taps_w = _linear_taps(ow, W, align_corners, scales_w, fused)
    src = a.astype(F32)
    if not fused:
        r = _blend(src, taps_h, taps_w, _plain)
    else:
        k = (C // _NHWC_VEC_CHANNELS) * _NHWC_VEC_CHANNELS
        r = np.concatenate([_blend(src[:, :k], taps_h, taps_w, _fused_second),
                            _blend(src[:, k:], taps_h, taps_w, _fused_first)], axis=1)
    q = np.rint(F32(zp) + (r - F32(zp)))      # quantize_val: the zero point added back before rounding
    res[...] = np.clip(q, info.qmin, info.qmax)
    return _same(xq, res)


def upsample_bilinear2d_vec(input, output_size, align_corners, scale_factors):
    op = "aten::upsample_bilinear2d"
    a = ints(require_per_tensor(input, op))
    if output_size is not None:
        return upsample_bilinear2d_out(input, output_size, align_corners)
    if scale_factors is None or a.ndim != 4 or len(scale_factors) != 2:
        raise KernelError(f"{op}: give output_size or two scale_factors for a 4-D input (shape {list(a.shape)})")
    sh, sw = (float(s) for s in scale_factors)
    size = (int(np.floor(a.shape[2] * sh)), int(np.floor(a.shape[3] * sw)))
    return upsample_bilinear2d_out(input, size, align_corners, sh, sw)
