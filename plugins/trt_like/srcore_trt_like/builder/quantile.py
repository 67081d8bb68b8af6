"""``torch.quantile`` with constant ``q`` from existing layers, as ATen's ``quantile_compute``: a
``sort`` along the dim (NaN last), the ranks ``q * (n - 1)`` in float32 (constants here: the dim's
size is known), ``index_select`` of the values below (and above) each rank, the interpolation
(``lower``, ``higher``, ``nearest`` (half to even), ``linear``, ``midpoint``: torch's two-branch
``lerp``, the branch chosen by the constant weight), and NaN where the row holds a NaN (torch moves
such a row's rank to its last, NaN, value). The q dim goes first, as torch's result.
"""
from __future__ import annotations

import math

import numpy as np

from .nodes import Converter, NodeView

f32 = np.float32


def ranks(q: np.ndarray, n: int, mode: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(below, above, weight)`` per q: the float32 rank ``q * (n - 1)`` rounded as ``mode`` says,
    its truncation, its ceiling and the lerp weight (``midpoint``: 0.5)."""
    r = np.asarray(q, f32).reshape(-1) * f32(n - 1)
    r = {"lower": np.floor, "higher": np.ceil, "nearest": np.round}.get(mode, lambda a: a)(r).astype(f32)
    below = r.astype(np.int64)
    weight = np.full(r.shape, f32(0.5)) if mode == "midpoint" else (r - below.astype(f32)).astype(f32)
    return below, np.ceil(r).astype(np.int64), weight


def quantile(v: NodeView, c: Converter) -> None:
    x = c.tensor(v.value("self"))
    shape = c.net.shape(x)
    q = np.asarray(v.const("q"), f32)
    dim = v.const("dim", None)
    if dim is None:
        shape = (math.prod(shape),)
        x = c.net.add("reshape", [x], shape, v.source)
        d = 0
    else:
        d = int(dim) % max(len(shape), 1)
        if not shape:   # (a 0-d input along dim 0 or -1: one value)
            shape = (1,)
            x = c.net.add("reshape", [x], shape, v.source)
    n, nq = shape[d], max(q.size, 1)
    mode = v.const("interpolation", "linear")
    below, above, weight = ranks(q, n, mode)
    srt = c.net.add("sort", [x], shape, v.source, n_out=2, dim=d, descending=False)
    c.net.tensors[srt + 1].dtype = "int64"
    at = shape[:d] + (nq,) + shape[d + 1:]

    def pick(index, size=nq):
        return c.net.add("index_select", [srt], shape[:d] + (size,) + shape[d + 1:], v.source, dim=d, index=index)

    def pw(op, ins, args, **params):
        return c.net.add("pointwise", ins, at, v.source, op=op, args=args, params=params)
    y = pick(below)
    if mode in ("linear", "midpoint"):
        hi = pick(above)
        wshape = (1,) * d + (nq,) + (1,) * (len(shape) - d - 1)
        w = c.net.constant(weight.reshape(wshape))
        diff = pw("sub", [hi, y], (("in", 0), ("in", 1)))
        low = pw("add", [y, pw("mul", [w, diff], (("in", 0), ("in", 1)))], (("in", 0), ("in", 1))) \
            if (weight < 0.5).any() else None
        high = None
        if (weight >= 0.5).any():   # (torch's lerp: end - (end - start) * (1 - w) from w = 0.5 on)
            one_minus = c.net.constant((f32(1) - weight).reshape(wshape))
            high = pw("sub", [hi, pw("mul", [diff, one_minus], (("in", 0), ("in", 1)))], (("in", 0), ("in", 1)))
        small = weight < 0.5
        if small.all():
            y = low
        elif not small.any():
            y = high
        else:
            y = c.net.add("where", [low, high], at, v.source, args=(("in", 0), ("in", 1)),
                          mask=np.ascontiguousarray(small.reshape(wshape)))
    last = pick(np.array([n - 1], np.int64), 1)
    nan = c.net.add("compare", [last], c.net.shape(last), v.source, op="ne", args=(("in", 0), ("in", 0)))
    c.net.tensors[nan].dtype = "bool"
    y = c.net.add("where", [y, nan], at, v.source, args=(("const", float("nan")), ("in", 0)), mask=None)
    if q.ndim == 1 and d != 0:
        perm = (d,) + tuple(i for i in range(len(shape)) if i != d)
        y = c.net.add("permute", [y], tuple(at[i] for i in perm), v.source, perm=perm)
    c.bind(v.node.outputs[0], c.net.add("reshape", [y], v.out_shape(), v.source))
