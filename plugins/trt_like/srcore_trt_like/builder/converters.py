"""Node -> layer converters, one small function per op family; the op-support table
(:data:`.support.SUPPORT`) names the converter of every op.

Pointwise layers carry ``op`` (the pointwise vocabulary of ``pointwise_ops.py``),
``args`` (each ``("in", k)``: the layer's k-th input tensor, or ``("const", x)``: a
float) and ``params`` (op parameters such as a clamp's bounds).
"""
from __future__ import annotations

import math

import numpy as np

from srcore.plugin import EngineBuildError, TensorType

from . import qconverters
from .bicubic import bicubic
from .fold import col2im, im2col  # noqa: F401  (named by the op table)
from .quantile import quantile  # noqa: F401  (named by the op table)
from .nodes import Converter, NodeView
from .qconverters import (dequantize, qadd, qconv, qconv_then_add, qlinear,  # noqa: F401  (named by the op table)
                          quantize)
from .pool1d import adaptive_avg_pool1d, avg_pool1d, max_pool1d  # noqa: F401  (named by the op table)
from .volume import adaptive_avg_pool3d, avg_pool3d, conv3d, max_pool3d  # noqa: F401  (named by the op table)


def _quantized(v: NodeView, c: Converter, name: str) -> bool:
    value = v.value(name)
    return value is not None and value.node.kind != "prim::Constant" and c.net.tensors[c.tensor(value)].dtype != "float32"


# -- operands -------------------------------------------------------------------------------------
def operand(v: NodeView, c: Converter, name: str, inputs: list[int]):
    """An argument of a pointwise op as ``("in", k)`` (appending its tensor to ``inputs``) or
    ``("const", float)``; a constant tensor of one element is a scalar, a bigger one a network constant."""
    value = v.value(name)
    if value.node.kind == "prim::Constant":
        x = value.node.attrs.get("value")
        if isinstance(x, np.ndarray):
            if x.size == 1:
                return ("const", float(x.reshape(())))
            tid = c.net.constant(np.ascontiguousarray(x, dtype=np.float32))
            inputs.append(tid)
            return ("in", len(inputs) - 1)
        if isinstance(x, (bool, int, float)):
            return ("const", float(x))
        raise EngineBuildError(f"{v.where()}: argument {name!r} is {type(x).__name__}, not a number or tensor")
    inputs.append(_cast_to(v, c, c.tensor(value), "float32"))
    return ("in", len(inputs) - 1)


#: the dtypes promoted to a float32 result by a ``cast`` layer (torch's: an int64 tensor times 0.5)
_PROMOTABLE = ("bool", "int64", "int32", "int16", "int8", "uint8")


def _cast_to(v: NodeView, c: Converter, tid: int, dtype: str) -> int:
    """``tid`` as ``dtype``: itself, or a ``cast`` layer's result when it is a bool or integer tensor
    of another dtype (torch's promotion casts every operand to the result's dtype before it computes;
    an integer narrowed wraps, as torch's)."""
    have = c.net.tensors[tid].dtype
    if have == dtype or have not in _PROMOTABLE:
        return tid
    t = c.net.add("cast", [tid], c.net.shape(tid), v.source)
    c.net.tensors[t].dtype = dtype
    return t


def _wrap(x: int, dtype: str) -> int:
    """A Python integer as torch casts it to an integer tensor's dtype (``uint8 - 300`` subtracts 44)."""
    if dtype in ("int64", "bool"):
        return x
    bits = np.dtype(dtype).itemsize * 8
    x &= (1 << bits) - 1
    return x - (1 << bits) if np.dtype(dtype).kind == "i" and x >= 1 << (bits - 1) else x


def pointwise(v: NodeView, c: Converter, op: str, args, inputs, **params) -> int:
    shape = v.out_shape()
    return c.net.add("pointwise", inputs, shape, v.source, op=op, args=tuple(args), params=params)


def _chain(v: NodeView, c: Converter, steps) -> int:
    """Several pointwise layers in a row; each step is (op, args, inputs, params); ``("prev",)`` in
    args stands for the previous step's result."""
    prev = None
    for op, args, inputs, params in steps:
        ins = list(inputs)
        real = []
        for a in args:
            if a == ("prev",):
                ins.append(prev)
                real.append(("in", len(ins) - 1))
            else:
                real.append(a)
        prev = pointwise(v, c, op, real, ins, **params)
    return prev


# -- integer and bool elementwise ops ---------------------------------------------------------------
def _int_dtype(v: NodeView) -> str | None:
    """The result's dtype when it is an integer or bool one (the ``int_binary`` layer), else None."""
    dt = getattr(v.node.outputs[0].type, "dtype", None)
    return dt if dt in _PROMOTABLE else None


def _int_operand(v: NodeView, c: Converter, name: str, inputs: list[int], dtype: str):
    """An operand of the integer layer: ``("in", k)`` or ``("const", int | bool)``, exact (no float)."""
    value = v.value(name)
    if value.node.kind != "prim::Constant":
        inputs.append(_cast_to(v, c, c.tensor(value), dtype))
        return ("in", len(inputs) - 1)
    x = value.node.attrs.get("value")
    if isinstance(x, np.ndarray) and x.size > 1:
        inputs.append(c.net.constant(np.ascontiguousarray(x.astype(dtype)), dtype))   # (wraps, as torch's cast)
        return ("in", len(inputs) - 1)
    x = x.reshape(()).item() if isinstance(x, np.ndarray) else x
    if not isinstance(x, (bool, int)):
        raise EngineBuildError(f"{v.where()}: argument {name!r} is {x!r}, not an integer")
    return ("const", bool(x) if dtype == "bool" else _wrap(int(x), dtype))


def _int_layer(v: NodeView, c: Converter, op: str, args, inputs, dtype: str) -> int:
    t = c.net.add("int_binary", inputs, v.out_shape(), v.source, op=op, args=tuple(args))
    c.net.tensors[t].dtype = dtype
    return t


_INT_NAMES = {"max": "maximum", "min": "minimum", "bitwise_and": "and", "logical_and": "and", "bitwise_or": "or",
              "logical_or": "or", "bitwise_xor": "xor", "logical_xor": "xor"}


def int_binary(v: NodeView, c: Converter) -> None:
    """Elementwise integer / bool ops exactly as torch (``//`` and ``%`` floor, wrapping int64):
    ``add`` / ``sub`` (``alpha``), ``rsub``, ``mul``, ``maximum``, ``minimum``, ``floor_divide``,
    ``remainder`` and the bitwise / logical ``and``, ``or``, ``xor`` (a detector's ranks, cell ids
    and masks); float32 ``floor_divide`` / ``remainder`` are pointwise (torch's float formulas)."""
    dtype = _int_dtype(v)
    if dtype is None:
        return binary(v, c)
    op = v.op.split("::", 1)[1].split(".", 1)[0]
    op = _INT_NAMES.get(op, op)
    ins: list[int] = []
    a = _int_operand(v, c, "self", ins, dtype)
    b = _int_operand(v, c, "other", ins, dtype)
    if op == "rsub":
        a, b, op = b, a, "sub"
    if op in ("floor_divide", "remainder") and b == ("const", 0):   # (torch raises ZeroDivisionError)
        raise EngineBuildError(f"{v.where()}: integer division by zero")
    alpha = v.const("alpha", 1) if "alpha" in v.names else 1
    if alpha != 1:
        if b[0] == "const":
            b = ("const", _wrap(b[1] * int(alpha), dtype))
        else:
            ins.append(_int_layer(v, c, "mul", (b, ("const", _wrap(int(alpha), dtype))), list(ins), dtype))
            b = ("in", len(ins) - 1)
    c.bind(v.node.outputs[0], _int_layer(v, c, op, (a, b), ins, dtype))


def negate(v: NodeView, c: Converter) -> None:
    """``-x``: an integer one as ``0 - x`` (the integer layer), a float one pointwise."""
    dtype = _int_dtype(v)
    if dtype is None:
        return unary(v, c)
    x = _cast_to(v, c, c.tensor(v.value("self")), dtype)
    c.bind(v.node.outputs[0], _int_layer(v, c, "sub", (("const", 0), ("in", 0)), [x], dtype))


def one_hot(v: NodeView, c: Converter) -> None:
    """``F.one_hot(x, n)``: int64 ones at each index along a new last dim (an index outside
    ``[0, n)`` raises, as torch's)."""
    t = c.net.add("one_hot", [c.tensor(v.value("self"))], v.out_shape(), v.source, n=int(v.const("num_classes")))
    c.net.tensors[t].dtype = "int64"
    c.bind(v.node.outputs[0], t)


def flip(v: NodeView, c: Converter) -> None:
    """``torch.flip(x, dims)``: a copy reversed along ``dims`` (any dtype)."""
    shape = v.in_shape("self")
    dims = [int(d) % len(shape) for d in v.const("dims")] if shape else []
    if len(set(dims)) != len(dims):   # (torch raises: a dim named twice)
        raise EngineBuildError(f"{v.where()}: dims {list(v.const('dims'))} name a dim twice")
    c.bind(v.node.outputs[0], c.net.add("flip", [c.tensor(v.value("self"))], shape, v.source, dims=tuple(dims)))


# -- pointwise ------------------------------------------------------------------------------------
def add_sub(v: NodeView, c: Converter) -> None:
    if _int_dtype(v):
        return int_binary(v, c)
    sub = v.op.startswith("aten::sub")
    alpha = float(v.const("alpha", 1))
    ins: list[int] = []
    a = operand(v, c, "self", ins)
    b = operand(v, c, "other", ins)
    if b[0] == "const":
        b = ("const", b[1] * alpha)
        alpha = 1.0
    steps = []
    if alpha != 1.0:
        steps.append(("mul", (b, ("const", alpha)), ins, {}))
        steps.append(("sub" if sub else "add", (a, ("prev",)), ins, {}))
    else:
        steps.append(("sub" if sub else "add", (a, b), ins, {}))
    if v.op == "srcore::add_relu":
        steps.append(("relu", (("prev",),), [], {}))
    c.bind(v.node.outputs[0], _chain(v, c, steps))


def rsub(v: NodeView, c: Converter) -> None:
    """``other - alpha * self``."""
    if _int_dtype(v):
        return int_binary(v, c)
    alpha = float(v.const("alpha", 1))
    ins: list[int] = []
    a = operand(v, c, "self", ins)
    b = operand(v, c, "other", ins)
    if alpha == 1.0:
        out = pointwise(v, c, "sub", (b, a), ins)
    else:
        out = _chain(v, c, [("mul", (a, ("const", alpha)), ins, {}), ("sub", (b, ("prev",)), ins, {})])
    c.bind(v.node.outputs[0], out)


def binary(v: NodeView, c: Converter) -> None:
    if _int_dtype(v):
        return int_binary(v, c)
    op = v.op.split("::", 1)[1].split(".", 1)[0]
    op = {"max": "maximum", "min": "minimum"}.get(op, op)   # (max.other / min.other: torch's maximum / minimum)
    ins: list[int] = []
    a = operand(v, c, "self", ins)
    b = operand(v, c, "other", ins)
    c.bind(v.node.outputs[0], pointwise(v, c, op, (a, b), ins))


def unary(v: NodeView, c: Converter) -> None:
    if v.op == "aten::relu" and _quantized(v, c, "self"):
        return qconverters.qrelu(v, c, c.tensor(v.value("self")))
    ins: list[int] = []
    a = operand(v, c, "self", ins)
    # the pointwise op of the same name (aten::relu -> relu)
    c.bind(v.node.outputs[0], pointwise(v, c, v.op.split("::", 1)[1], (a,), ins))


