"""QuantizeLinear / DequantizeLinear: ONNX's QDQ format onto srcore's quantized types.

A QDQ model (ONNX Runtime's ``quantize_static`` with ``QuantFormat.QDQ``) is a float model with
``QuantizeLinear -> DequantizeLinear`` pairs on the activations and ``DequantizeLinear`` on integer
weights and biases. They convert so that ``fold_qdq``'s folding (run by ``from_onnx`` afterwards)
turns ``DQ -> Conv/Gemm(DQ(W)) [-> Relu] -> Q`` and ``DQ + DQ -> Q`` into ``quantized::`` ops:

* QuantizeLinear with constant per-tensor parameters to uint8/int8 is ``aten::quantize_per_tensor``
  (a ``quint8``/``qint8`` value) and ``aten::int_repr`` (the uint8/int8 tensor ONNX has);
* DequantizeLinear of such an ``int_repr`` (the same parameters) is ``aten::dequantize`` of the
  quantized value, and of a constant uint8/int8/int32 tensor a quantized parameter (per tensor or
  per channel) and ``aten::dequantize``;
* anything else (parameters known only at run time, int16/uint16 data, float16 scales) is ONNX's
  arithmetic in float32: ``saturate(round_half_even(x / scale) + zero_point)`` and
  ``(x - zero_point) * scale``.

srcore quantizes as fbgemm does (``x * (1 / scale)``, then round half to even); ONNX divides. The
two differ only for a value within float32 rounding of a tie: by one quantization step.
Blocked quantization (``block_size``) repeats each parameter over its block (float arithmetic).
uint16, int4 and uint4 are the same float arithmetic; float8 targets are ``x / scale + zero_point``
cast to the float8 type (saturating unless ``saturate=0``), and float8 data dequantizes as
``(x - zero_point) * scale`` in float32.
"""
from __future__ import annotations

import numpy as np

from ....ir.quant import QDTYPES, QParams
from ....ir.types import TensorType
from ..context import NodeContext, Unsupported, declared_ops
from ..dtypes import scalar_type
from ._util import FLOAT8_MAX, cast, dim_item, norm_axis, saturate_float8, table

#: storage dtype -> srcore's quantized dtype
_QDTYPE = {"uint8": "quint8", "int8": "qint8", "int32": "qint32"}
#: the integer types ONNX QDQ carries that srcore computes (in float32 arithmetic when not 8-bit)
_RANGES = {"uint8": (0, 255), "int8": (-128, 127), "int16": (-(2 ** 15), 2 ** 15 - 1), "int32": (-(2 ** 31), 2 ** 31 - 1),
           "uint16": (0, 2 ** 16 - 1), "int4": (-8, 7), "uint4": (0, 15)}
