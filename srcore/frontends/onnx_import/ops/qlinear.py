"""Integer and QOperator ONNX ops, as ONNX Runtime's quantizer writes them: QLinearConv, QLinearMatMul,
MatMulInteger, ConvInteger, DynamicQuantizeLinear, and the ``com.microsoft`` ops its QOperator format
uses (QGemm, QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearAveragePool,
QLinearGlobalAveragePool, QLinearConcat).

Each is decomposed into srcore ops with ONNX Runtime's arithmetic (its CPU kernels), so that a
quantized file gives the integers onnxruntime gives:

* the integer accumulator is exact: ``(a - a_zp) @ (b - b_zp)`` in int32 for the matmuls, the
  convolutions in float64 (every partial sum of 8-bit products is an integer below 2**53) rounded
  back to an integer;
* requantization is MLAS's: ``saturate(round_half_even(float32(acc) * multiplier) + y_zp)`` with the
  multiplier ``x_scale * w_scale / y_scale`` computed once in float32 (per output channel for a
  per-channel weight);
* the elementwise ``com.microsoft`` ops compute in float32 as ONNX Runtime's kernels do; the
  unary ones (QLinearSigmoid, QLinearLeakyRelu) and QLinearConcat's requantization are 256-entry
  lookup tables built at conversion, as onnxruntime builds them.

Scales and zero points must be known at conversion (initializers, as the quantizer writes them);
float16 scales and 16-bit data are refused naming the input.
"""
from __future__ import annotations

import numpy as np

from ....ir.types import TensorType
from ..context import NodeContext, Unsupported
from ..values import Val
from ._util import cast, norm_axis, table
from .nn import _pads, _spatial, _torch_pad_list

_RANGE = {"uint8": (0, 255), "int8": (-128, 127)}


def _qparam(cx: NodeContext, i: int, what: str, dtype: str | None = None) -> np.ndarray:
    """Input ``i`` (a scale or zero point) as a constant array; a missing zero point is 0 of ``dtype``."""
    if not cx.has(i):
        if dtype is None:
            raise Unsupported(f"input {i} ({what}) is missing")
        return np.zeros((), dtype)
    c = cx.const(i)
    if c is None:
        raise cx.not_constant([i], f"input {i} ({what}) must be known at conversion")
    if what.endswith("scale"):
        if c.dtype not in (np.float32, np.float16):
            raise Unsupported(f"input {i} ({what}) of dtype {c.dtype} is not supported (float32 or float16 scales)")
        c = c.astype(np.float32)   # a float16 scale is exact in float32; the arithmetic stays float32
        if not np.all(np.isfinite(c)) or np.any(c <= 0):
            raise Unsupported(f"input {i} ({what}) holds a scale that is not finite and positive")
    return c


def _data(cx: NodeContext, i: int, what: str) -> str:
    return cx.require_dtype(i, set(_RANGE), what)


def _scalar(c: np.ndarray, i: int, what: str):
    if c.size != 1:
        raise Unsupported(f"input {i} ({what}) must be per tensor here, it has shape {list(c.shape)}")
    return c.reshape(-1)[0]


def _const(cx: NodeContext, arr: np.ndarray, what: str):
    """A constant tensor Value holding ``arr``."""
    name = f"{cx.node.name or cx.op_type}.{what}"
    return cx.conv.tensor_of(Val(name, const=np.array(arr, order="C")))   # (ascontiguousarray makes 0-d 1-d)


def _zero_point(cx: NodeContext, i: int, what: str, dtype: str):
    """Input ``i`` (a zero point) as a constant array, or as a Value when it is a one-element tensor
    known only at run time (DynamicQuantizeLinear's output, as ``quantize_dynamic`` writes)."""
    if cx.has(i) and cx.const(i) is None:
        if cx.shape(i) not in ((), (1,)):
            raise cx.not_constant([i], f"input {i} ({what}) must be known at conversion unless per tensor")
        return cx.x(i)
    return _qparam(cx, i, what, dtype)