def gelu(v: NodeView, c: Converter) -> None:
    approx = v.const("approximate", "none")
    ins: list[int] = []
    a = operand(v, c, "self", ins)
    c.bind(v.node.outputs[0], pointwise(v, c, "gelu_tanh" if approx == "tanh" else "gelu", (a,), ins))


def clamp(v: NodeView, c: Converter) -> None:
    if v.op == "aten::hardtanh":
        lo, hi = v.const("min_val", -1.0), v.const("max_val", 1.0)
    else:   # (clamp_min and clamp_max have one of the two; clamp_min is F.normalize's norm floor)
        lo, hi = (v.const(a, None) if a in v.names else None for a in ("min", "max"))
    ins: list[int] = []
    a = operand(v, c, "self", ins)
    params = {"min": None if lo is None else float(lo), "max": None if hi is None else float(hi)}
    c.bind(v.node.outputs[0], pointwise(v, c, "clamp", (a,), ins, **params))


def leaky_relu(v: NodeView, c: Converter) -> None:
    ins: list[int] = []
    a = operand(v, c, "self", ins)
    c.bind(v.node.outputs[0], pointwise(v, c, "leaky_relu", (a,), ins,
                                        negative_slope=float(v.const("negative_slope", 0.01))))


def prelu(v: NodeView, c: Converter) -> None:
    """``x if x > 0 else w * x``, ``w`` one slope or one per channel (dim 1): one slope is a leaky
    relu (which the conv before it carries), one per channel a two-operand pointwise op reading a
    ``(C, 1, ..., 1)`` view of ``w``."""
    shape = v.in_shape("self")
    ins: list[int] = []
    a = operand(v, c, "self", ins)
    value = v.value("weight")
    x = value.node.attrs.get("value") if value.node.kind == "prim::Constant" else None
    if isinstance(x, np.ndarray) and x.size == 1:
        c.bind(v.node.outputs[0], pointwise(v, c, "leaky_relu", (a,), ins, negative_slope=float(x.reshape(()))))
        return
    n = int(np.prod(v.in_shape("weight")))
    wshape = ((n,) + (1,) * (len(shape) - 2)) if shape else ()
    if x is not None:
        ins.append(c.net.constant(np.ascontiguousarray(x, dtype=np.float32).reshape(wshape)))
    else:
        ins.append(c.net.add("reshape", [c.tensor(value)], wshape, v.source))
    c.bind(v.node.outputs[0], pointwise(v, c, "prelu", (a, ("in", len(ins) - 1)), ins))


def elu(v: NodeView, c: Converter) -> None:
    ins: list[int] = []
    a = operand(v, c, "self", ins)
    c.bind(v.node.outputs[0], pointwise(v, c, "elu", (a,), ins, alpha=float(v.const("alpha", 1.0)),
                                        scale=float(v.const("scale", 1.0)),
                                        input_scale=float(v.const("input_scale", 1.0))))


def softplus(v: NodeView, c: Converter) -> None:
    ins: list[int] = []
    a = operand(v, c, "self", ins)
    c.bind(v.node.outputs[0], pointwise(v, c, "softplus", (a,), ins, beta=float(v.const("beta", 1.0)),
                                        threshold=float(v.const("threshold", 20.0))))


def selu(v: NodeView, c: Converter) -> None:
    """``scale * elu(x, alpha)`` with torch's SELU constants."""
    ins: list[int] = []
    a = operand(v, c, "self", ins)
    c.bind(v.node.outputs[0], pointwise(v, c, "elu", (a,), ins, alpha=1.6732632423543772848170429916717,
                                        scale=1.0507009873554804934193349852946, input_scale=1.0))


def log_sigmoid(v: NodeView, c: Converter) -> None:
    """``-softplus(-x)``: ``log1p(exp(-x))`` where it matters, ``x`` below -20 (exp(-20) under
    float32's resolution of it), as torch's ``min(x, 0) - log1p(exp(-|x|))``."""
    ins: list[int] = []
    a = operand(v, c, "self", ins)
    c.bind(v.node.outputs[0], _chain(v, c, [("neg", (a,), ins, {}), ("softplus", (("prev",),), [], {}),
                                            ("neg", (("prev",),), [], {})]))


def clamp_tensor(v: NodeView, c: Converter) -> None:
    """``clamp(x, min, max)`` with tensor bounds (either may be None): ``minimum(maximum(x, min),
    max)``, torch's order (min > max gives max; a NaN anywhere propagates)."""
    ins: list[int] = []
    steps = []
    a = operand(v, c, "self", ins)
    first = a
    for name, op in (("min", "maximum"), ("max", "minimum")):
        if v.is_tensor(name):
            if not steps:
                steps.append((op, (first, operand(v, c, name, ins)), ins, {}))
            else:
                more: list[int] = []
                steps.append((op, (("prev",), operand(v, c, name, more)), more, {}))
    if not steps:   # neither bound: torch raises; supports() refuses it
        raise EngineBuildError(f"{v.where()}: clamp without min or max")
    c.bind(v.node.outputs[0], _chain(v, c, steps))


def nan_to_num(v: NodeView, c: Converter) -> None:
    """NaN, +inf and -inf replaced (defaults: 0 and float32's largest finite values, as torch)."""
    ins: list[int] = []
    a = operand(v, c, "self", ins)
    params = {}
    big = float(np.finfo(np.float32).max)
    for name, default in (("nan", 0.0), ("posinf", big), ("neginf", -big)):
        value = v.const(name, None) if name in v.names else None
        params[name] = default if value is None else float(value)
    c.bind(v.node.outputs[0], pointwise(v, c, "nan_to_num", (a,), ins, **params))


def round_(v: NodeView, c: Converter) -> None:
    """``round`` (halves to even) and ``round(decimals=d)``: torch's ``nearbyint(x * 10**d) / 10**d``
    (``nearbyint(x / 10**-d) * 10**-d`` for d < 0), the power a float32."""
    ins: list[int] = []
    a = operand(v, c, "self", ins)
    d = int(v.const("decimals", 0)) if "decimals" in v.names else 0
    if d == 0:
        c.bind(v.node.outputs[0], pointwise(v, c, "round", (a,), ins))
        return
    p = float(np.float32(10.0 ** abs(d)))
    scale, unscale = ("mul", "div") if d > 0 else ("div", "mul")
    c.bind(v.node.outputs[0], _chain(v, c, [(scale, (a, ("const", p)), ins, {}), ("round", (("prev",),), [], {}),
                                            (unscale, (("prev",), ("const", p)), [], {})]))


def full_like(v: NodeView, c: Converter) -> None:
    """``ones_like`` / ``full_like``: a float32 constant of the result's shape."""
    fill = 1.0 if v.op == "aten::ones_like" else float(v.const("fill_value"))
    c.bind(v.node.outputs[0], c.net.constant(np.full(v.out_shape(), fill, np.float32)))


def pow_scalar(v: NodeView, c: Converter) -> None:
    ins: list[int] = []
    a = operand(v, c, "self", ins)
    e = float(np.asarray(v.const("exponent")).reshape(()))   # (a number, or ONNX Pow's one-element tensor)
    c.bind(v.node.outputs[0], pointwise(v, c, "pow", (a,), ins, exponent=e))


# -- layout (views inside the engine) ---------------------------------------------------------------
def alias(v: NodeView, c: Converter) -> None:
    x = c.tensor(v.node.inputs[0])
    c.bind(v.node.outputs[0], c.net.add("reshape", [x], v.out_shape(), v.source))


def permute(v: NodeView, c: Converter) -> None:
    x = c.tensor(v.node.inputs[0])
    nd = len(v.in_shape("self"))
    if nd == 0:   # a 0-d tensor's transpose (dims 0 / -1) is itself
        c.bind(v.node.outputs[0], c.net.add("reshape", [x], (), v.source))
        return
    if v.op == "aten::permute":
        perm = [d % nd for d in v.const("dims")]
    elif v.op == "aten::t":   # (a matrix's transpose; a vector is itself)
        perm = list(range(nd))[::-1]
    else:
        perm = list(range(nd))
        d0, d1 = v.const("dim0") % nd, v.const("dim1") % nd
        perm[d0], perm[d1] = perm[d1], perm[d0]
    c.bind(v.node.outputs[0], c.net.add("permute", [x], v.out_shape(), v.source, perm=tuple(perm)))


