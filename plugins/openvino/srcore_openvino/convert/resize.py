"""Upsampling (``F.interpolate``'s nearest and linear modes) with torch's index arithmetic.

Spatial sizes must be static (batch and channels may be dynamic): the source indices and the
linear weights of every output position are computed here, in float32 as torch's CPU kernels
compute them, and baked in as constants; the engine gathers rows and columns and blends them
(``w0 * x[i0] + w1 * x[i1]`` per spatial dim, both terms always, as torch: an infinity next to
a zero weight gives NaN as in torch). So the picks and weights are torch's by construction,
not by matching OpenVINO's Interpolate modes to torch's coordinate rules.
"""
from __future__ import annotations

import math

import numpy as np

from .table import arg_shape, i64, out, register

F32 = np.float32


def _spatial_n(op: str) -> int:
    return 3 if "3d" in op else 2 if "2d" in op else 1


def _out_shape(n):
    outs = n.output_types
    return getattr(outs[0], "shape", None) if len(outs) == 1 else None


def _static(shape) -> bool:
    return shape is not None and all(isinstance(d, int) for d in shape)


def _scales(n, k: int):
    """The scale factors torch's kernel receives (None per dim where it computes in/out)."""
    if "scale_factors" in [a.name for a in n.args] or n.op.endswith(".vec"):
        sf = n.const("scale_factors", None)
        return [None] * k if sf is None else [float(v) for v in sf]
    names = ["scales"] if k == 1 else ["scales_h", "scales_w"] if k == 2 else ["scales_d", "scales_h", "scales_w"]
    return [None if n.const(s, None) is None else float(n.const(s)) for s in names]


def _ok(n) -> bool:
    x, y = arg_shape(n, 0), _out_shape(n)
    k = _spatial_n(n.op)
    if x is None or y is None or len(x) != k + 2 or len(y) != k + 2:
        return False
    if not _static(x[2:]) or not _static(y[2:]) or any(d == 0 for d in (*x[2:], *y[2:])):
        return False
    sc = _scales(n, k)
    if len(sc) != k or any(s is not None and not (s > 0 and math.isfinite(s)) for s in sc):
        return False
    return "align_corners" not in [a.name for a in n.args] or isinstance(n.const("align_corners", False), bool)


def _scale(in_size: int, out_size: int, scale) -> np.float32:
    """torch's ``compute_scales_value``: 1 / the given scale factor, else in / out."""
    if scale is not None and scale > 0:
        return F32(1.0 / scale)
    return F32(in_size) / F32(out_size)


def nearest_index(in_size: int, out_size: int, scale) -> np.ndarray:
    """torch's ``nearest_idx``: the source index of each output position."""
    dst = np.arange(out_size)
    if out_size == in_size:
        return dst
    if out_size == 2 * in_size:
        return dst >> 1
    s = _scale(in_size, out_size, scale)
    return np.minimum(np.floor(dst.astype(F32) * s).astype(np.int64), in_size - 1)


def linear_weights(in_size: int, out_size: int, scale, align_corners: bool):
    """torch's linear source indices and weights: (i0, i1, w0, w1) per output position."""
    dst = np.arange(out_size).astype(F32)
    if out_size == in_size:   # torch copies: both indices the same, weights 1 and 0
        i = np.arange(out_size)
        return i, i, np.ones(out_size, F32), np.zeros(out_size, F32)
    if align_corners:
        s = F32(in_size - 1) / F32(out_size - 1) if out_size > 1 else F32(0)
        src = s * dst
    else:
        s = _scale(in_size, out_size, scale)
        # scale * (dst + 0.5) - 0.5 rounded once, as the fused multiply-add torch's AVX2 kernels
        # compile it to (exact in float64, then rounded): a coordinate that is an integer in exact
        # arithmetic keeps its tiny fraction, and weights torch gives a 1e-8 we give too
        src = (np.float64(s) * (dst + F32(0.5)).astype(np.float64) - 0.5).astype(F32)
        src = np.maximum(src, F32(0))
    i0 = np.minimum(src.astype(np.int64), in_size - 1)
    i1 = i0 + (i0 < in_size - 1)
    w1 = np.clip(src - i0.astype(F32), F32(0), F32(1)).astype(F32)
    w0 = (F32(1) - w1).astype(F32)
    return i0, i1, w0, w1


def _weights_along(o, w: np.ndarray, axis: int, r: int):
    shape = [1] * r
    shape[axis] = w.size
    return o.constant(np.ascontiguousarray(w.reshape(shape), dtype=F32)).output(0)


@register("aten::upsample_nearest1d.vec", "aten::upsample_nearest2d.vec", "aten::upsample_nearest3d.vec",
          "aten::upsample_nearest1d", "aten::upsample_nearest2d", "aten::upsample_nearest3d",
          consts=("output_size", "scale_factors", "scales", "scales_h", "scales_w", "scales_d"), check=_ok)
def _nearest(c):
    o, x = c.o, c.x("input" if "input" in c.names else "self")
    k = _spatial_n(c.op)
    xs, ys = list(arg_shape(_Node(c), 0)), list(_out_shape(_Node(c)))
    scales = _scales(_Node(c), k)
    for j in range(k):
        axis = 2 + j
        if xs[axis] == ys[axis]:   # torch copies (nearest_idx)
            continue
        idx = nearest_index(xs[axis], ys[axis], scales[j])
        x = out(o.gather(x, i64(o, idx), i64(o, axis)))
    return x


@register("aten::upsample_linear1d.vec", "aten::upsample_bilinear2d.vec", "aten::upsample_trilinear3d.vec",
          "aten::upsample_linear1d", "aten::upsample_bilinear2d", "aten::upsample_trilinear3d",
          consts=("output_size", "align_corners", "scale_factors", "scales", "scales_h", "scales_w", "scales_d"),
          check=_ok)
def _linear(c):
    o, x = c.o, c.x("input" if "input" in c.names else "self")
    k = _spatial_n(c.op)
    node = _Node(c)
    xs, ys = list(arg_shape(node, 0)), list(_out_shape(node))
    scales = _scales(node, k)
    align = bool(c.const("align_corners"))
    r = k + 2
    for j in range(k):
        axis = 2 + j
        i0, i1, w0, w1 = linear_weights(xs[axis], ys[axis], scales[j], align)
        a = out(o.gather(x, i64(o, i0), i64(o, axis)))
        b = out(o.gather(x, i64(o, i1), i64(o, axis)))
        x = out(o.add(out(o.multiply(a, _weights_along(o, w0, axis, r))),
                      out(o.multiply(b, _weights_along(o, w1, axis, r)))))
    return x


class _Node:
    """The converter's node as the checks see it (argument types and constants by name)."""

    def __init__(self, c):
        self._c = c
        self.op = c.op
        self.args = [_Arg(a.name, v) for a, v in zip(c.args, c.node.inputs)]
        self.output_types = [v.type for v in c.node.outputs]

    def const(self, name, default=None):
        return self._c.const(name, default)


class _Arg:
    def __init__(self, name, value):
        self.name = name
        self.type = value.type