def _centered(cx: NodeContext, i: int, zp, dtype: str, zp_shape=None):
    """``x_i - zp`` in ``dtype`` (a constant is computed here); ``zp`` an array or a Value (see above)."""
    if not isinstance(zp, np.ndarray):
        return cx.op("aten::sub", cast(cx, cx.x(i), dtype), cast(cx, zp, dtype))
    c = cx.const(i)
    z = zp.astype(dtype)
    if zp_shape is not None and z.size != 1:
        z = z.reshape(zp_shape)
    if c is not None:
        return _const(cx, c.astype(dtype) - z, f"in{i}")
    x = cast(cx, cx.x(i), dtype)
    if not np.any(z):
        return x
    return cx.op("aten::sub", x, _const(cx, z, f"zp{i}"))


def _requantize(cx: NodeContext, acc, mult: np.ndarray, zp, out: str):
    """MLAS's requantization of the float32 accumulator ``acc``: see the module docstring."""
    lo, hi = _RANGE[out]
    y = cx.op("aten::round", cx.op("aten::mul", acc, _const(cx, np.asarray(mult, np.float32), "multiplier")))
    zp = int(zp)
    if zp:
        y = cx.op("aten::add", y, _const(cx, np.float32(zp), "y_zero_point"))
    return cast(cx, cx.op("aten::clamp", y, float(lo), float(hi)), out)


def _quantize(cx: NodeContext, y, scale: float, zp: int, out: str):
    """MLAS's QuantizeLinear of a float32 tensor: ``saturate(round_half_even(y / scale) + zp)``."""
    lo, hi = _RANGE[out]
    q = cx.op("aten::round", cx.op("aten::div", y, _const(cx, np.float32(scale), "scale")))
    if zp:
        q = cx.op("aten::add", q, _const(cx, np.float32(zp), "zero_point"))
    return cast(cx, cx.op("aten::clamp", q, float(lo), float(hi)), out)


def _lookup(cx: NodeContext, i: int, table_arr: np.ndarray, out: str):
    """``table[x]`` for the 8-bit input ``i`` (a 256-entry table indexed by the byte's value)."""
    dt = cx.dtype(i)
    idx = cast(cx, cx.x(i), "int64")
    if dt == "int8":   # tables are indexed by the value; int8 -128..127 -> 0..255
        idx = cx.op("aten::add", idx, 128)
    return cx.op("aten::index", _const(cx, table_arr.astype(out), "table"), [idx])


def _values(dt: str) -> np.ndarray:
    lo, hi = _RANGE[dt]
    return np.arange(lo, hi + 1, dtype=np.int32)


def _table_quantize(y: np.ndarray, scale: np.float32, zp: int, out: str) -> np.ndarray:
    lo, hi = _RANGE[out]
    q = np.round(y.astype(np.float32) / np.float32(scale)) + np.float32(zp)
    return np.clip(q, lo, hi).astype(out)


# -- convolutions --------------------------------------------------------------------------------
def _int_conv(cx: NodeContext, xi: int, wi: int, x_zp: np.ndarray, w_zp: np.ndarray, bias=None):
    """The exact integer accumulator of a convolution (float64 holding integers), with ``bias``."""
    n = cx.rank(xi) - 2
    if n not in (1, 2, 3):
        raise Unsupported(f"{n}-D convolution")
    w = cx.const(wi)
    if w is None:
        raise cx.not_constant([wi], f"input {wi} (w) must be known at conversion")
    kernel = list(w.shape[2:])
    k = cx.attr("kernel_shape", None)
    if k is not None and list(k) != kernel:
        raise Unsupported(f"kernel_shape {k} differs from the weight's {kernel}")
    strides = _spatial(cx, "strides", n, 1)
    dil = _spatial(cx, "dilations", n, 1)
    group = int(cx.attr("group", 1))
    if isinstance(x_zp, np.ndarray) and x_zp.size != 1:
        raise Unsupported(f"x_zero_point must be per tensor, it has shape {list(x_zp.shape)}")
    begin, end = _pads(cx, n, kernel, strides, dil)
    x = _centered(cx, xi, x_zp, "float64")
    if any(begin) or any(end):   # pads hold the zero point: zero after centering
        x = cx.op("aten::constant_pad_nd", x, _torch_pad_list(begin, end), 0.0)
    wz = w_zp.astype(np.float64).reshape(-1, *([1] * (n + 1))) if w_zp.size > 1 else w_zp.astype(np.float64)
    wc = w.astype(np.float64) - wz
    b = None if bias is None else _const(cx, bias.astype(np.float64), "bias")
    y = cx.op(f"aten::conv{n}d", x, _const(cx, wc, "w"), b, strides, [0] * n, dil, group)
    return cx.op("aten::round", y)   # fast algorithms (Winograd) leave float64 noise far below 0.5


