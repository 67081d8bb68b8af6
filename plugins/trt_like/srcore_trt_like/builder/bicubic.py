"""Bicubic resizing (``upsample_bicubic2d``, ``F.interpolate(mode="bicubic")``) from existing layers:
per spatial dim, one ``index_select`` of the four clamped taps of every output position, a ``mul``
by their weights and a ``sum`` over the taps, the last dim first, then the rows, as ATen's separable
``cubic_interp1d`` of four interpolated rows.

The tables are ATen's (``UpSample.h``, float32 as its ``opmath``): the source index
``scale * (dst + 0.5) - 0.5`` (``scale * dst`` with ``align_corners``; never clamped at 0 for
cubic), ``guard_index_and_lambda`` (the floor at most ``n - 1``, the fraction clamped to [0, 1]),
Keys' cubic convolution with A = -0.75 and taps ``floor - 1 .. floor + 2`` clamped into the dim.
Every tap is read, zero weights too, so a NaN spreads over the 4 x 4 neighbourhood as in torch.
"""
from __future__ import annotations

import numpy as np

from .nodes import Converter, NodeView

f32 = np.float32
#: Keys' cubic convolution parameter, torch's
A = f32(-0.75)


def _scale(n_in: int, n_out: int, scale, align_corners: bool) -> np.float32:
    """ATen's ``area_pixel_compute_scale`` in float32."""
    if align_corners:
        return f32(n_in - 1) / f32(n_out - 1) if n_out > 1 else f32(0)
    if scale is not None and scale > 0:
        return f32(1.0 / scale)
    return f32(n_in) / f32(n_out)


def cubic_taps(n_in: int, n_out: int, scale, align_corners: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(index, weight)``, each (4, n_out): the clamped source taps of every output position and
    their float32 weights (ATen's ``get_cubic_upsample_coefficients``)."""
    s = _scale(n_in, n_out, scale, align_corners)
    dst = np.arange(n_out, dtype=f32)
    real = s * dst if align_corners else s * (dst + f32(0.5)) - f32(0.5)
    i0 = np.minimum(np.floor(real).astype(np.int64), n_in - 1)
    t = np.clip(real - i0.astype(f32), f32(0), f32(1)).astype(f32)

    def conv1(x):   # |x| <= 1
        return ((A + f32(2)) * x - (A + f32(3))) * x * x + f32(1)

    def conv2(x):   # 1 < |x| < 2
        return ((A * x - f32(5) * A) * x + f32(8) * A) * x - f32(4) * A
    u = f32(1) - t
    weight = np.stack([conv2(t + f32(1)), conv1(t), conv1(u), conv2(u + f32(1))]).astype(f32)
    index = np.clip(i0[None, :] + np.arange(-1, 3)[:, None], 0, n_in - 1)
    return index, weight


def _along(v: NodeView, c: Converter, x: int, dim: int, n_out: int, scale, align: bool) -> int:
    """``x`` resized along ``dim`` (of a 4-D tensor): one gather of the four taps of every output
    position (tap major), viewed with a dim of 4, times the weights, summed over the 4 in tap order
    (numpy's reduction along a middle dim adds in order: the sum of the four products as a chain)."""
    shape = c.net.shape(x)
    out = shape[:dim] + (n_out,) + shape[dim + 1:]
    four = shape[:dim] + (4, n_out) + shape[dim + 1:]
    index, weight = cubic_taps(shape[dim], n_out, scale, align)
    g = c.net.add("index_select", [x], shape[:dim] + (4 * n_out,) + shape[dim + 1:], v.source, dim=dim,
                  index=index.reshape(-1))
    g = c.net.add("reshape", [g], four, v.source)
    w = c.net.constant(weight.reshape((4, n_out) + (1,) * (len(shape) - 1 - dim)))
    t = c.net.add("pointwise", [g, w], four, v.source, op="mul", args=(("in", 0), ("in", 1)), params={})
    return c.net.add("reduce", [t], out, v.source, op="sum", dims=(dim,))


def bicubic(v: NodeView, c: Converter, x: int, align: bool, scales) -> None:
    """Resize the last two dims of the 4-D ``x`` to the node's output size; ``scales`` (h, w) as the
    node gives them (None: from the sizes)."""
    out = v.out_shape()
    y = _along(v, c, x, 3, out[3], scales[1], align)
    c.bind(v.node.outputs[0], _along(v, c, y, 2, out[2], scales[0], align))
