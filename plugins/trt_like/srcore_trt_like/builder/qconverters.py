"""Converters of the int8 layers: the ops of a quantized segment (``quantized::qconv2d``,
``qlinear``, ``add``, ``aten::quantize_per_tensor`` / ``dequantize``; relu, max pool and views
of quantized tensors through their float converters, which dispatch here by dtype).

A quantized layer's attributes are what its requantization needs, as plain numbers and arrays:
the weight's stored integers (``weight``), its per-output-channel scales and zero points, the
float bias, the input's and output's ``(scale, zero_point)`` and the output dtype's range. The
output tensors' dtypes and parameters come from the node's IR types (:func:`.convert.build_network`).
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import EngineBuildError
from srcore.plugin import QDTYPES

from .nodes import Converter, NodeView


def _pair(x):
    x = [int(i) for i in (x if isinstance(x, (list, tuple)) else [x])]
    return tuple(x * 2 if len(x) == 1 else x)


def _per_tensor(c: Converter, tid: int, v: NodeView, what: str) -> tuple[float, int]:
    t = c.net.tensors[tid]
    q = t.qparams
    if q is None or q.axis is not None:
        raise EngineBuildError(f"{v.where()}: the {what} is {t.dtype} without per-tensor parameters")
    return float(q.scale), int(q.zero_point)


def _out_params(v: NodeView, i: int = 0) -> tuple[str, tuple[float, int], tuple[int, int]]:
    t = v.node.outputs[i].type
    q = t.qparams
    if t.dtype not in QDTYPES or q is None or q.axis is not None:
        raise EngineBuildError(f"{v.where()}: its result is {t}, not quantized per tensor with known parameters")
    info = QDTYPES[t.dtype]
    return t.dtype, (float(q.scale), int(q.zero_point)), (info.qmin, info.qmax)


def _weight(v: NodeView, name: str) -> dict:
    w = v.const(name)
    q = getattr(w, "qparams", None)
    if q is None:
        raise EngineBuildError(f"{v.where()}: argument {name!r} is not a constant quantized weight")
    n = w.shape[0]
    if q.axis is None:
        scales, zps = np.full(n, q.scale, np.float32), np.full(n, q.zero_point, np.int64)
    elif q.axis == 0:
        scales, zps = np.asarray(q.scale, np.float64).astype(np.float32), np.asarray(q.zero_point, np.int64)
    else:
        raise EngineBuildError(f"{v.where()}: weight quantized per channel along axis {q.axis} (expected 0)")
    b = v.const({"quantized::qlinear": "B", "quantized::qlinear_relu": "B"}.get(v.op, "bias"))
    # whose requantization torch runs: the library it packed the weight for (the importer's record)
    arith = v.const("arith", "fbgemm") if "arith" in v.names else "fbgemm"
    if arith not in ("fbgemm", "onednn"):
        raise EngineBuildError(f"{v.where()}: arith={arith!r} is not fbgemm or onednn")
    return dict(weight=np.asarray(w).view(np.ndarray), w_scales=scales, w_zero_points=zps,
                bias=None if b is None else np.asarray(b, np.float32), arith=arith)


def quantize(v: NodeView, c: Converter) -> None:
    x = c.tensor(v.value("self"))
    _, yq, rng = _out_params(v)
    c.bind(v.node.outputs[0], c.net.add("quantize", [x], v.out_shape(), v.source, y_q=yq, range=rng))


def dequantize(v: NodeView, c: Converter) -> None:
    x = c.tensor(v.value("self"))
    xq = _per_tensor(c, x, v, "input")
    c.bind(v.node.outputs[0], c.net.add("dequantize", [x], v.out_shape(), v.source, x_q=xq))


def qconv(v: NodeView, c: Converter) -> None:
    x = c.tensor(v.value("qx"))
    xq = _per_tensor(c, x, v, "input")
    dtype, yq, rng = _out_params(v)
    attrs = _weight(v, "weight")
    if attrs["weight"].ndim != 4:
        raise EngineBuildError(f"{v.where()}: a 2-D conv needs a 4-D weight")
    attrs.update(stride=_pair(v.const("stride")), padding=_pair(v.const("padding")),
                 dilation=_pair(v.const("dilation")), groups=int(v.const("groups")),
                 x_q=xq, y_q=yq, range=rng, relu=v.op.endswith("_relu"), x_range=_x_range(c, x), y_dtype=dtype)
    c.bind(v.node.outputs[0], c.net.add("qconv", [x], v.out_shape(), v.source, **attrs))


def qlinear(v: NodeView, c: Converter) -> None:
    x = c.tensor(v.value("X"))
    xq = _per_tensor(c, x, v, "input")
    dtype, yq, rng = _out_params(v)
    attrs = _weight(v, "W")
    attrs.update(x_q=xq, y_q=yq, range=rng, relu=v.op.endswith("_relu"), x_range=_x_range(c, x), y_dtype=dtype)
    c.bind(v.node.outputs[0], c.net.add("qgemm", [x], v.out_shape(), v.source, **attrs))


def qadd(v: NodeView, c: Converter) -> None:
    a, b = c.tensor(v.value("qa")), c.tensor(v.value("qb"))
    if c.net.shape(a) != c.net.shape(b):
        raise EngineBuildError(f"{v.where()}: operands of shapes {c.net.shape(a)} and {c.net.shape(b)} "
                               f"(the int8 add takes equal shapes)")
    _, yq, rng = _out_params(v)
    c.bind(v.node.outputs[0], c.net.add("qadd", [a, b], v.out_shape(), v.source, a_q=_per_tensor(c, a, v, "qa"),
                                        b_q=_per_tensor(c, b, v, "qb"), y_q=yq, range=rng,
                                        relu=v.op.startswith("quantized::add_relu"), layout=_add_layout(v.op)))


def qconv_then_add(v: NodeView, c: Converter) -> None:
    """``quantized::qconv2d_then_add`` (the fuse pass's conv -> add) as its two layers: the conv to
    its own parameters (an int8 tensor of the engine), then the add in the loop order of ``layout``."""
    from srcore.plugin import QParams

    x = c.tensor(v.value("qx"))
    xq = _per_tensor(c, x, v, "input")
    dtype, yq, rng = _out_params(v)
    attrs = _weight(v, "weight")
    if attrs["weight"].ndim != 4:
        raise EngineBuildError(f"{v.where()}: a 2-D conv needs a 4-D weight")
    cq = (float(v.const("conv_scale")), int(v.const("conv_zero_point")))
    attrs.update(stride=_pair(v.const("stride")), padding=_pair(v.const("padding")),
                 dilation=_pair(v.const("dilation")), groups=int(v.const("groups")),
                 x_q=xq, y_q=cq, range=rng, relu=bool(v.const("conv_relu")), x_range=_x_range(c, x))
    y = c.net.add("qconv", [x], v.out_shape(), v.source, **attrs)
    c.net.tensors[y].dtype, c.net.tensors[y].qparams = dtype, QParams(*cq)
    other = c.tensor(v.value("other"))
    if c.net.shape(other) != c.net.shape(y):
        raise EngineBuildError(f"{v.where()}: other of shape {c.net.shape(other)}, the conv's {c.net.shape(y)}")
    layout = {"nchw": "nchw", "channels_last": "channels_last", "mixed_layout": "mixed"}[v.const("layout")]
    c.bind(v.node.outputs[0], c.net.add("qadd", [y, other], v.out_shape(), v.source, a_q=cq,
                                        b_q=_per_tensor(c, other, v, "other"), y_q=yq, range=rng,
                                        relu=bool(v.const("relu")), layout=layout))


def _add_layout(op: str) -> str:
    """Which of torch's loops the add follows: its inputs' layouts in torch, as the importer found them."""
    return "channels_last" if op.endswith("_channels_last") else "mixed" if op.endswith("_mixed_layout") else "nchw"


def qrelu(v: NodeView, c: Converter, x: int) -> None:
    _, zp = _per_tensor(c, x, v, "input")
    c.bind(v.node.outputs[0], c.net.add("qrelu", [x], v.out_shape(), v.source, zero_point=zp))


def qmax_pool(v: NodeView, c: Converter, x: int, attrs: dict) -> None:
    if attrs.get("ceil_mode"):
        raise EngineBuildError(f"{v.where()}: ceil_mode=True on a quantized tensor")
    qmin = QDTYPES[c.net.tensors[x].dtype].qmin
    c.bind(v.node.outputs[0], c.net.add("qmax_pool2d", [x], v.out_shape(), v.source, qmin=qmin, **attrs))


def qmean(v: NodeView, c: Converter, x: int, inner: int, mode: str) -> None:
    """The mean over the ``inner`` innermost dims of a quantized tensor, on its integers, to the
    input's parameters: torch's ``adaptive_avg_pool2d`` to 1x1 (``mode="adaptive"``, its NCHW
    kernel; ``"adaptive_nhwc"``, its NHWC one) or its fast ``mean`` over innermost dims (``"mean"``)."""
    shape = c.net.shape(x)
    if mode != "mean" and tuple(v.out_shape()[-2:]) != (1, 1):
        raise EngineBuildError(f"{v.where()}: the int8 adaptive average pool pools to 1x1, not {v.out_shape()[-2:]}")
    info = QDTYPES[c.net.tensors[x].dtype]
    c.bind(v.node.outputs[0], c.net.add("qmean", [x], v.out_shape(), v.source, inner_shape=tuple(shape[-inner:]),
                                        mode=mode, range=(info.qmin, info.qmax),
                                        zero_point=_per_tensor(c, x, v, "input")[1]))


def _x_range(c: Converter, x: int) -> int:
    t = c.net.tensors[x]
    info = QDTYPES[t.dtype]
    return max(int(t.qparams.zero_point) - info.qmin, info.qmax - int(t.qparams.zero_point))