def _qlinear_operands(cx: NodeContext, a: str, b: str):
    """The eight inputs of QLinearConv / QLinearMatMul checked: the two quantized operands (inputs 0
    and 3) and the scales and zero points of both and of the output; also the output's dtype."""
    _data(cx, 0, a)
    _data(cx, 3, b)
    a_s, a_z = _qparam(cx, 1, f"{a}_scale"), _qparam(cx, 2, f"{a}_zero_point")
    b_s, b_z = _qparam(cx, 4, f"{b}_scale"), _qparam(cx, 5, f"{b}_zero_point")
    ys, yz = _qparam(cx, 6, "y_scale"), _qparam(cx, 7, "y_zero_point")
    out = str(yz.dtype)
    if out not in _RANGE:
        raise Unsupported(f"y_zero_point of dtype {out}")
    return a_s, a_z, b_s, b_z, ys, yz, out


def qlinear_conv(cx: NodeContext):
    xs, xz, ws, wz, ys, yz, out = _qlinear_operands(cx, "x", "w")
    _scalar(xs, 1, "x_scale")
    bias = None
    if cx.has(8):
        bias = cx.const(8)
        if bias is None:
            raise cx.not_constant([8], "input 8 (B) must be known at conversion")
        if bias.dtype != np.int32:
            raise Unsupported(f"input 8 (B) of dtype {bias.dtype} (int32 expected)")
    acc = _int_conv(cx, 0, 3, xz, wz, bias)
    n = cx.rank(0) - 2
    x_s, y_s = np.float32(_scalar(xs, 1, "x_scale")), np.float32(_scalar(ys, 6, "y_scale"))
    mult = (x_s * ws.astype(np.float32).reshape(-1)) / y_s
    mult = mult.reshape(-1, *([1] * n)) if mult.size > 1 else mult.reshape(())
    return _requantize(cx, cast(cx, acc, "float32"), mult, _scalar(yz, 7, "y_zero_point"), out)


def conv_integer(cx: NodeContext):
    _data(cx, 0, "x")
    wdt = _data(cx, 1, "w")
    xz = _zero_point(cx, 2, "x_zero_point", cx.dtype(0))
    wz = _qparam(cx, 3, "w_zero_point", wdt)
    return cast(cx, _int_conv(cx, 0, 1, xz, wz), "int32")


# -- matmuls -------------------------------------------------------------------------------------
def _zp_shape(c: np.ndarray, rank: int, row: bool):
    """How a per-row (a) / per-column (b) zero point or scale broadcasts against a rank-``rank`` operand."""
    if c.size == 1:
        return ()
    if c.ndim == rank:
        return c.shape
    return (-1, 1) if row else (-1,)


def _int_matmul(cx: NodeContext, ia: int, ib: int, az: np.ndarray, bz: np.ndarray):
    """``(a - a_zp) @ (b - b_zp)`` in int32 (exact)."""
    a = _centered(cx, ia, az, "int32", _zp_shape(az, cx.rank(ia), True) if isinstance(az, np.ndarray) else None)
    b = _centered(cx, ib, bz, "int32", _zp_shape(bz, cx.rank(ib), False))
    return cx.op("aten::matmul", a, b)


def matmul_integer(cx: NodeContext):
    adt, bdt = _data(cx, 0, "A"), _data(cx, 1, "B")
    az = _zero_point(cx, 2, "a_zero_point", adt)
    bz = _qparam(cx, 3, "b_zero_point", bdt)
    return _int_matmul(cx, 0, 1, az, bz)