_FLOAT8 = frozenset(FLOAT8_MAX)
_ONNX_INT = {2: "uint8", 3: "int8", 5: "int16", 6: "int32", 4: "uint16", 22: "int4", 21: "uint4",
             17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2", 20: "float8_e5m2fnuz"}


def _common_attrs(cx: NodeContext) -> tuple[int, int]:
    """The attributes every version may carry: ``(axis, block_size)``."""
    block = int(cx.attr("block_size", 0))
    if block < 0:
        raise Unsupported(f"block_size={block}")
    return int(cx.attr("axis", 1)), block


def _quantized_ops() -> bool:
    """Whether srcore's quantized ops are declared (plugin srcore-quantized); else float arithmetic."""
    return {"aten::quantize_per_tensor", "aten::int_repr", "aten::dequantize"} <= declared_ops()


def _per_tensor(cx: NodeContext, i: int) -> bool:
    shape = cx.shape(i) if cx.has(i) else ()
    return shape is not None and (len(shape) == 0 or (len(shape) == 1 and shape[0] == 1))


def _const_params(cx: NodeContext):
    """(scale, zero_point) as Python numbers when both are per-tensor constants, else None."""
    s = cx.const(1)
    z = cx.const(2) if cx.has(2) else np.zeros((), np.uint8)
    if s is None or z is None or s.size != 1 or z.size != 1 or s.dtype != np.float32:
        return None
    scale, zp = float(s.reshape(-1)[0]), int(z.reshape(-1)[0])
    lo, hi = _RANGES.get(str(z.dtype), (0, -1))
    # what srcore's quantized types can hold; anything else (a zero scale...) is ONNX's float arithmetic
    return (scale, zp) if 0 < scale < float("inf") and lo <= zp <= hi else None


def _broadcast(cx: NodeContext, v, axis: int, rank: int, i: int, block: int = 0):
    """Parameter ``i`` shaped to broadcast against input 0: a 1-D per-axis one along ``axis``, a
    blocked one (input 0's shape with ``ceil(D / block)`` along ``axis``) repeated ``block`` times."""
    if block:
        if cx.rank(i) != rank:
            raise Unsupported(f"blocked quantization with a parameter of rank {cx.rank(i)} for rank {rank}")
        v = cx.op("aten::repeat_interleave", v, block, axis, None)
        return cx.op("aten::narrow", v, axis, 0, dim_item(cx, 0, cx.x(0), axis))
    if _per_tensor(cx, i) or rank <= 1:
        return v
    shape = [1] * rank
    shape[axis] = -1
    return cx.op("aten::reshape", v, shape)


def _finite_scale(cx: NodeContext) -> None:
    """A constant scale of inf or NaN is refused (as QLinear ops refuse it): ONNX's arithmetic then makes
    0 * inf, whose result each runtime picks (onnxruntime gives 0, numpy NaN); such a file comes from a
    calibration that saw an infinite value (an attention mask of -inf quantized with the scores)."""
    s = cx.const(1)
    if s is not None and np.issubdtype(s.dtype, np.floating) and not np.all(np.isfinite(s)):
        raise Unsupported(f"input 1 (scale) holds {float(s[~np.isfinite(s)].reshape(-1)[0])}: not finite (the "
                          f"calibration saw an infinite value?)")


def quantize_linear(cx: NodeContext):
    axis, block = _common_attrs(cx)
    _finite_scale(cx)
    saturate = bool(cx.attr("saturate", 1))   # applies to float8 outputs only
    out_code = int(cx.attr("output_dtype", 0))
    precision = int(cx.attr("precision", 0))
    from ..dtypes import dtype_of

    # the division's precision: the scale's type unless ``precision`` names one (Quantize-25+)
    ddt = dtype_of(precision) if precision else cx.dtype(1)
    if ddt not in ("float32", "float16", "bfloat16", "float64"):
        raise Unsupported(f"dividing in {ddt}")
    zdt = cx.dtype(2) if cx.has(2) else _ONNX_INT.get(out_code, "uint8" if not out_code else None)
    if (zdt not in _RANGES and zdt not in _FLOAT8) or (out_code and _ONNX_INT.get(out_code) != zdt):
        from ..dtypes import ONNX_TYPE_NAMES

        raise Unsupported(f"quantizing to {zdt or ONNX_TYPE_NAMES.get(out_code, out_code)} (srcore has uint8, "
                          f"int8, uint16, int16, int32, int4, uint4 and the float8 types)")
    cx.require_dtype(0, {"float32", "float16", "float64"}, "x")
    params = _const_params(cx)
    if params is not None and zdt in ("uint8", "int8") and cx.dtype(0) == "float32" and ddt == "float32" \
            and not block and _quantized_ops():
        scale, zp = params
        q = cx.op("aten::quantize_per_tensor", cx.x(0), scale, zp, scalar_type(_QDTYPE[zdt]),
                  types=[TensorType(_QDTYPE[zdt], cx.shape(0), QParams(scale, zp))])
        return cx.op("aten::int_repr", q)
    rank = cx.rank(0)
    axis = 0 if _per_tensor(cx, 1) and not block else norm_axis(axis, rank)   # ONNX ignores axis per tensor
    x = cast(cx, cx.x(0), ddt)
    s = _broadcast(cx, cast(cx, cx.x(1), ddt), axis, rank, 1, block)
    if zdt in _FLOAT8:   # no rounding to an integer: the float8 cast rounds
        y = cast(cx, cx.op("aten::div", x, s), "float32")
        if cx.has(2):
            y = cx.op("aten::add", y, _broadcast(cx, cast(cx, cx.x(2), "float32"), axis, rank, 2, block))
        return saturate_float8(cx, y, zdt) if saturate else cast(cx, y, zdt)
    y = cast(cx, cx.op("aten::round", cx.op("aten::div", x, s)), "float32")   # an integer: exact in float32
    if cx.has(2):
        y = cx.op("aten::add", y, _broadcast(cx, cast(cx, cx.x(2), "float32"), axis, rank, 2, block))
    lo, hi = _RANGES[zdt]
    return cast(cx, cx.op("aten::clamp", y, float(lo), float(hi)), zdt)


def _quantized_source(x, scale: float, zp: int):
    """The quantized value ``x`` is the ``int_repr`` of, when quantized with these parameters."""
    if x.node.kind != "aten::int_repr" or x.node.inputs[0].node.kind != "aten::quantize_per_tensor":
        return None
    q = x.node.inputs[0]
    got = [v.node.attrs.get("value") if v.node.kind == "prim::Constant" else None for v in q.node.inputs[1:3]]
    return q if got == [scale, zp] else None


def dequantize_linear(cx: NodeContext):
    axis, block = _common_attrs(cx)
    _finite_scale(cx)
    out_code = int(cx.attr("output_dtype", 0))
    xdt = cx.require_dtype(0, set(_RANGES) | _FLOAT8, "x")
    sdt = cx.require_dtype(1, {"float32", "float16", "float64"}, "x_scale")
    if out_code not in (0, 1, 10, 11):
        raise Unsupported(f"output_dtype={out_code}")
    rank = cx.rank(0)
    axis = 0 if _per_tensor(cx, 1) and not block else norm_axis(axis, rank)
    folded = _dequantize_quantized(cx, xdt, sdt, axis) if sdt == "float32" and out_code in (0, 1) and not block \
        else None
    if folded is not None:
        return folded
    # x - zero_point without wrapping around (float8: exact in float32)
    wide = "int64" if xdt == "int32" else "float32" if xdt in _FLOAT8 else "int32"
    d = cast(cx, cx.x(0), wide)
    if cx.has(2):
        d = cx.op("aten::sub", d, _broadcast(cx, cast(cx, cx.x(2), wide), axis, rank, 2, block))
    y = cx.op("aten::mul", cast(cx, d, "float32"), _broadcast(cx, cast(cx, cx.x(1), "float32"), axis, rank, 1, block))
    out = {0: sdt, 1: "float32", 10: "float16", 11: "float64"}[out_code]
    return y if out == "float32" else cast(cx, y, out)


def _dequantize_quantized(cx: NodeContext, xdt: str, sdt: str, axis: int):
    """``aten::dequantize`` of a quantized value (see the module docstring), or None."""
    if xdt not in _QDTYPE or not _quantized_ops():
        return None
    params = _const_params(cx)
    xc = cx.const(0)
    if params is not None:
        scale, zp = params
        if xc is None:
            q = _quantized_source(cx.x(0), scale, zp)
            return None if q is None else cx.op("aten::dequantize", q, types=[TensorType("float32", cx.shape(0))])
        q = QParams(scale, zp)
    elif xc is not None and cx.const(1) is not None and xc.ndim >= 1:
        s = cx.const(1).reshape(-1)
        z = cx.const(2).reshape(-1) if cx.has(2) else np.zeros(s.shape, np.int64)
        if cx.const(1).ndim != 1 or s.size != xc.shape[axis] or z.size != s.size or s.dtype != np.float32:
            return None
        q = QParams(tuple(float(v) for v in s), tuple(int(v) for v in z), axis)
    else:
        return None
    info = QDTYPES[_QDTYPE[xdt]]
    zps = q.zero_point if isinstance(q.zero_point, tuple) else (q.zero_point,)
    if not all(info.qmin <= v <= info.qmax for v in zps) or not all(
            v > 0 and np.isfinite(v) for v in (q.scale if isinstance(q.scale, tuple) else (q.scale,))):
        return None   # a zero point the quantized dtype cannot hold (or a zero scale): plain arithmetic
    w = cx.conv.quantized_param(cx.val(0).param_name or cx.val(0).name, xc, _QDTYPE[xdt], q)
    return cx.op("aten::dequantize", w, types=[TensorType("float32", tuple(xc.shape))])


def dequantize_constants(graph) -> int:
    """After folding: each ``aten::dequantize`` of a quantized parameter no quantized op took
    becomes a float parameter (computed once here, not at every run); returns how many."""
    n = 0
    for node in list(graph.all_nodes()):
        if node.kind != "aten::dequantize" or node.inputs[0].node.kind != "prim::Constant":
            continue
        c = node.inputs[0].node
        qa = c.attrs.get("value")
        if qa is None or not hasattr(qa, "dequantize"):
            continue
        arr = np.ascontiguousarray(qa.dequantize(), dtype=np.float32)
        name = (c.attrs.get("param") or "w") + ".dq"
        new = graph.create("prim::Constant", (), (TensorType("float32", arr.shape),), {"param": name, "value": arr},
                           output_names=[name])
        new.insert_before(node)
        node.output.replace_all_uses_with(new.output)
        node.destroy()
        n += 1
    return n


_V = (10, 13, 19, 21, 23, 24, 25, 28)   # 28: more (sub-byte) types, the same arithmetic
CONVERTERS = table(QuantizeLinear=(quantize_linear, *_V), DequantizeLinear=(dequantize_linear, *_V))