def pixel_shuffle(v: NodeView, c: Converter) -> None:
    """``pixel_shuffle`` / ``pixel_unshuffle`` (ONNX's DepthToSpace, space to depth) by ``r``: a view
    with each factor of ``r`` a dim of its own, one ``permute`` copy moving them, a view back."""
    shape = v.in_shape("self")
    *b, C, H, W = shape
    if v.op == "aten::pixel_shuffle":
        r = int(v.const("upscale_factor"))
        split, perm = (*b, C // (r * r), r, r, H, W), (0, 3, 1, 4, 2)
    else:
        r = int(v.const("downscale_factor"))
        split, perm = (*b, C, H // r, r, W // r, r), (0, 2, 4, 1, 3)
    n = len(b)
    moved = tuple(range(n)) + tuple(n + d for d in perm)
    x = c.net.add("reshape", [c.tensor(v.node.inputs[0])], split, v.source)
    y = c.net.add("permute", [x], tuple(split[d] for d in moved), v.source, perm=moved)
    c.bind(v.node.outputs[0], c.net.add("reshape", [y], v.out_shape(), v.source))


def index(v: NodeView, c: Converter) -> None:
    """A select or slice, copied out (contiguous) as a ``strided`` layer: ``x[key]``; a slice of the
    whole dim (TorchScript's ``x[:, :, -1]`` slices dims 0 and 1 first) is a ``reshape`` view."""
    shape = v.in_shape("self")
    dim = v.const("dim") % len(shape)
    if v.op == "aten::select.int":
        i = v.const("index")
        i = i + shape[dim] if i < 0 else i
        sel = i
    else:
        sel = slice(*slice(v.const("start"), v.const("end"), v.const("step", 1)).indices(shape[dim]))
    _select_along(v, c, dim, sel, shape[dim])


def _select_along(v: NodeView, c: Converter, dim: int, sel, n: int) -> None:
    """``x[..., sel]`` along ``dim`` (an index or a slice) copied out as a ``strided`` layer; the
    whole dim is a ``reshape`` view."""
    x = c.tensor(v.node.inputs[0])
    if sel == slice(0, n, 1):
        c.bind(v.node.outputs[0], c.net.add("reshape", [x], v.out_shape(), v.source))
        return
    c.bind(v.node.outputs[0], c.net.add("strided", [x], v.out_shape(), v.source, key=(slice(None),) * dim + (sel,)))


def glu(v: NodeView, c: Converter) -> None:
    """``a * sigmoid(b)``, ``a`` and ``b`` the halves of ``dim``: two ``strided`` copies and one
    pointwise pair, so a gated conv block (conformer's pointwise conv -> GLU -> depthwise conv)
    stays one engine."""
    shape = v.in_shape("self")
    dim = v.const("dim", -1) % len(shape)
    h = shape[dim] // 2
    x = c.tensor(v.node.inputs[0])
    half = v.out_shape()
    a, b = (c.net.add("strided", [x], half, v.source, key=(slice(None),) * dim + (slice(lo, lo + h, 1),))
            for lo in (0, h))
    c.bind(v.node.outputs[0], _chain(v, c, [("sigmoid", (("in", 0),), [b], {}),
                                            ("mul", (("in", 0), ("prev",)), [a], {})]))


# -- convolution and pooling --------------------------------------------------------------------------
def _pair(x, n=2):
    x = [int(i) for i in (x if isinstance(x, (list, tuple)) else [x])]
    return tuple(x * n if len(x) == 1 else x)


def conv(v: NodeView, c: Converter) -> None:
    """A 2-D conv layer; a 1-D conv (3-D weight) is one on (N, C, 1, L) views of its input and
    output (``reshape`` layers: no copies), its kernel, stride, padding and dilation (1, k)."""
    if v.op == "aten::_convolution" and v.const("transposed"):
        conv_transpose(v, c)
        return
    w = v.const("weight")
    b = v.const("bias")
    if isinstance(w, np.ndarray) and w.ndim == 5:
        conv3d(v, c)
        return
    if not isinstance(w, np.ndarray) or w.ndim not in (3, 4):
        raise EngineBuildError(f"{v.where()}: a conv needs a constant 3-D (1-D conv) or 4-D (2-D conv) weight")
    one_d = w.ndim == 3
    x = c.tensor(v.value("input"))
    out_shape = v.out_shape()
    if one_d:
        N, C, L = c.net.shape(x)
        x = c.net.add("reshape", [x], (N, C, 1, L), v.source)
        w = w[:, :, None, :]
        out_shape = (out_shape[0], out_shape[1], 1, out_shape[2])
    inputs = [x]
    if v.op == "srcore::conv2d_add_relu":
        inputs.append(c.tensor(v.value("other")))
    pair = (lambda a: (0 if a == "padding" else 1, _pair(v.const(a), 1)[0])) if one_d else (lambda a: _pair(v.const(a)))
    attrs = dict(weight=np.ascontiguousarray(w, np.float32), bias=None if b is None else np.asarray(b, np.float32),
                 stride=pair("stride"), padding=pair("padding"), dilation=pair("dilation"),
                 groups=int(v.const("groups")),
                 relu=v.op not in ("aten::conv2d", "aten::conv1d", "aten::_convolution"),
                 residual=v.op == "srcore::conv2d_add_relu")
    y = c.net.add("conv", inputs, out_shape, v.source, **attrs)
    if one_d:
        y = c.net.add("reshape", [y], v.out_shape(), v.source)
    c.bind(v.node.outputs[0], y)


def conv_transpose(v: NodeView, c: Converter) -> None:
    """A transposed conv layer of rank 2 or 3 (``conv_transpose2d`` / ``3d``; ``_convolution`` with
    transposed=True); a 1-D one (3-D weight) is one on (N, C, 1, L) views, its parameters (1, k) as
    :func:`conv`'s (a fused activation then reads through the view)."""
    w = v.const("weight")
    if not isinstance(w, np.ndarray) or w.ndim not in (3, 4, 5):
        raise EngineBuildError(f"{v.where()}: a transposed conv needs a constant 3-D, 4-D or 5-D weight")
    b = v.const("bias")
    x = c.tensor(v.value("input"))
    out_shape = v.out_shape()
    one_d = w.ndim == 3
    if one_d:
        N, C, L = c.net.shape(x)
        x = c.net.add("reshape", [x], (N, C, 1, L), v.source)
        w = w[:, :, None, :]
        out_shape = (out_shape[0], out_shape[1], 1, out_shape[2])

        def p(a, first=1):
            return (first, _pair(v.const(a), 1)[0])
    else:
        def p(a, first=1):
            return _pair(v.const(a), w.ndim - 2)
    attrs = dict(weight=np.ascontiguousarray(w, np.float32), bias=None if b is None else np.asarray(b, np.float32),
                 stride=p("stride"), padding=p("padding", 0), output_padding=p("output_padding", 0),
                 dilation=p("dilation"), groups=int(v.const("groups")))
    y = c.net.add("conv_transpose", [x], out_shape, v.source, **attrs)
    if one_d:
        y = c.net.add("reshape", [y], v.out_shape(), v.source)
    c.bind(v.node.outputs[0], y)


def max_pool(v: NodeView, c: Converter) -> None:
    k = _pair(v.const("kernel_size"))
    s = v.const("stride")
    attrs = dict(kernel=k, stride=_pair(s) if s else k, padding=_pair(v.const("padding", 0)),
                 dilation=_pair(v.const("dilation", 1)), ceil_mode=bool(v.const("ceil_mode", False)))
    x = c.tensor(v.node.inputs[0])
    if c.net.tensors[x].dtype != "float32":
        return qconverters.qmax_pool(v, c, x, attrs)
    c.bind(v.node.outputs[0], c.net.add("max_pool2d", [x], v.out_shape(), v.source, **attrs))


def avg_pool(v: NodeView, c: Converter) -> None:
    k = _pair(v.const("kernel_size"))
    s = v.const("stride")
    attrs = dict(kernel=k, stride=_pair(s) if s else k, padding=_pair(v.const("padding", 0)),
                 ceil_mode=bool(v.const("ceil_mode", False)),
                 count_include_pad=bool(v.const("count_include_pad", True)),
                 divisor_override=v.const("divisor_override", None))
    x = c.tensor(v.node.inputs[0])
    c.bind(v.node.outputs[0], c.net.add("avg_pool2d", [x], v.out_shape(), v.source, **attrs))


def adaptive_avg_pool(v: NodeView, c: Converter) -> None:
    x = c.tensor(v.node.inputs[0])
    out = v.out_shape()
    if c.net.tensors[x].dtype != "float32":
        # torch rounds a one-channel input as its NHWC kernel (it counts it channels-last)
        return qconverters.qmean(v, c, x, 2, "adaptive_nhwc" if c.net.shape(x)[-3] == 1 else "adaptive")
    c.bind(v.node.outputs[0], c.net.add("adaptive_avg_pool2d", [x], out, v.source, output_size=tuple(out[-2:])))


def qadaptive_avg_pool(v: NodeView, c: Converter) -> None:
    """``quantized::adaptive_avg_pool2d_channels_last`` (the importer's form for an input torch holds
    channels-last): to 1x1 as torch's NHWC kernel rounds."""
    qconverters.qmean(v, c, c.tensor(v.node.inputs[0]), 2, "adaptive_nhwc")


# -- matrix products --------------------------------------------------------------------------------
_LINEAR_ACT = {"aten::linear": "none", "srcore::linear_relu": "relu", "srcore::linear_silu": "silu",
               "srcore::linear_tanh": "tanh", "srcore::linear_sigmoid": "sigmoid", "srcore::linear_gelu": "gelu"}


def linear_layer(c: Converter, x: int, weight, bias, out_shape, source: str, act: str = "none") -> int:
    """``act(x @ weight.T + bias)`` over the last dim of ``x``, ``weight`` (N, K) constant: a ``gemm``
    layer, then the bias add and the activation as pointwise layers (fusion makes them one
    epilogue kernel, with whatever pointwise work follows)."""
    y = c.net.add("gemm", [x], out_shape, source, weight=np.asarray(weight, np.float32))
    if bias is not None:
        b = c.net.constant(np.ascontiguousarray(bias, np.float32))
        y = c.net.add("pointwise", [y, b], out_shape, source, op="add", args=(("in", 0), ("in", 1)), params={})
    if act != "none":
        y = c.net.add("pointwise", [y], out_shape, source, op=act, args=(("in", 0),), params={})
    return y


def linear(v: NodeView, c: Converter) -> None:
    w = v.const("weight")
    if not isinstance(w, np.ndarray) or w.ndim != 2:
        raise EngineBuildError(f"{v.where()}: a linear layer needs a constant 2-D weight")
    act = _LINEAR_ACT[v.op]
    if act == "gelu" and v.const("approximate", "none") == "tanh":
        act = "gelu_tanh"
    x = c.tensor(v.value("input"))
    c.bind(v.node.outputs[0], linear_layer(c, x, w, v.const("bias"), v.out_shape(), v.source, act))


def matmul(v: NodeView, c: Converter) -> None:
    a, b = v.node.inputs[0], v.node.inputs[1]
    if b.node.kind == "prim::Constant" and a.node.kind != "prim::Constant":
        w = np.asarray(b.node.attrs.get("value"), np.float32)
        if w.ndim != 2 or len(a.type.shape) < 1:
            raise EngineBuildError(f"{v.where()}: a constant right operand must be 2-D")
        c.bind(v.node.outputs[0], linear_layer(c, c.tensor(a), w.T, None, v.out_shape(), v.source))
        return
    if len(a.type.shape) < 2 or len(b.type.shape) < 2:
        raise EngineBuildError(f"{v.where()}: matrix-vector products run outside engines")
    c.bind(v.node.outputs[0], c.net.add("matmul", [c.tensor(a), c.tensor(b)], v.out_shape(), v.source))


def baddbmm(v: NodeView, c: Converter) -> None:
    """``beta * self + alpha * (batch1 @ batch2)``: the ``matmul`` layer, then one pointwise layer in
    torch's order (the product scaled, then ``self`` scaled and added; ``beta`` 0 ignores ``self``,
    NaN and all, as torch does)."""
    shape = v.out_shape()
    mm = c.net.add("matmul", [c.tensor(v.node.inputs[1]), c.tensor(v.node.inputs[2])], shape, v.source)
    alpha, beta = float(v.const("alpha", 1)), float(v.const("beta", 1))
    if alpha != 1.0:
        mm = c.net.add("pointwise", [mm], shape, v.source, op="mul", args=(("in", 0), ("const", alpha)), params={})
    if beta == 0.0:
        c.bind(v.node.outputs[0], mm)
        return
    ins = [mm]
    b = operand(v, c, "self", ins)
    if beta != 1.0 and b[0] == "const":
        b = ("const", b[1] * beta)
    elif beta != 1.0:
        ins[1] = c.net.add("pointwise", [ins[1]], c.net.shape(ins[1]), v.source, op="mul",
                           args=(("in", 0), ("const", beta)), params={})
    c.bind(v.node.outputs[0], c.net.add("pointwise", ins, shape, v.source, op="add", args=(("in", 0), b), params={}))


def einsum(v: NodeView, c: Converter) -> None:
    """Two operands as permutes, reshapes and one ``matmul`` (:mod:`.einsum`), identity steps
    skipped; more as a chain of such products, left to right."""
    from .einsum import chain, operand_shapes

    lst = v.value("tensors")
    if lst.node.kind != "prim::ListConstruct" or len(lst.node.inputs) < 2:
        raise EngineBuildError(f"{v.where()}: argument 'tensors' is not a list of two or more built in the segment")
    xs = [c.tensor(x) for x in lst.node.inputs]
    steps = chain(v.const("equation"), [c.net.shape(x) for x in xs])
    if isinstance(steps, str):
        raise EngineBuildError(f"{v.where()}: {steps}")

    def arrange(x, perm, shape):
        if perm != tuple(range(len(perm))):
            x = c.net.add("permute", [x], tuple(c.net.shape(x)[i] for i in perm), v.source, perm=perm)
        return x if c.net.shape(x) == shape else c.net.add("reshape", [x], shape, v.source)

    y = xs[0]
    for b, (_, shape, p) in zip(xs[1:], steps):
        sa, sb, sm = operand_shapes(p)
        y = c.net.add("matmul", [arrange(y, p.perm_a, sa), arrange(b, p.perm_b, sb)], sm, v.source)
        mid = p.batch + p.m + p.n
        if sm != mid:
            y = c.net.add("reshape", [y], mid, v.source)
        if p.perm_out != tuple(range(len(mid))):
            y = c.net.add("permute", [y], shape, v.source, perm=p.perm_out)
    c.bind(v.node.outputs[0], y)


def roll(v: NodeView, c: Converter) -> None:
    shape = v.in_shape("self")
    total: dict[int, int] = {}
    for s, d in zip(v.const("shifts"), v.const("dims")):   # a dim named twice rolls by the sum
        d %= len(shape)
        total[d] = total.get(d, 0) + int(s)
    dims = tuple(total)
    shifts = tuple(total[d] % shape[d] if shape[d] else 0 for d in dims)
    x = c.tensor(v.node.inputs[0])
    c.bind(v.node.outputs[0], c.net.add("roll", [x], shape, v.source, shifts=shifts, dims=dims))


def addmm(v: NodeView, c: Converter) -> None:
    """``beta * self + alpha * mat1 @ mat2`` with a constant ``mat2`` and ``self`` (a linear layer)."""
    beta, alpha = float(v.const("beta", 1)), float(v.const("alpha", 1))
    m2, bias = v.value("mat2"), v.value("self")
    if m2.node.kind != "prim::Constant" or bias.node.kind != "prim::Constant":
        raise EngineBuildError(f"{v.where()}: addmm needs constant mat2 and self")
    w = np.asarray(m2.node.attrs.get("value"), np.float32).T * np.float32(alpha)
    x = c.tensor(v.value("mat1"))
    out_shape = v.out_shape()
    y = linear_layer(c, x, w, None, out_shape, v.source)
    if beta != 0:   # beta == 0: torch ignores self (its NaNs and infinities too)
        # self broadcasts to the output: a (N,) row, a (1, N) or (M, 1) column, a full (M, N) or a scalar
        b = np.asarray(bias.node.attrs.get("value"), np.float32) * np.float32(beta)
        bid = c.net.constant(np.ascontiguousarray(b, np.float32))
        y = c.net.add("pointwise", [y, bid], out_shape, v.source, op="add", args=(("in", 0), ("in", 1)), params={})
    c.bind(v.node.outputs[0], y)


# -- normalisation and reductions ----------------------------------------------------------------------
def softmax(v: NodeView, c: Converter) -> None:
    nd = len(v.in_shape("self"))
    x = c.tensor(v.node.inputs[0])
    kind = "log_softmax" if "log_softmax" in v.op else "softmax"
    if nd == 0:   # a 0-d tensor (dim 0 / -1): the softmax of its one element, as a (1,) row
        row = c.net.add("reshape", [x], (1,), v.source)
        y = c.net.add(kind, [row], (1,), v.source, dim=0)
        c.bind(v.node.outputs[0], c.net.add("reshape", [y], (), v.source))
        return
    c.bind(v.node.outputs[0], c.net.add(kind, [x], v.out_shape(), v.source, dim=v.const("dim") % nd))


def mse_loss(v: NodeView, c: Converter) -> None:
    """``(self - target) ** 2``, then its mean (reduction 1), sum (2) or itself (0)."""
    ins: list[int] = []
    a, b = operand(v, c, "self", ins), operand(v, c, "target", ins)
    shape = v.in_shape("self")
    d = c.net.add("pointwise", ins, shape, v.source, op="sub", args=(a, b), params={})
    sq = c.net.add("pointwise", [d], shape, v.source, op="mul", args=(("in", 0), ("in", 0)), params={})
    red, dims = v.const("reduction", 1), tuple(range(len(shape)))
    if red == 1 and dims:
        sq = c.net.add("mean", [sq], (), v.source, dims=dims)
    elif red == 2 and dims:
        sq = c.net.add("reduce", [sq], (), v.source, op="sum", dims=dims)
    c.bind(v.node.outputs[0], sq)


def layer_norm(v: NodeView, c: Converter) -> None:
    shape = tuple(v.const("normalized_shape"))
    x = c.tensor(v.node.inputs[0])
    w, b = v.const("weight"), v.const("bias")
    c.bind(v.node.outputs[0], layer_norm_layer(c, x, shape, w, b, float(v.const("eps", 1e-5)),
                                               v.out_shape(), v.source))


def layer_norm_layer(c: Converter, x: int, normalized_shape, w, b, eps: float, out_shape, source: str) -> int:
    n = int(np.prod(normalized_shape))
    return c.net.add("layer_norm", [x], out_shape, source, size=n, eps=eps,
                     weight=None if w is None else np.asarray(w, np.float32).reshape(n),
                     bias=None if b is None else np.asarray(b, np.float32).reshape(n))


def rms_norm(v: NodeView, c: Converter) -> None:
    """``nn.RMSNorm`` / ``F.rms_norm``: the layer the written-out form fuses into
    (``builder/norm_fusion.py``); ``eps=None`` is float32's machine epsilon, as torch."""
    n = int(np.prod(tuple(v.const("normalized_shape"))))
    w, eps = v.const("weight"), v.const("eps", None)
    c.bind(v.node.outputs[0], c.net.add(
        "rms_norm", [c.tensor(v.node.inputs[0])], v.out_shape(), v.source, size=n,
        eps=float(np.finfo(np.float32).eps) if eps is None else float(eps),
        weight=None if w is None else np.asarray(w, np.float32).reshape(n)))


def group_norm(v: NodeView, c: Converter) -> None:
    shape = v.in_shape("input")
    C, G = shape[1], int(v.const("num_groups"))
    w, b = v.const("weight"), v.const("bias")
    c.bind(v.node.outputs[0], c.net.add(
        "group_norm", [c.tensor(v.node.inputs[0])], v.out_shape(), v.source, groups=G,
        eps=float(v.const("eps", 1e-5)),
        weight=None if w is None else np.asarray(w, np.float32).reshape(C),
        bias=None if b is None else np.asarray(b, np.float32).reshape(C)))


def mean(v: NodeView, c: Converter) -> None:
    nd = len(v.in_shape("self"))
    dims = v.const("dim") if "dim" in v.names else None     # (aten::mean: over all dims)
    x = c.tensor(v.node.inputs[0])
    if nd == 0:   # the mean of a 0-d tensor (over no dim, or dim 0 / -1) is its value
        c.bind(v.node.outputs[0], c.net.add("reshape", [x], (), v.source))
        return
    dims = tuple(range(nd)) if dims is None or len(dims) == 0 else tuple(sorted(d % nd for d in dims))
    if c.net.tensors[x].dtype != "float32":
        if dims != tuple(range(nd - len(dims), nd)):
            raise EngineBuildError(f"{v.where()}: the int8 mean is over the innermost dims, not {dims}")
        return qconverters.qmean(v, c, x, len(dims), "mean")
    c.bind(v.node.outputs[0], c.net.add("mean", [x], v.out_shape(), v.source, dims=dims))


# -- torch's fused encoder layer, as layers -----------------------------------------------------------
def encoder_layer(v: NodeView, c: Converter) -> None:
    """torch's eval ``TransformerEncoderLayer`` fast path: linear layers, attention, residual adds and
    layer norms, so the engine can fuse and time them like any others. With a mask (a key padding
    mask from ``src_key_padding_mask``, an attention mask, or both merged) the attention is three
    projections and an ``attention_heads`` layer reading the mask as an additive bias (:func:`_mha_bias`)."""
    src = c.tensor(v.value("src"))
    shape = v.in_shape("src")
    E, H = int(v.const("embed_dim")), int(v.const("num_heads"))
    eps = float(v.const("eps"))
    norm_first, use_gelu = bool(v.const("norm_first")), bool(v.const("use_gelu"))
    k = {n: v.const(n) for n in ("qkv_weight", "qkv_bias", "proj_weight", "proj_bias", "norm_weight_1",
                                 "norm_bias_1", "norm_weight_2", "norm_bias_2", "ffn_weight_1", "ffn_bias_1",
                                 "ffn_weight_2", "ffn_bias_2")}
    src_ = v.source
    x = layer_norm_layer(c, src, (E,), k["norm_weight_1"], k["norm_bias_1"], eps, shape, src_) if norm_first \
        else src
    if v.is_tensor("mask"):
        att = _projected_heads(v, c, [(x, shape)] * 3, k["qkv_weight"], k["qkv_bias"], E, H, shape, masked=True)
    else:
        qkv = linear_layer(c, x, k["qkv_weight"], k["qkv_bias"], shape[:-1] + (3 * E,), src_)
        att = c.net.add("attention", [qkv], shape, src_, heads=H, scale=1.0 / math.sqrt(E // H))
    y = linear_layer(c, att, k["proj_weight"], k["proj_bias"], shape, src_)
    x = c.net.add("pointwise", [y, src], shape, src_, op="add", args=(("in", 0), ("in", 1)), params={})
    if not norm_first:
        x = layer_norm_layer(c, x, (E,), k["norm_weight_1"], k["norm_bias_1"], eps, shape, src_)
    res = x
    h = layer_norm_layer(c, x, (E,), k["norm_weight_2"], k["norm_bias_2"], eps, shape, src_) if norm_first else x
    F = np.asarray(k["ffn_weight_1"]).shape[0]
    h = linear_layer(c, h, k["ffn_weight_1"], k["ffn_bias_1"], shape[:-1] + (F,), src_,
                     "gelu" if use_gelu else "relu")
    h = linear_layer(c, h, k["ffn_weight_2"], k["ffn_bias_2"], shape, src_)
    x = c.net.add("pointwise", [h, res], shape, src_, op="add", args=(("in", 0), ("in", 1)), params={})
    if not norm_first:
        x = layer_norm_layer(c, x, (E,), k["norm_weight_2"], k["norm_bias_2"], eps, shape, src_)
    c.bind(v.node.outputs[0], x)


def _projected_heads(v: NodeView, c: Converter, xs: list, w, b, E: int, H: int, out_shape: tuple,
                     masked: bool) -> int:
    """Attention of torch's fused ops as three projections by the packed (3E, E) in-projection ``w``
    of ``xs`` (query, key, value: (tensor id, shape) pairs) and an ``attention_heads`` layer; with
    ``masked``, the node's ``mask`` added to the scores (:func:`_mha_bias`). A query whose keys are all
    masked gives NaN, as torch's fused kernels (its SDPA gives zeros there: ``safe``, not set here)."""
    w, b = np.asarray(w, np.float32), np.asarray(b, np.float32)
    ins = [linear_layer(c, x, w[i * E:(i + 1) * E], b[i * E:(i + 1) * E], s[:-1] + (E,), v.source)
           for i, (x, s) in enumerate(xs)]
    if masked:
        ins.append(_mha_bias(v, c, out_shape[0], H, out_shape[1], xs[1][1][1]))
    return c.net.add("attention_heads", ins, out_shape, v.source, heads=H, scale=1.0 / math.sqrt(E // H),
                     divide=False)


def _mha_bias(v: NodeView, c: Converter, B: int, H: int, L: int, S: int) -> int:
    """The ``mask`` of torch's fused attention (``mask_type`` 1: (B, S) key padding; 0: (L, S); 2 or
    4-D: merged) as a float (., ., ., S) tensor added to the scores: -inf where the mask is nonzero
    (torch's fast path masks a key out wherever its mask is True or nonzero), 0 elsewhere."""
    value = v.value("mask")
    mtype = v.const("mask_type", None)
    if value.node.kind == "prim::Constant":
        m = np.asarray(value.node.attrs.get("value"))
        ms = m.shape
    else:
        m = c.tensor(value)
        ms = c.net.shape(m)
    if len(ms) == 2 and ms[-1] == S and (mtype == 1 or mtype is None and ms == (B, S) and (B, S) != (L, S)):
        to = (ms[0], 1, 1, S)
    elif len(ms) == 2 and ms == (L, S):
        to = (1, 1, L, S)
    elif len(ms) == 4 and all(a in (1, n) for a, n in zip(ms, (B, H, L, S))):
        to = tuple(ms)
    else:
        raise EngineBuildError(f"{v.where()}: a mask of shape {tuple(ms)} (mask_type {mtype}) does not broadcast "
                               f"to the attention's ({B}, {H}, {L}, {S})")
    if isinstance(m, np.ndarray):
        return c.net.constant(np.where(m.astype(bool), np.float32(-np.inf), np.float32(0)).reshape(to))
    if c.net.tensors[m].dtype != "bool":   # a float mask: nonzero masks
        m = c.net.add("compare", [m], ms, v.source, op="ne", args=(("in", 0), ("const", 0.0)))
    bias = c.net.add("where", [m], ms, v.source, args=(("const", float("-inf")), ("const", 0.0)), mask=None)
    return c.net.add("reshape", [bias], to, v.source)


def sdpa(v: NodeView, c: Converter) -> None:
    """``scaled_dot_product_attention`` written out (the key's permute, scores, scale and float mask,
    softmax, the product with the values) so that attention fusion takes it like any written-out
    attention (the ONNX importer recomposes attention into this op)."""
    q, k, val = (c.tensor(v.node.inputs[i]) for i in range(3))
    qs, ks = c.net.shape(q), c.net.shape(k)
    nd = len(ks)
    perm = tuple(range(nd - 2)) + (nd - 1, nd - 2)
    kt = c.net.add("permute", [k], tuple(ks[i] for i in perm), v.source, perm=perm)
    shape = qs[:-1] + (ks[-2],)
    s = c.net.add("matmul", [q, kt], shape, v.source)
    scale = v.const("scale", None)
    scale = 1.0 / math.sqrt(qs[-1]) if scale is None else float(scale)
    s = c.net.add("pointwise", [s], shape, v.source, op="mul", args=(("in", 0), ("const", scale)), params={})
    if v.is_tensor("attn_mask") and _bool_mask(v, c, "attn_mask"):
        # a bool mask keeps the True keys: 0 there, -inf elsewhere, added as a float mask
        cond, const = _index_operand(v, c, "attn_mask")
        if const is not None:
            bias = c.net.constant(np.where(const, np.float32(0), np.float32(-np.inf)))
        else:
            bias = c.net.add("where", [cond], c.net.shape(cond), v.source,
                             args=(("const", 0.0), ("const", float("-inf"))), mask=None)
        s = c.net.add("pointwise", [s, bias], shape, v.source, op="add", args=(("in", 0), ("in", 1)), params={})
    elif v.is_tensor("attn_mask"):
        ins: list[int] = [s]
        m = operand(v, c, "attn_mask", ins)
        s = c.net.add("pointwise", ins, shape, v.source, op="add", args=(("in", 0), m), params={})
    elif v.const("is_causal", False):
        # torch's tril(ones(L, S)) keep mask as 0 / -inf: key 0 is always kept, so no row is all -inf
        L, S = shape[-2:]
        causal = np.where(np.tril(np.ones((L, S), bool)), np.float32(0), np.float32(-np.inf)).reshape(1, 1, L, S)
        ins = [s, c.net.constant(causal.astype(np.float32))]
        s = c.net.add("pointwise", ins, shape, v.source, op="add", args=(("in", 0), ("in", 1)), params={})
    # torch's kernels give a row of -inf scores (every key masked) zeros, softmax gives NaN
    p = c.net.add("softmax", [s], shape, v.source, dim=len(shape) - 1, safe=v.is_tensor("attn_mask"))
    c.bind(v.node.outputs[0], c.net.add("matmul", [p, val], v.out_shape(), v.source))


def _bool_mask(v: NodeView, c: Converter, name: str) -> bool:
    value = v.value(name)
    if value.node.kind == "prim::Constant":
        return np.asarray(value.node.attrs.get("value")).dtype == np.bool_
    return c.net.tensors[c.tensor(value)].dtype == "bool"


def native_mha(v: NodeView, c: Converter) -> None:
    """``nn.MultiheadAttention``'s fused path (batch-first, no weights read; a key padding mask, an
    attention mask or both merged): unmasked self-attention as the packed projection and ``attention``
    layer, else three projections and ``attention_heads`` (:func:`_projected_heads`)."""
    E, H = int(v.const("embed_dim")), int(v.const("num_head"))
    qv, kv, vv = (v.value(n) for n in ("query", "key", "value"))
    qs, ks = v.in_shape("query"), v.in_shape("key")
    masked = v.is_tensor("mask")
    if qv is kv and kv is vv and not masked:
        qkv = linear_layer(c, c.tensor(qv), v.const("qkv_weight"), v.const("qkv_bias"), qs[:-1] + (3 * E,), v.source)
        att = c.net.add("attention", [qkv], qs, v.source, heads=H, scale=1.0 / math.sqrt(E // H))
    else:
        xs = [(c.tensor(qv), qs), (c.tensor(kv), ks), (c.tensor(vv), ks)]
        att = _projected_heads(v, c, xs, v.const("qkv_weight"), v.const("qkv_bias"), E, H, qs, masked)
    out = linear_layer(c, att, v.const("proj_weight"), v.const("proj_bias"), qs, v.source)
    c.bind(v.node.outputs[0], out)
    if len(v.node.outputs) > 1:   # the attention weights, not asked for: torch's empty tensor
        c.bind(v.node.outputs[1], c.net.constant(np.zeros((0,), np.float32)))


# -- data movement: concatenation, resizing, padding, lookups, selections --------------------------------
def _dim(v: NodeView, name: str, rank: int) -> int:
    d = int(v.const(name))
    if not -max(rank, 1) <= d < max(rank, 1):
        raise EngineBuildError(f"{v.where()}: dim {d} is out of range for rank {rank}")
    return d % max(rank, 1)


def cat(v: NodeView, c: Converter) -> None:
    """``torch.cat``: the list is the segment's copy of its ``prim::ListConstruct``; each piece is
    copied into its slice of the output (a ``cat`` layer)."""
    lst = v.value("tensors")
    if lst.node.kind != "prim::ListConstruct":
        raise EngineBuildError(f"{v.where()}: argument 'tensors' is not a list built in the segment")
    out = v.out_shape()
    dim = _dim(v, "dim", len(out))
    pieces = [x for x in lst.node.inputs]
    ids = [c.tensor(x) for x in pieces]
    sizes = tuple(c.net.shape(t)[dim] for t in ids)
    c.bind(v.node.outputs[0], c.net.add("cat", ids, out, v.source, dim=dim, sizes=sizes))


def stack(v: NodeView, c: Converter) -> None:
    """``torch.stack``: each piece viewed with a dim of 1 inserted, then a ``cat`` along it."""
    lst = v.value("tensors")
    if lst.node.kind != "prim::ListConstruct":
        raise EngineBuildError(f"{v.where()}: argument 'tensors' is not a list built in the segment")
    out = v.out_shape()
    dim = _dim(v, "dim", len(out))
    ids = []
    for x in lst.node.inputs:
        t = c.tensor(x)
        shape = c.net.shape(t)
        ids.append(c.net.add("reshape", [t], (*shape[:dim], 1, *shape[dim:]), v.source))
    c.bind(v.node.outputs[0], c.net.add("cat", ids, out, v.source, dim=dim, sizes=(1,) * len(ids)))


def expand(v: NodeView, c: Converter) -> None:
    """``expand``: the input broadcast to the result's shape (copied: the layers read C arrays)."""
    c.bind(v.node.outputs[0], c.net.add("expand", [c.tensor(v.value("self"))], v.out_shape(), v.source))


def repeat(v: NodeView, c: Converter) -> None:
    """``x.repeat(r0, r1, ...)`` (a tile; DGCNN's centre point repeated beside its k neighbours): a
    view with a dim of 1 before each dim (leading dims of 1 for extra repeats), the ``expand`` copy to
    the repeats, and the view merging each pair: ``out[.., r * n + i, ..] = x[.., i, ..]``."""
    x = c.tensor(v.value("self"))
    reps = [int(r) for r in v.const("repeats")]
    shape = (1,) * (len(reps) - len(c.net.shape(x))) + c.net.shape(x)
    pairs = [d for n in shape for d in (1, n)]
    one = c.net.add("reshape", [x], tuple(pairs), v.source)
    wide = c.net.add("expand", [one], tuple(d for r, n in zip(reps, shape) for d in (r, n)), v.source)
    for t in (one, wide):   # (an index tiled: the intermediates keep its dtype)
        c.net.tensors[t].dtype = c.net.tensors[x].dtype
    c.bind(v.node.outputs[0], c.net.add("reshape", [wide], v.out_shape(), v.source))


def repeat_interleave(v: NodeView, c: Converter) -> None:
    """``x.repeat_interleave(r, dim)`` (GQA's key and value heads): a view with a dim of 1 after
    ``dim``, the ``expand`` copy to ``r``, and the view merging the two (the same copy as
    ``x[:, :, None].expand(...).reshape(...)``)."""
    x = c.tensor(v.value("self"))
    shape = c.net.shape(x)
    d = _dim(v, "dim", len(shape))
    r = int(v.const("repeats"))
    one = c.net.add("reshape", [x], shape[:d + 1] + (1,) + shape[d + 1:], v.source)
    wide = c.net.add("expand", [one], shape[:d + 1] + (r,) + shape[d + 1:], v.source)
    c.bind(v.node.outputs[0], c.net.add("reshape", [wide], v.out_shape(), v.source))


def cast(v: NodeView, c: Converter) -> None:
    """``.to(dtype)``: a view to the same dtype, else a ``cast`` layer (float32, int64, int32, bool;
    a float made integer truncates, as torch)."""
    x = c.tensor(v.value("self"))
    same = c.net.tensors[x].dtype == getattr(v.node.outputs[0].type, "dtype", "float32")
    kind = "reshape" if same else "cast"
    c.bind(v.node.outputs[0], c.net.add(kind, [x], v.out_shape(), v.source))


def int_scalar(v: NodeView, c: Converter) -> None:
    """Integer floor division or remainder (Python's: the divisor's sign) by a number: a flat index
    split into class, row and column (CenterNet's decoding of topk over the heatmap)."""
    if _int_dtype(v) is None:   # (float32: torch's float floor division / remainder, pointwise)
        op = "remainder" if v.op.startswith("aten::remainder") else "floor_divide"
        ins: list[int] = []
        a = operand(v, c, "self", ins)
        c.bind(v.node.outputs[0], pointwise(v, c, op, (a, operand(v, c, "other", ins)), ins))
        return
    k = v.const("other")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise EngineBuildError(f"{v.where()}: argument 'other' is {k!r}, not an integer")
    k = _wrap(int(k), c.net.tensors[c.tensor(v.value("self"))].dtype)   # (uint8 // 300 divides by 44, as torch)
    if k == 0:   # (torch raises ZeroDivisionError)
        raise EngineBuildError(f"{v.where()}: integer division by zero")
    op = "remainder" if v.op.startswith("aten::remainder") else "floor_divide"
    c.bind(v.node.outputs[0], c.net.add("int_scalar", [c.tensor(v.value("self"))], v.out_shape(), v.source,
                                        op=op, other=int(k)))


def resize(v: NodeView, c: Converter) -> None:
    """Nearest or bilinear resizing of the last two dims (``upsample_*2d``, ``__interpolate``); the
    index tables are made by the tactics from the shapes and the scales. A 1-D resizing
    (``upsample_nearest1d``, ``upsample_linear1d``, ``__interpolate`` of an (N, C, L) input) is one of
    the (N, C, 1, L) view, ``linear`` mode interpolating the last dim only; a 3-D nearest one
    (``upsample_nearest3d``, ``__interpolate`` of an (N, C, D, H, W) input) is separable: over (H, W)
    on the (N, C * D, H, W) view, then over D on the (N, C, D, Ho * Wo) view."""
    op = v.op
    out = v.out_shape()
    rank = len(v.in_shape(v.names[0]))
    one_d = rank == 3
    if op.startswith("aten::__interpolate"):
        mode = v.const("mode", "nearest")
        align = bool(v.const("align_corners", None) or False)
        sf = v.const("scale_factor", None)
        recompute = v.const("recompute_scale_factor", None)
        scales = None if sf is None or recompute else (list(sf) if isinstance(sf, (list, tuple)) else [sf])
    else:
        mode = "bilinear" if "bilinear" in op else "bicubic" if "bicubic" in op else \
            "linear" if "linear1d" in op else "nearest"
        align = bool(v.const("align_corners", False)) if mode != "nearest" else False
        if op.endswith(".vec"):
            scales = v.const("scale_factors", None)
            scales = None if scales is None or v.const("output_size", None) is not None else list(scales)
        elif one_d:
            scales = [v.const("scales", None)]
        elif rank == 5:
            scales = [v.const("scales_d", None), v.const("scales_h", None), v.const("scales_w", None)]
        else:
            scales = [v.const("scales_h", None), v.const("scales_w", None)]
    if one_d:
        scales = [None, scales[-1] if scales else None]
    if rank == 5:
        return _nearest3d(v, c, (None,) * 3 if scales is None else tuple(scales) * (3 if len(scales) == 1 else 1))
    if scales is not None and len(scales) == 1:
        scales = scales * 2
    scales = (None, None) if scales is None else tuple(None if s is None else float(s) for s in scales)
    x = c.tensor(v.node.inputs[0])
    if mode == "bicubic":
        return bicubic(v, c, x, align, scales)
    if one_d:
        N, C, L = c.net.shape(x)
        x = c.net.add("reshape", [x], (N, C, 1, L), v.source)
        y = c.net.add("resize", [x], (N, C, 1, out[-1]), v.source, mode=mode, align_corners=align, scales=scales)
        c.bind(v.node.outputs[0], c.net.add("reshape", [y], out, v.source))
        return
    c.bind(v.node.outputs[0], c.net.add("resize", [x], out, v.source, mode=mode, align_corners=align,
                                        scales=scales))


def _nearest3d(v: NodeView, c: Converter, scales) -> None:
    x = c.tensor(v.node.inputs[0])
    N, C, T, H, W = c.net.shape(x)
    out = v.out_shape()
    To, Ho, Wo = out[2:]
    sd, sh, sw = (None if s is None else float(s) for s in scales)
    y = x
    if (Ho, Wo) != (H, W):
        y = c.net.add("reshape", [y], (N, C * T, H, W), v.source)
        y = c.net.add("resize", [y], (N, C * T, Ho, Wo), v.source, mode="nearest", align_corners=False,
                      scales=(sh, sw))
    if To != T:
        y = c.net.add("reshape", [y], (N, C, T, Ho * Wo), v.source)
        y = c.net.add("resize", [y], (N, C, To, Ho * Wo), v.source, mode="nearest", align_corners=False,
                      scales=(sd, None))
    c.bind(v.node.outputs[0], c.net.add("reshape", [y], out, v.source))


def pad(v: NodeView, c: Converter) -> None:
    """Padding (``constant_pad_nd``, ``F.pad`` with a constant, by reflection or replication):
    ``pad`` pairs from the last dim."""
    p = [int(i) for i in v.const("pad")]
    value = v.const("value", None)
    mode = v.const("mode", "constant") if v.op.startswith("aten::pad") else "constant"
    x = c.tensor(v.node.inputs[0])
    shape = c.net.shape(x)
    rank = len(shape)
    widths = [(0, 0)] * rank
    for k in range(len(p) // 2):
        widths[rank - 1 - k] = (p[2 * k], p[2 * k + 1])
    if not any(p):   # a U-Net's F.pad to the skip's size when the sizes already match: a view, no copy
        c.bind(v.node.outputs[0], c.net.add("reshape", [x], v.out_shape(), v.source))
        return
    if mode == "reflect" and any(max(w) >= n for w, n in zip(widths, shape)):   # (torch raises)
        raise EngineBuildError(f"{v.where()}: reflect padding {p} is not under the input's dims {shape}")
    c.bind(v.node.outputs[0], c.net.add("pad", [x], v.out_shape(), v.source, widths=tuple(widths),
                                        value=float(0.0 if value is None else value), mode=mode))


def grid_sample(v: NodeView, c: Converter) -> None:
    """``F.grid_sample`` of a 4-D input (a spatial transformer's or a flow warp's resampling)."""
    x, grid = c.tensor(v.value("input")), c.tensor(v.value("grid"))
    c.bind(v.node.outputs[0], c.net.add("grid_sample", [x, grid], v.out_shape(), v.source,
                                        mode=int(v.const("interpolation_mode")),
                                        padding=int(v.const("padding_mode")),
                                        align_corners=bool(v.const("align_corners"))))


def affine_grid(v: NodeView, c: Converter) -> None:
    """``F.affine_grid`` (``affine_grid_generator``): torch's base grid, a constant (H * W, 3), times
    ``theta`` transposed (a ``permute`` and a ``matmul`` layer), viewed as (N, H, W, 2)."""
    from srcore.plugin import affine_grid as _ag

    n, _, h, w = (int(d) for d in v.const("size"))
    base = c.net.constant(_ag.base_grid(h, w, bool(v.const("align_corners"))).reshape(h * w, 3))
    theta_t = c.net.add("permute", [c.tensor(v.value("theta"))], (n, 3, 2), v.source, perm=(0, 2, 1))
    y = c.net.add("matmul", [base, theta_t], (n, h * w, 2), v.source)
    c.bind(v.node.outputs[0], c.net.add("reshape", [y], v.out_shape(), v.source))


def _index_operand(v: NodeView, c: Converter, name: str):
    """An index or mask argument: ``(tensor id, None)`` for a computed one (an engine input), or
    ``(None, array)`` for a constant (baked into the layer)."""
    value = v.value(name)
    if value.node.kind == "prim::Constant":
        return None, np.asarray(value.node.attrs.get("value"))
    return c.tensor(value), None


def _lookup(v: NodeView, c: Converter, kind: str, table: int, index_name: str, **attrs) -> None:
    tid, const = _index_operand(v, c, index_name)
    inputs = [table] + ([tid] if tid is not None else [])
    c.bind(v.node.outputs[0], c.net.add(kind, inputs, v.out_shape(), v.source, index=const, **attrs))


def embedding(v: NodeView, c: Converter) -> None:
    w = v.const("weight")
    if not isinstance(w, np.ndarray) or w.ndim != 2:
        raise EngineBuildError(f"{v.where()}: an embedding needs a constant 2-D weight")
    table = c.tensor(v.value("weight"))
    _lookup(v, c, "index_select", table, "indices", dim=0)


def embedding_bag(v: NodeView, c: Converter) -> None:
    """``F.embedding_bag`` / ``nn.EmbeddingBag`` (``sum``, ``mean``, ``max``) as a gather and a
    segment reduction: the rows ``weight[indices]`` (an ``index_select``; times ``per_sample_weights``
    in ``sum`` mode), each position's bag ``searchsorted(offsets, i, right) - 1`` (the layer's
    ``shift``; numpy's at build
    time for constant offsets), positions of ``padding_idx`` (and, with ``include_last_offset``,
    those past the last offset) sent to one extra bag, then a ``scatter_reduce`` (sum, mean, amax
    without self) into zeros of ``bags + 1`` rows (an empty bag stays 0, as torch's), the extra row
    sliced off. Only the first result: a read offset2bag, bag_size or max_indices fails the build."""
    if any(o.uses for o in v.node.outputs[1:]):
        raise EngineBuildError(f"{v.where()}: offset2bag, bag_size or max_indices is read (the engine makes the "
                               "bags' values only)")
    w = c.tensor(v.value("weight"))
    (n,), (o,) = v.in_shape("indices"), v.in_shape("offsets")
    d = c.net.shape(w)[1]
    bags = o - 1 if v.const("include_last_offset", False) else o
    out = v.out_shape()
    pad = v.const("padding_idx", None) if "padding_idx" in v.names else None
    pad = None if pad is None or pad < 0 else int(pad)
    if n == 0 or bags == 0:
        c.bind(v.node.outputs[0], c.net.constant(np.zeros(out, np.float32)))
        return
    idx, idx_const = _index_operand(v, c, "indices")
    rows = c.net.add("index_select", [w] + ([idx] if idx is not None else []), (n, d), v.source, dim=0,
                     index=idx_const)
    if v.is_tensor("per_sample_weights"):
        psw = c.net.add("reshape", [c.tensor(v.value("per_sample_weights"))], (n, 1), v.source)
        rows = c.net.add("pointwise", [rows, psw], (n, d), v.source, op="mul", args=(("in", 0), ("in", 1)), params={})
    off, off_const = _index_operand(v, c, "offsets")
    bag, bag_const = None, None
    if off_const is not None:
        bag_const = np.searchsorted(np.asarray(off_const, np.int64), np.arange(n), side="right") - 1
        if idx_const is not None and pad is not None:
            bag_const = np.where(np.asarray(idx_const) == pad, bags, bag_const)
        elif pad is not None:
            bag = c.net.constant(bag_const, "int64")
    else:
        dt = c.net.tensors[off].dtype
        pos = c.net.constant(np.arange(n, dtype=dt), dt)
        # (the layer's shift: the insertion point minus one, no integer layer after it)
        bag = c.net.add("searchsorted", [off, pos], (n,), v.source, right=True, sorter=None, shift=-1)
        c.net.tensors[bag].dtype = "int64"
    if bag is not None and pad is not None:
        ins = [bag]
        if idx is not None:
            m = c.net.add("compare", [idx], (n,), v.source, op="eq", args=(("in", 0), ("const", pad)))
        else:
            m = c.net.constant(np.asarray(idx_const) == pad, "bool")
        c.net.tensors[m].dtype = "bool"
        bag = c.net.add("where", ins + [m], (n,), v.source, args=(("const", bags), ("in", 0)), mask=None)
        c.net.tensors[bag].dtype = "int64"
    if bag is not None:
        r = c.net.add("reshape", [bag], (n, 1), v.source)
        e = c.net.add("expand", [r], (n, d), v.source)
        for t in (r, e):
            c.net.tensors[t].dtype = "int64"
        ins, bag_const = [e], None
    else:
        ins, bag_const = [], np.ascontiguousarray(np.broadcast_to(bag_const.reshape(n, 1), (n, d)))
    zeros = c.net.constant(np.zeros((bags + 1, d), np.float32))
    mode = ("sum", "mean", "amax")[int(v.const("mode", 0))]
    y = c.net.add("scatter_reduce", [zeros, rows] + ins, (bags + 1, d), v.source, dim=0, reduce=mode,
                  include_self=False, index=bag_const)
    c.bind(v.node.outputs[0], c.net.add("strided", [y], out, v.source, key=(slice(0, bags, 1),)))


def index_select(v: NodeView, c: Converter) -> None:
    x = c.tensor(v.value("self"))
    _lookup(v, c, "index_select", x, "index", dim=_dim(v, "dim", len(c.net.shape(x))))


def index_tensor(v: NodeView, c: Converter) -> None:
    """``x[indices]`` with integer index tensors and Nones (``aten::index.Tensor``): an
    ``index_tensor`` layer reading ``x`` and each index tensor (a constant one, DLRM's
    ``tril_indices``, as a network constant), ``dims`` the dims of ``x`` they index; numpy's
    (and torch's) placement of the broadcast index dims."""
    lst = v.value("indices")
    if lst.node.kind != "prim::ListConstruct":
        raise EngineBuildError(f"{v.where()}: argument 'indices' is not a list built in the segment")
    ids, dims = [c.tensor(v.value("self"))], []
    for d, x in enumerate(lst.node.inputs):
        if isinstance(x.type, TensorType):
            ids.append(c.tensor(x))
            dims.append(d)
    c.bind(v.node.outputs[0], c.net.add("index_tensor", ids, v.out_shape(), v.source, dims=tuple(dims)))


def gather(v: NodeView, c: Converter) -> None:
    x = c.tensor(v.value("self"))
    _lookup(v, c, "gather", x, "index", dim=_dim(v, "dim", len(c.net.shape(x))))


def _select_operand(v: NodeView, c: Converter, name: str, inputs: list[int]):
    """A float operand of where / masked_fill: ``("in", k)`` or ``("const", x)`` (a scalar), as
    :func:`operand` makes them."""
    return operand(v, c, name, inputs)


def where(v: NodeView, c: Converter) -> None:
    """``where(cond, a, b)``: float32 values, or integer / bool ones of the result's dtype (exact)."""
    ins: list[int] = []
    dtype = _int_dtype(v)
    if dtype is None:
        a = _select_operand(v, c, "self", ins)
        b = _select_operand(v, c, "other", ins)
    else:
        a, b = _int_operand(v, c, "self", ins, dtype), _int_operand(v, c, "other", ins, dtype)
    cond, const = _index_operand(v, c, "condition")
    c.bind(v.node.outputs[0], c.net.add("where", ins + ([cond] if cond is not None else []), v.out_shape(),
                                        v.source, args=(a, b), mask=const))


def masked_fill(v: NodeView, c: Converter) -> None:
    ins: list[int] = []
    a = _select_operand(v, c, "value", ins)
    b = _select_operand(v, c, "self", ins)
    cond, const = _index_operand(v, c, "mask")
    c.bind(v.node.outputs[0], c.net.add("where", ins + ([cond] if cond is not None else []), v.out_shape(),
                                        v.source, args=(a, b), mask=const))


def cumsum(v: NodeView, c: Converter) -> None:
    x = c.tensor(v.node.inputs[0])
    rank = len(c.net.shape(x))
    if rank == 0:
        c.bind(v.node.outputs[0], c.net.add("reshape", [x], (), v.source))
        return
    c.bind(v.node.outputs[0], c.net.add("cumsum", [x], v.out_shape(), v.source, dim=_dim(v, "dim", rank)))


def instance_norm(v: NodeView, c: Converter) -> None:
    """Instance norm: a group norm with one channel per group (input statistics), or, with running
    statistics (``use_input_stats=False``), a per-channel affine as pointwise layers."""
    shape = v.in_shape("input")
    C = shape[1]
    w, b = v.const("weight"), v.const("bias")
    eps = float(v.const("eps", 1e-5))
    x = c.tensor(v.node.inputs[0])
    if v.const("use_input_stats"):
        c.bind(v.node.outputs[0], c.net.add(
            "group_norm", [x], v.out_shape(), v.source, groups=C, eps=eps,
            weight=None if w is None else np.asarray(w, np.float32).reshape(C),
            bias=None if b is None else np.asarray(b, np.float32).reshape(C)))
        return
    _running_stats_affine(v, c, x, shape, w, b, eps)


def batch_norm(v: NodeView, c: Converter) -> None:
    """Eval batch norm (one torch.jit.freeze could not fold: after a relu, or bn-relu-conv order):
    a per-channel affine from the running statistics, as pointwise layers."""
    _running_stats_affine(v, c, c.tensor(v.node.inputs[0]), v.in_shape("input"), v.const("weight"),
                          v.const("bias"), float(v.const("eps", 1e-5)))


def _running_stats_affine(v: NodeView, c: Converter, x: int, shape, w, b, eps: float) -> None:
    C = shape[1]
    mean = np.asarray(v.const("running_mean"), np.float32)
    var = np.asarray(v.const("running_var"), np.float32)
    scale = np.float32(1.0) / np.sqrt(var + np.float32(eps))
    bshape = (C,) + (1,) * (len(shape) - 2)
    a = scale * (np.ones(C, np.float32) if w is None else np.asarray(w, np.float32))
    k = (np.zeros(C, np.float32) if b is None else np.asarray(b, np.float32)) - mean * a
    out = v.out_shape()
    aid, kid = c.net.constant(a.reshape(bshape)), c.net.constant(k.reshape(bshape))
    y = c.net.add("pointwise", [x, aid], out, v.source, op="mul", args=(("in", 0), ("in", 1)), params={})
    y = c.net.add("pointwise", [y, kid], out, v.source, op="add", args=(("in", 0), ("in", 1)), params={})
    c.bind(v.node.outputs[0], y)


# -- sorting, scattering, comparing -------------------------------------------------------------------
def sort(v: NodeView, c: Converter) -> None:
    """``sort`` as one layer of two outputs, the values and their int64 indices (ties in input order)."""
    x = c.tensor(v.value("self"))
    rank = len(c.net.shape(x))
    values = c.net.add("sort", [x], v.out_shape(), v.source, n_out=2, dim=_dim(v, "dim", rank),
                       descending=bool(v.const("descending", False)))
    c.bind(v.node.outputs[0], values)
    c.bind(v.node.outputs[1], values + 1)


def topk(v: NodeView, c: Converter) -> None:
    """``topk`` as one layer of two outputs, the k first of a stable sort's values and indices
    (largest: descending, NaN first; ``sorted=False`` gets them sorted too)."""
    x = c.tensor(v.value("self"))
    rank = len(c.net.shape(x))
    values = c.net.add("topk", [x], v.out_shape(), v.source, n_out=2, dim=_dim(v, "dim", rank),
                       k=int(v.const("k")), largest=bool(v.const("largest", True)))
    c.bind(v.node.outputs[0], values)
    c.bind(v.node.outputs[1], values + 1)


def argsort(v: NodeView, c: Converter) -> None:
    """``argsort``: the indices of a :func:`sort` layer (its values unread)."""
    x = c.tensor(v.value("self"))
    rank = len(c.net.shape(x))
    values = c.net.add("sort", [x], v.out_shape(), v.source, n_out=2, dim=_dim(v, "dim", rank),
                       descending=bool(v.const("descending", False)))
    c.net.tensors[values].dtype = c.net.tensors[x].dtype
    c.bind(v.node.outputs[0], values + 1)


_REDUCE = {"amax": "max", "amin": "min", "sum": "count", "any": "any", "all": "all", "logsumexp": "logsumexp"}


def reduce(v: NodeView, c: Converter) -> None:
    """``amax`` / ``amin`` (NaN propagates), the ``sum`` of a mask (an int64 count), ``any`` /
    ``all`` of a mask, ``logsumexp`` (a decoder's log-normalizer), over dims (none: all)."""
    x = c.tensor(v.value("self"))
    op = _REDUCE[v.op.split("::", 1)[1].split(".", 1)[0]]
    if op == "count" and c.net.tensors[x].dtype == "float32":
        op = "sum"
    elif op == "count" and c.net.tensors[x].dtype != "bool":
        op = "isum"   # (integers: an exact int64 sum, torch's)
    c.bind(v.node.outputs[0], c.net.add("reduce", [x], v.out_shape(), v.source, op=op, dims=_dims(v, x)))


def norm(v: NodeView, c: Converter) -> None:
    """``x.norm(p, dim, keepdim)`` / ``linalg_vector_norm``: the p-norm over dims (none: all) as
    pointwise layers and a reduction, torch's formulas: 2 ``sqrt(sum(x * x))``, 1 ``sum(|x|)``,
    +-inf ``max`` / ``min(|x|)``, other p > 0 ``sum(|x| ** p) ** (1 / p)``."""
    x = c.tensor(v.value("self"))
    p = _norm_order(v)
    dims, out, shape = _dims(v, x), v.out_shape(), c.net.shape(x)

    def pw(op, t, shp, **params):
        return c.net.add("pointwise", [t], shp, v.source, op=op, args=(("in", 0),), params=params)
    if p == 2:
        sq = c.net.add("pointwise", [x], shape, v.source, op="mul", args=(("in", 0), ("in", 0)), params={})
        c.bind(v.node.outputs[0], pw("sqrt", c.net.add("reduce", [sq], out, v.source, op="sum", dims=dims), out))
        return
    a = pw("abs", x, shape)
    if math.isinf(p):
        c.bind(v.node.outputs[0], c.net.add("reduce", [a], out, v.source, op="max" if p > 0 else "min", dims=dims))
        return
    if p != 1:
        a = pw("pow", a, shape, exponent=p)
    s = c.net.add("reduce", [a], out, v.source, op="sum", dims=dims)
    c.bind(v.node.outputs[0], s if p == 1 else pw("pow", s, out, exponent=1.0 / p))


def cdist(v: NodeView, c: Converter) -> None:
    """``torch.cdist(x1, x2, p, compute_mode)`` as torch computes it: for p = 2 with ``compute_mode``
    1 (``use_mm_for_euclid_dist``), or 0 / None when either operand has more than 25 rows, the
    GEMM form (``[-2 x1, |x1|^2, 1] @ [x2, 1, |x2|^2]^T``, clamped at 0, square root: ATen's
    ``_euclidean_dist``); else the differences ``x1[..., :, None, :] - x2[..., None, :, :]``
    reduced over the features with ATen's per-p terms: 0 counts the nonzero ones (a NaN gives NaN),
    1 ``sum |d|``, 2 ``sqrt(sum d^2)``, inf ``max |d|`` (``std::max`` from 0: NaNs skipped),
    other p ``sum(|d|^p)^(1/p)``. No features (or rows): zeros."""
    a, b = c.tensor(v.value("x1")), c.tensor(v.value("x2"))
    sa, sb, out = c.net.shape(a), c.net.shape(b), v.out_shape()
    p = float(v.const("p", 2.0))
    mode = v.const("compute_mode", None)
    mode = 0 if mode is None else int(mode)
    r1, r2, m = sa[-2], sb[-2], sa[-1]
    if m == 0 or 0 in out:
        c.bind(v.node.outputs[0], c.net.constant(np.zeros(out, np.float32)))
        return
    batch = out[:-2]

    def pw(op, ins, shape, args, **params):
        return c.net.add("pointwise", ins, shape, v.source, op=op, args=args, params=params)

    def wide(t, shape):   # (an operand broadcast to the result's batch dims: matmul takes equal ones)
        full = batch + shape[-2:]
        return t if shape == full else c.net.add("expand", [t], full, v.source)
    if p == 2 and (mode == 1 or mode == 0 and (r1 > 25 or r2 > 25)):
        def padded(t, shape, first):
            sq = pw("mul", [t], shape, (("in", 0), ("in", 0)))
            n = c.net.add("reduce", [sq], shape[:-1] + (1,), v.source, op="sum", dims=(len(shape) - 1,))
            one = c.net.constant(np.ones(shape[:-1] + (1,), np.float32))
            x = pw("mul", [t], shape, (("in", 0), ("const", -2.0))) if first else t
            parts = [x, n, one] if first else [x, one, n]
            return c.net.add("cat", parts, shape[:-1] + (m + 2,), v.source, dim=len(shape) - 1, sizes=(m, 1, 1))
        a2, b2 = padded(a, sa, True), padded(b, sb, False)
        a2, b2 = wide(a2, sa[:-1] + (m + 2,)), wide(b2, sb[:-1] + (m + 2,))
        nb = len(batch)
        bt = c.net.add("permute", [b2], batch + (m + 2, r2), v.source, perm=tuple(range(nb)) + (nb + 1, nb))
        y = c.net.add("matmul", [a2, bt], out, v.source)
        y = pw("clamp", [y], out, (("in", 0),), min=0.0, max=None)
        c.bind(v.node.outputs[0], pw("sqrt", [y], out, (("in", 0),)))
        return
    xa = c.net.add("reshape", [a], sa[:-1] + (1, m), v.source)
    xb = c.net.add("reshape", [b], sb[:-2] + (1, r2, m), v.source)
    diff = out + (m,)
    d = pw("sub", [xa, xb], diff, (("in", 0), ("in", 1)))
    last = (len(diff) - 1,)
    if p == 2:
        s = c.net.add("reduce", [pw("mul", [d], diff, (("in", 0), ("in", 0)))], out, v.source, op="sum", dims=last)
        c.bind(v.node.outputs[0], pw("sqrt", [s], out, (("in", 0),)))
        return
    ad = pw("abs", [d], diff, (("in", 0),))
    if math.isinf(p):
        big = float("inf")
        ad = pw("nan_to_num", [ad], diff, (("in", 0),), nan=0.0, posinf=big, neginf=-big)
        c.bind(v.node.outputs[0], c.net.add("reduce", [ad], out, v.source, op="max", dims=last))
        return
    if p == 0:
        nz = c.net.add("compare", [d], diff, v.source, op="ne", args=(("in", 0), ("const", 0.0)))
        c.net.tensors[nz].dtype = "bool"
        one = c.net.add("cast", [nz], diff, v.source)
        ad = pw("add", [one, pw("minimum", [ad], diff, (("in", 0), ("const", 0.0)))], diff,
                (("in", 0), ("in", 1)))   # (0 + the term's NaN where d is NaN)
    elif p != 1:
        ad = pw("pow", [ad], diff, (("in", 0),), exponent=p)
    s = c.net.add("reduce", [ad], out, v.source, op="sum", dims=last)
    c.bind(v.node.outputs[0], s if p in (0, 1) else pw("pow", [s], out, (("in", 0),), exponent=1.0 / p))


def _norm_order(v: NodeView) -> float:
    name = "ord" if "ord" in v.names else "p"
    p = v.const(name, None) if name in v.names else None
    return 2.0 if p is None else float(p)


def var_std(v: NodeView, c: Converter) -> None:
    """``var`` / ``std`` over dims (none: all): the mean (kept dims), the squared deviations, their
    sum divided by ``N - correction`` (``unbiased``: 1; torch divides by max(0, N - correction):
    0 gives inf, or NaN for a zero sum), then ``sqrt`` for ``std``."""
    x = c.tensor(v.value("self"))
    shape, out = c.net.shape(x), v.out_shape()
    dims = _dims(v, x)
    kept = tuple(1 if d in dims else n for d, n in enumerate(shape))
    m = c.net.add("mean", [x], kept, v.source, dims=dims)
    d = c.net.add("pointwise", [x, m], shape, v.source, op="sub", args=(("in", 0), ("in", 1)), params={})
    sq = c.net.add("pointwise", [d], shape, v.source, op="mul", args=(("in", 0), ("in", 0)), params={})
    s = c.net.add("reduce", [sq], out, v.source, op="sum", dims=dims)
    n = int(np.prod([shape[i] for i in dims])) - _correction(v)
    y = c.net.add("pointwise", [s], out, v.source, op="mul", args=(("in", 0), ("const", 1.0 / n if n > 0 else math.inf)),
                  params={})
    if v.op.startswith("aten::std"):
        y = c.net.add("pointwise", [y], out, v.source, op="sqrt", args=(("in", 0),), params={})
    c.bind(v.node.outputs[0], y)


def _correction(v: NodeView) -> float:
    if "correction" in v.names:
        corr = v.const("correction", None)
        return 1 if corr is None else corr
    return 1 if ("unbiased" not in v.names or v.const("unbiased", True)) else 0


def narrow(v: NodeView, c: Converter) -> None:
    """``x.narrow(dim, start, length)``: the slice ``start:start + length`` of ``dim`` (a negative
    start counts from the end)."""
    shape = v.in_shape("self")
    dim = v.const("dim") % len(shape)
    start = v.const("start")
    start = start + shape[dim] if start < 0 else start
    _select_along(v, c, dim, slice(start, start + v.const("length"), 1), shape[dim])


def _dims(v: NodeView, x: int) -> tuple[int, ...]:
    """The reduced dims, sorted and non-negative (``dim`` an int, a list, empty or absent: all)."""
    nd = len(v.in_shape("self"))
    dims = v.const("dim", None) if "dim" in v.names else None
    if isinstance(dims, int):
        dims = [dims]
    if nd == 0:
        return ()
    return tuple(range(nd)) if not dims else tuple(sorted({d % nd for d in dims}))


def max_dim(v: NodeView, c: Converter) -> None:
    """``max(x, dim)`` / ``min``: the values (a reduce layer) and the first extreme's index."""
    x = c.tensor(v.value("self"))
    (dim,) = _dims(v, x)
    op = v.op.split("::", 1)[1].split(".", 1)[0]
    out = v.out_shape()
    c.bind(v.node.outputs[0], c.net.add("reduce", [x], out, v.source, op=op, dims=(dim,)))
    c.bind(v.node.outputs[1], c.net.add("argmax", [x], out, v.source, dim=dim, largest=op == "max"))


def global_max_pool1d(v: NodeView, c: Converter) -> None:
    """``adaptive_max_pool1d(x, 1)``: :func:`max_dim` over the last dim, kept (values, indices)."""
    x = c.tensor(v.value("self"))
    dim = len(c.net.shape(x)) - 1
    out = v.out_shape()
    c.bind(v.node.outputs[0], c.net.add("reduce", [x], out, v.source, op="max", dims=(dim,)))
    # (a max pool's index: the last NaN, every NaN taking the place; else the first max)
    c.bind(v.node.outputs[1], c.net.add("argmax", [x], out, v.source, dim=dim, largest=True, last_nan=True))


def logical_not(v: NodeView, c: Converter) -> None:
    c.bind(v.node.outputs[0], c.net.add("logical_not", [c.tensor(v.value("self"))], v.out_shape(), v.source))


def argmax(v: NodeView, c: Converter) -> None:
    """``argmax`` / ``argmin`` along a dim (none: of the flattened tensor): the first extreme
    element's index, a NaN counting as the extreme (torch's rule)."""
    x = c.tensor(v.value("self"))
    shape = c.net.shape(x)
    if v.const("dim", None) is None:
        x = c.net.add("reshape", [x], (math.prod(shape),), v.source)
        dim = 0
    else:
        dim = _dim(v, "dim", len(shape))
    c.bind(v.node.outputs[0], c.net.add("argmax", [x], v.out_shape(), v.source, dim=dim,
                                        largest=v.op == "aten::argmax"))


def scatter(v: NodeView, c: Converter) -> None:
    """``scatter`` (a tensor or a number as the source) and ``scatter_add``: the result is ``self``
    with the source's elements written (added) at the indices along ``dim``; inputs self, src (if
    a tensor), the index last (or ``index``: a constant)."""
    x = c.tensor(v.value("self"))
    rank = len(c.net.shape(x))
    index, const = _index_operand(v, c, "index")
    ins = [x]
    value = None
    if v.op == "aten::scatter.value":
        value = float(v.const("value"))
    else:
        ins.append(c.tensor(v.value("src")))
    c.bind(v.node.outputs[0], c.net.add("scatter", ins + ([index] if index is not None else []), v.out_shape(),
                                        v.source, dim=_dim(v, "dim", rank), add=v.op == "aten::scatter_add",
                                        value=value, index=const))


def index_add(v: NodeView, c: Converter) -> None:
    """``self.index_add(dim, index, source, alpha)`` (a GNN's or a mixture of experts' aggregation):
    the ``scatter`` layer adding ``alpha * source`` at the 1-D ``index`` broadcast over the source's
    other dims; each output element takes its contributions in index order, as torch's loop."""
    x = c.tensor(v.value("self"))
    dim = _dim(v, "dim", len(c.net.shape(x)))
    src = c.tensor(v.value("source"))
    ss = c.net.shape(src)
    alpha = float(v.const("alpha", 1))
    if alpha != 1.0:
        src = c.net.add("pointwise", [src], ss, v.source, op="mul", args=(("in", 0), ("const", alpha)), params={})
    index, const = _index_operand(v, c, "index")
    view = tuple(ss[dim] if d == dim else 1 for d in range(len(ss)))
    ins = [x, src]
    if const is not None:
        const = np.ascontiguousarray(np.broadcast_to(np.asarray(const, np.int64).reshape(view), ss))
    else:
        dtype = c.net.tensors[index].dtype
        r = c.net.add("reshape", [index], view, v.source)
        e = c.net.add("expand", [r], ss, v.source)
        for t in (r, e):
            c.net.tensors[t].dtype = dtype
        ins.append(e)
    c.bind(v.node.outputs[0], c.net.add("scatter", ins, v.out_shape(), v.source, dim=dim, add=True, value=None,
                                        index=const))


def scatter_reduce(v: NodeView, c: Converter) -> None:
    """``self.scatter_reduce(dim, index, src, reduce, include_self)``: a ``scatter_reduce`` layer."""
    x = c.tensor(v.value("self"))
    index, const = _index_operand(v, c, "index")
    ins = [x, c.tensor(v.value("src"))] + ([index] if index is not None else [])
    c.bind(v.node.outputs[0], c.net.add("scatter_reduce", ins, v.out_shape(), v.source,
                                        dim=_dim(v, "dim", len(c.net.shape(x))), reduce=v.const("reduce"),
                                        include_self=bool(v.const("include_self", True)), index=const))


def searchsorted(v: NodeView, c: Converter) -> None:
    """``bucketize(x, boundaries, right)`` and ``searchsorted(seq, x, right | side, sorter)``: one
    ``searchsorted`` layer (torch's binary search; int64, or int32 with ``out_int32``)."""
    ins: list[int]
    const = None
    if v.op.startswith("aten::bucketize"):
        ins = [c.tensor(v.value("boundaries")), c.tensor(v.value("self"))]
        right = bool(v.const("right", False))
    else:
        ins = [c.tensor(v.value("sorted_sequence")), c.tensor(v.value("self"))]
        right = bool(v.const("right", False)) or v.const("side", None) == "right"
        if v.is_tensor("sorter"):
            sorter, const = _index_operand(v, c, "sorter")
            ins += [sorter] if sorter is not None else []
    t = c.net.add("searchsorted", ins, v.out_shape(), v.source, right=right, sorter=const)
    c.net.tensors[t].dtype = "int32" if v.const("out_int32", False) else "int64"
    c.bind(v.node.outputs[0], t)


def zeros_like(v: NodeView, c: Converter) -> None:
    c.bind(v.node.outputs[0], c.net.constant(np.zeros(v.out_shape(), np.float32)))


def compare(v: NodeView, c: Converter) -> None:
    """``a < b`` (``le``, ``gt``, ``ge``, ``eq``, ``ne``): a bool mask; operands as :func:`operand` makes them."""
    ins: list[int] = []
    x = v.value("self")
    dtype = c.net.tensors[c.tensor(x)].dtype if x.node.kind != "prim::Constant" else "float32"
    if dtype == "float32":
        a, b = operand(v, c, "self", ins), operand(v, c, "other", ins)
    else:   # integer tensors compare exactly with integer numbers
        a, b = _int_operand(v, c, "self", ins, dtype), _int_operand(v, c, "other", ins, dtype)
    op = v.op.split("::", 1)[1].split(".", 1)[0]
    c.bind(v.node.outputs[0], c.net.add("compare", ins, v.out_shape(), v.source, op=op, args=(a, b)))