def qlinear_matmul(cx: NodeContext):
    as_, az, bs, bz, ys, yz, out = _qlinear_operands(cx, "a", "b")
    acc = _int_matmul(cx, 0, 3, az, bz)
    a_s = as_.astype(np.float32).reshape(_zp_shape(as_, cx.rank(0), True) or ())
    b_s = bs.astype(np.float32).reshape(_zp_shape(bs, cx.rank(3), False) or ())
    mult = (a_s * b_s) / np.float32(_scalar(ys, 6, "y_scale"))
    return _requantize(cx, cast(cx, acc, "float32"), mult, _scalar(yz, 7, "y_zero_point"), out)


def qgemm(cx: NodeContext):
    """com.microsoft QGemm: ``alpha * A' @ B' + C`` (C int32), requantized when y_scale is given,
    else float32 ``(alpha * a_scale * b_scale) * acc``."""
    adt = _data(cx, 0, "A")
    bdt = _data(cx, 3, "B")
    alpha = np.float32(cx.attr("alpha", 1.0))
    ta, tb = int(cx.attr("transA", 0)), int(cx.attr("transB", 0))
    if cx.rank(0) != 2 or cx.rank(3) != 2:
        raise Unsupported("A and B must be 2-D")
    as_, az = _qparam(cx, 1, "a_scale"), _qparam(cx, 2, "a_zero_point", adt)
    bs, bz = _qparam(cx, 4, "b_scale"), _qparam(cx, 5, "b_zero_point", bdt)
    a = _centered(cx, 0, az, "int32")
    if ta:
        a = cx.op("aten::t", a)
    b = cx.const(3)
    if b is None:
        raise cx.not_constant([3], "input 3 (B) must be known at conversion")
    b = b.T if tb else b
    bzc = bz.reshape(-1) if bz.size > 1 else bz.reshape(())
    acc = cx.op("aten::matmul", a, _const(cx, b.astype(np.int32) - bzc.astype(np.int32), "B"))
    if cx.has(6):
        c = cx.const(6)
        if c is None:
            raise cx.not_constant([6], "input 6 (C) must be known at conversion")
        if c.dtype != np.int32:
            raise Unsupported(f"input 6 (C) of dtype {c.dtype} (int32 expected)")
        acc = cx.op("aten::add", acc, _const(cx, c, "C"))
    acc = cast(cx, acc, "float32")
    scale = np.float32(_scalar(as_, 1, "a_scale")) * bs.astype(np.float32).reshape(-1 if bs.size > 1 else ()) * alpha
    if not cx.has(7):
        return cx.op("aten::mul", acc, _const(cx, scale.astype(np.float32), "scale"))
    ys = _qparam(cx, 7, "y_scale")
    yz = _qparam(cx, 8, "y_zero_point", "uint8")
    out = str(yz.dtype)
    if out not in _RANGE:
        raise Unsupported(f"y_zero_point of dtype {out}")
    return _requantize(cx, acc, scale / np.float32(_scalar(ys, 7, "y_scale")), _scalar(yz, 8, "y_zero_point"), out)


# -- DynamicQuantizeLinear -----------------------------------------------------------------------
def dynamic_quantize_linear(cx: NodeContext):
    """ONNX Runtime's: the range widened to hold 0, ``scale = (max - min) / 255`` (1 when the range
    is empty), ``zp = saturate(round(0 - min / scale))``, ``y = saturate(round(x / scale) + zp)``."""
    cx.require_dtype(0, {"float32"}, "x")
    x = cx.x(0)
    f32 = TensorType("float32", ())
    mx = cx.op("aten::clamp_min", cx.op("aten::amax", x, [], False), 0.0, types=[f32])
    mn = cx.op("aten::clamp_max", cx.op("aten::amin", x, [], False), 0.0, types=[f32])
    rng = cx.op("aten::sub", mx, mn)
    empty = cx.op("aten::eq", rng, 0.0)
    scale = cx.op("aten::where", empty, _const(cx, np.float32(1.0), "one"),
                  cx.op("aten::div", rng, _const(cx, np.float32(255.0), "qrange")))
    zp = cx.op("aten::round", cx.op("aten::clamp", cx.op("aten::sub", _const(cx, np.float32(0.0), "qmin"),
                                                          cx.op("aten::div", mn, scale)), 0.0, 255.0))
    q = cx.op("aten::add", cx.op("aten::round", cx.op("aten::div", x, scale)), zp)
    y = cast(cx, cx.op("aten::clamp", q, 0.0, 255.0), "uint8")
    return y, scale, cast(cx, zp, "uint8")


