"""3-D (video) layers as the engine's 2-D ones where that is exact, so that every 2-D tactic serves
them: a ``(kt, 1, 1)`` convolution (R(2+1)D's temporal one) is a ``(kt, 1)`` 2-D conv on the
``(N, C, T, H * W)`` view; max, average and adaptive average pooling are separable over the box,
so a 3-D pool is a 2-D pool over (H, W) on the ``(N, C * T, H, W)`` view, then one over T on the
``(N, C, T, Ho * Wo)`` view (each skipped where it is the identity; views are ``reshape`` layers, no
copies). Max and NaN propagate per stage as torch's; an average's divisor is the product of the
per-dim counts in torch's rule too (padding counted or not). Any other 3-D convolution is a
``conv3d`` layer (``tactics/conv3d.py``)."""
from __future__ import annotations

import numpy as np

from srcore.plugin import EngineBuildError

from .nodes import Converter, NodeView


def triple(x) -> tuple[int, int, int]:
    x = [int(i) for i in (x if isinstance(x, (list, tuple)) else [x])]
    return tuple(x * 3 if len(x) == 1 else x)


def conv3d(v: NodeView, c: Converter) -> None:
    w, b = v.const("weight"), v.const("bias")
    if not isinstance(w, np.ndarray) or w.ndim != 5:
        raise EngineBuildError(f"{v.where()}: a 3-D conv needs a constant 5-D weight")
    stride, padding, dilation = (triple(v.const(a)) for a in ("stride", "padding", "dilation"))
    groups = int(v.const("groups"))
    x = c.tensor(v.value("input"))
    N, C, T, H, W = c.net.shape(x)
    if groups < 1 or C % groups or w.shape[0] % groups or w.shape[1] * groups != C:   # (torch raises)
        raise EngineBuildError(f"{v.where()}: weight {tuple(w.shape)} and groups={groups} do not fit {C} channels")
    out = v.out_shape()
    w = np.ascontiguousarray(w, np.float32)
    bias = None if b is None else np.asarray(b, np.float32)
    if w.shape[3:] == (1, 1) and stride[1:] == (1, 1) and padding[1:] == (0, 0):
        # temporal (kt, 1, 1): a 2-D conv of the (N, C, T, H * W) view
        x2 = c.net.add("reshape", [x], (N, C, T, H * W), v.source)
        y = c.net.add("conv", [x2], (N, out[1], out[2], H * W), v.source, weight=np.ascontiguousarray(w[..., 0]),
                      bias=bias, stride=(stride[0], 1), padding=(padding[0], 0), dilation=(dilation[0], 1),
                      groups=groups, relu=False, residual=False)
        c.bind(v.node.outputs[0], c.net.add("reshape", [y], out, v.source))
        return
    c.bind(v.node.outputs[0], c.net.add("conv3d", [x], out, v.source, weight=w, bias=bias, stride=stride,
                                        padding=padding, dilation=dilation, groups=groups))


def _separable(v: NodeView, c: Converter, kind: str, kernel, stride, padding, **attrs) -> None:
    """A 3-D pool as a 2-D ``kind`` layer over (H, W), then one over T (each only where it pools)."""
    x = c.tensor(v.node.inputs[0])
    N, C, T, H, W = c.net.shape(x)
    out = v.out_shape()
    To, Ho, Wo = out[2:]
    extra = {k: (a[0], a[1:]) for k, a in attrs.items() if isinstance(a, tuple)}
    same = {k: a for k, a in attrs.items() if not isinstance(a, tuple)}
    y = x
    if (tuple(kernel[1:]), tuple(stride[1:]), tuple(padding[1:])) != ((1, 1), (1, 1), (0, 0)):
        y = c.net.add("reshape", [y], (N, C * T, H, W), v.source)
        y = c.net.add(kind, [y], (N, C * T, Ho, Wo), v.source, kernel=tuple(kernel[1:]), stride=tuple(stride[1:]),
                      padding=tuple(padding[1:]), **{k: tuple(a[1]) for k, a in extra.items()}, **same)
    if (kernel[0], stride[0], padding[0]) != (1, 1, 0):
        y = c.net.add("reshape", [y], (N, C, T, Ho * Wo), v.source)
        y = c.net.add(kind, [y], (N, C, To, Ho * Wo), v.source, kernel=(kernel[0], 1), stride=(stride[0], 1),
                      padding=(padding[0], 0), **{k: (a[0], 1) for k, a in extra.items()}, **same)
    c.bind(v.node.outputs[0], c.net.add("reshape", [y], out, v.source))


def max_pool3d(v: NodeView, c: Converter) -> None:
    k = triple(v.const("kernel_size"))
    s = v.const("stride")
    _separable(v, c, "max_pool2d", k, triple(s) if s else k, triple(v.const("padding", 0)),
               dilation=triple(v.const("dilation", 1)), ceil_mode=bool(v.const("ceil_mode", False)))


def avg_pool3d(v: NodeView, c: Converter) -> None:
    k = triple(v.const("kernel_size"))
    s = v.const("stride")
    _separable(v, c, "avg_pool2d", k, triple(s) if s else k, triple(v.const("padding", 0)),
               ceil_mode=bool(v.const("ceil_mode", False)),
               count_include_pad=bool(v.const("count_include_pad", True)), divisor_override=None)


def adaptive_avg_pool3d(v: NodeView, c: Converter) -> None:
    x = c.tensor(v.node.inputs[0])
    N, C, T, H, W = c.net.shape(x)
    out = v.out_shape()
    To, Ho, Wo = out[2:]
    if (To, Ho, Wo) == (1, 1, 1):   # a global average: one plane of T * H * W per channel
        y = c.net.add("reshape", [x], (N, C, 1, T * H * W), v.source)
        y = c.net.add("adaptive_avg_pool2d", [y], (N, C, 1, 1), v.source, output_size=(1, 1))
        c.bind(v.node.outputs[0], c.net.add("reshape", [y], out, v.source))
        return
    y = x
    if (Ho, Wo) != (H, W):
        y = c.net.add("reshape", [y], (N, C * T, H, W), v.source)
        y = c.net.add("adaptive_avg_pool2d", [y], (N, C * T, Ho, Wo), v.source, output_size=(Ho, Wo))
    if To != T:
        y = c.net.add("reshape", [y], (N, C, T, Ho * Wo), v.source)
        y = c.net.add("adaptive_avg_pool2d", [y], (N, C, To, Ho * Wo), v.source, output_size=(To, Ho * Wo))
    c.bind(v.node.outputs[0], c.net.add("reshape", [y], out, v.source))