# -- com.microsoft elementwise -------------------------------------------------------------------
def _binary_params(cx: NodeContext):
    adt = _data(cx, 0, "A")
    a_s, az = _qparam(cx, 1, "A_scale"), _qparam(cx, 2, "A_zero_point", adt)
    b_s, bz = _qparam(cx, 4, "B_scale"), _qparam(cx, 5, "B_zero_point", adt)
    c_s, cz = _qparam(cx, 6, "C_scale"), _qparam(cx, 7, "C_zero_point", adt)
    if cx.dtype(3) != adt:
        raise Unsupported(f"A of dtype {adt} and B of dtype {cx.dtype(3)}")
    vals = [np.float32(_scalar(v, i, w)) for v, i, w in ((a_s, 1, "A_scale"), (b_s, 4, "B_scale"), (c_s, 6, "C_scale"))]
    zps = [int(_scalar(v, i, w))
           for v, i, w in ((az, 2, "A_zero_point"), (bz, 5, "B_zero_point"), (cz, 7, "C_zero_point"))]
    return adt, vals, zps


def qlinear_add(cx: NodeContext):
    dt, (sa, sb, sc), (za, zb, zc) = _binary_params(cx)
    a = cast(cx, _centered(cx, 0, np.array(za), "int32"), "float32")
    b = cast(cx, _centered(cx, 3, np.array(zb), "int32"), "float32")
    y = cx.op("aten::add", cx.op("aten::mul", a, _const(cx, np.float32(sa / sc), "ratio_a")),
              cx.op("aten::mul", b, _const(cx, np.float32(sb / sc), "ratio_b")))
    return _requantize(cx, y, np.float32(1.0), zc, dt)


def qlinear_mul(cx: NodeContext):
    dt, (sa, sb, sc), (za, zb, zc) = _binary_params(cx)
    a = cast(cx, _centered(cx, 0, np.array(za), "int32"), "float32")
    b = cast(cx, _centered(cx, 3, np.array(zb), "int32"), "float32")
    return _requantize(cx, cx.op("aten::mul", a, b), np.float32(sa * sb / sc), zc, dt)


def _unary_lut(fn):
    def convert(cx: NodeContext):
        dt = _data(cx, 0, "X")
        xs = np.float32(_scalar(_qparam(cx, 1, "X_scale"), 1, "X_scale"))
        xz = int(_scalar(_qparam(cx, 2, "X_zero_point", dt), 2, "X_zero_point"))
        ys = np.float32(_scalar(_qparam(cx, 3, "Y_scale"), 3, "Y_scale"))
        yz = int(_scalar(_qparam(cx, 4, "Y_zero_point", dt), 4, "Y_zero_point"))
        x = xs * (_values(dt) - xz).astype(np.float32)
        y = fn(cx, x)
        return _lookup(cx, 0, _table_quantize(y, ys, yz, dt), dt)
    convert.__name__ = fn.__name__
    return convert


def _sigmoid(cx, x):
    return (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(np.float32)


def _leaky_relu(cx, x):
    alpha = np.float32(cx.attr("alpha", 0.01))
    return np.where(x >= 0, x, x * alpha).astype(np.float32)


def qlinear_global_average_pool(cx: NodeContext):
    """``round((sum - x_zp * n) * (x_scale / (y_scale * n))) + y_zp`` over the spatial dims."""
    dt = _data(cx, 0, "X")
    last = int(cx.attr("channels_last", 0))
    xs = np.float32(_scalar(_qparam(cx, 1, "x_scale"), 1, "x_scale"))
    xz = int(_scalar(_qparam(cx, 2, "x_zero_point", dt), 2, "x_zero_point"))
    ys = np.float32(_scalar(_qparam(cx, 3, "y_scale"), 3, "y_scale"))
    yz = int(_scalar(_qparam(cx, 4, "y_zero_point", dt), 4, "y_zero_point"))
    r = cx.rank(0)
    shape = cx.shape(0)
    dims = list(range(1, r - 1)) if last else list(range(2, r))
    if shape is None or any(not isinstance(shape[d], int) for d in dims):
        raise Unsupported("the spatial dims must be known at conversion")
    n = int(np.prod([shape[d] for d in dims]))
    acc = cx.op("aten::sum", _centered(cx, 0, np.array(xz), "int32"), dims, True, None)
    mult = xs / (ys * np.float32(n))
    return _requantize(cx, cast(cx, acc, "float32"), mult, yz, dt)


def qlinear_average_pool(cx: NodeContext):
    """Dequantized to float32 (``(x - x_zp) * x_scale``), AveragePool (every attribute of the ONNX op),
    quantized ``saturate(round(y / y_scale) + y_zp)``, as onnxruntime computes it."""
    from .nn import average_pool

    dt = _data(cx, 0, "X")
    if int(cx.attr("channels_last", 0)):
        raise Unsupported("channels_last=1")
    xs = np.float32(_scalar(_qparam(cx, 1, "x_scale"), 1, "x_scale"))
    xz = int(_scalar(_qparam(cx, 2, "x_zero_point", dt), 2, "x_zero_point"))
    ys = np.float32(_scalar(_qparam(cx, 3, "y_scale"), 3, "y_scale"))
    yz = int(_scalar(_qparam(cx, 4, "y_zero_point", dt), 4, "y_zero_point"))
    x = cx.op("aten::mul", cast(cx, _centered(cx, 0, np.array(xz), "int32"), "float32"), _const(cx, xs, "x_scale"))
    t = cx.type(0)
    cx.vals = [Val(cx.val(0).name, TensorType("float32", t.shape), tensor=x)]   # AveragePool's view
    return _quantize(cx, average_pool(cx), ys, yz, dt)


def qlinear_concat(cx: NodeContext):
    axis = int(cx.attr("axis"))
    ys = np.float32(_scalar(_qparam(cx, 0, "Y_scale"), 0, "Y_scale"))
    yz_arr = _qparam(cx, 1, "Y_zero_point")
    dt = str(yz_arr.dtype)
    if dt not in _RANGE:
        raise Unsupported(f"Y_zero_point of dtype {dt}")
    yz = int(_scalar(yz_arr, 1, "Y_zero_point"))
    if (cx.n_inputs - 2) % 3 or cx.n_inputs < 5:
        raise Unsupported(f"{cx.n_inputs} inputs (Y_scale, Y_zero_point, then (X, scale, zero point) triples)")
    parts = []
    for i in range(2, cx.n_inputs, 3):
        if _data(cx, i, f"X{(i - 2) // 3}") != dt:
            raise Unsupported(f"input {i} of dtype {cx.dtype(i)} for an output of dtype {dt}")
        xs = np.float32(_scalar(_qparam(cx, i + 1, "scale"), i + 1, "scale"))
        xz = int(_scalar(_qparam(cx, i + 2, "zero point", dt), i + 2, "zero point"))
        if xs == ys and xz == yz:
            parts.append(cx.x(i))
            continue
        table_arr = _table_quantize(xs * (_values(dt) - xz).astype(np.float32), ys, yz, dt)
        parts.append(_lookup(cx, i, table_arr, dt))
    return cx.op("aten::cat", parts, norm_axis(axis, cx.rank(2)))


CONVERTERS = table(QLinearConv=(qlinear_conv, 10), ConvInteger=(conv_integer, 10),
                   QLinearMatMul=(qlinear_matmul, 10, 21), MatMulInteger=(matmul_integer, 10),
                   DynamicQuantizeLinear=(dynamic_quantize_linear, 11))

#: the ``com.microsoft`` ops (version 1) ONNX Runtime's QOperator quantization writes
MS_CONVERTERS = table(QGemm=(qgemm, 1), QLinearAdd=(qlinear_add, 1), QLinearMul=(qlinear_mul, 1),
                      QLinearSigmoid=(_unary_lut(_sigmoid), 1), QLinearLeakyRelu=(_unary_lut(_leaky_relu), 1),
                      QLinearGlobalAveragePool=(qlinear_global_average_pool, 1),
                      QLinearAveragePool=(qlinear_average_pool, 1),
                      QLinearConcat=(qlinear_concat, 1))
