"""Elementwise ONNX ops: arithmetic, math functions, activations, comparisons, logic, casts."""
from __future__ import annotations

import attrs
import numpy as np

from ..context import NodeContext, Unsupported
from ..dtypes import FLOAT8, FLOATS, INT4, INTS
from ..dtypes import scalar_type
from ._util import saturate_float8, broadcast_items, cast, int_binop, ints_val, scalar_arg, table

NUMERIC = FLOATS | INTS
UNSIGNED = frozenset({"uint8", "uint16", "uint32", "uint64"})


def unary(kind: str, dtypes=NUMERIC):
    def convert(cx: NodeContext):
        cx.require_dtype(0, dtypes)
        return cx.op(kind, cx.x(0))
    convert.__name__ = kind.split("::")[1]
    return convert


def _shape_arith(cx: NodeContext, name: str):
    """Add/Sub/Mul/Div/Mod of shape values (int items) stay int items; None if not such a case."""
    a, b = cx.val(0), cx.val(1)
    if a.ints is None and b.ints is None:
        return None
    if a.dtype not in ("int64", "int32") or a.dtype != b.dtype:
        return None
    ia, ib = a.known_ints() or a.ints, b.known_ints() or b.ints
    if ia is None or ib is None or (a.rank or 0) > 1 or (b.rank or 0) > 1:
        return None
    ia, ib = broadcast_items(list(ia), list(ib))
    items = [int_binop(cx, name, x, y) for x, y in zip(ia, ib)]
    return ints_val(cx, items, scalar=(a.rank == 0 and b.rank == 0), dtype=a.dtype)


def _same_dtype(cx: NodeContext) -> str:
    a, b = cx.dtype(0), cx.dtype(1)
    if a is None or a != b:
        raise Unsupported(f"inputs of dtypes {a} and {b} (ONNX requires equal dtypes)")
    return a


def _scalar_const(cx: NodeContext, i: int, other: int):
    """Input ``i`` as a Python number when it is a one-element constant that broadcasts nothing
    (a 0-d constant, or one no bigger in rank than input ``other``): ops then take the ``Scalar``
    overload, as TorchScript writes ``x + 1.0``, which fusions and matchers recognize. None if not."""
    c = cx.const(i)
    if c is None or c.size != 1 or cx.val(i).ints is not None:
        return None
    r = cx.type(other).rank
    if c.ndim and (r is None or r < c.ndim):
        return None
    v = c.reshape(-1)[0]
    return bool(v) if c.dtype == np.bool_ else int(v) if c.dtype.kind in "iu" else float(v)


def _binary(cx: NodeContext, kind: str, commutes: bool, swapped: str | None = None, alpha: bool = False):
    """``kind(x, y)`` with a one-element constant operand as a Scalar: ``kind(x, c)``, or for a
    constant first operand ``kind(y, c)`` when the op commutes, else ``swapped(y, c)``."""
    extra = (1,) if alpha else ()
    c = _scalar_const(cx, 1, 0)
    if c is not None:
        return cx.op(kind, cx.x(0), c, *extra)
    c = _scalar_const(cx, 0, 1)
    if c is not None and (commutes or swapped):
        return cx.op(kind if commutes else swapped, cx.x(1), c, *extra)
    return cx.op(kind, cx.x(0), cx.x(1), *extra)


def add(cx: NodeContext):
    return _shape_arith(cx, "add") or (_same_dtype(cx) and _binary(cx, "aten::add", True, alpha=True))


def sub(cx: NodeContext):
    return _shape_arith(cx, "sub") or (_same_dtype(cx) and _binary(cx, "aten::sub", False, "aten::rsub", alpha=True))


def mul(cx: NodeContext):
    return _shape_arith(cx, "mul") or (_same_dtype(cx) and _binary(cx, "aten::mul", True))


def div(cx: NodeContext):
    res = _shape_arith(cx, "div")
    if res is not None:
        return res
    dt = _same_dtype(cx)
    if dt in INTS:  # ONNX integer division truncates toward zero
        c = _scalar_const(cx, 1, 0)
        return cx.op("aten::div", cx.x(0), c if c is not None else cx.x(1), "trunc")
    return _binary(cx, "aten::div", False)


def mod(cx: NodeContext):
    fmod = cx.attr("fmod", 0)
    dt = _same_dtype(cx)
    if fmod == 1:
        return cx.op("aten::fmod", cx.x(0), cx.x(1))
    if dt in FLOATS and cx.version < 28:
        raise Unsupported("fmod=0 on floating-point inputs is not defined before Mod-28")
    res = _shape_arith(cx, "mod")
    return res if res is not None else cx.op("aten::remainder", cx.x(0), cx.x(1))


def pow_(cx: NodeContext):
    x_dt = cx.require_dtype(0, NUMERIC)
    y_dt = cx.require_dtype(1, NUMERIC)
    e = cx.x(1)
    if y_dt in ("uint16", "uint32", "uint64") and x_dt in FLOATS:   # no kernel mixes them: as numpy
        e = cast(cx, e, "float64")                                  # promotes (then the base's dtype)
    y = cx.op("aten::pow", cx.x(0), e)
    return y if cx.dtype(1) == x_dt else cast(cx, y, x_dt)  # ONNX: the base's dtype


def variadic(kind: str, mean: bool = False):
    def convert(cx: NodeContext):
        n = cx.n_inputs
        dts = {cx.dtype(i) for i in range(n)}
        if len(dts) != 1 or None in dts:
            raise Unsupported(f"inputs of dtypes {sorted(map(str, dts))}")
        acc = cx.x(0)
        if n == 1:
            return cx.op("aten::clone", acc, None)
        for i in range(1, n):
            acc = cx.op(kind, acc, cx.x(i), 1) if kind == "aten::add" else cx.op(kind, acc, cx.x(i))
        if mean:
            if dts.pop() not in FLOATS:
                raise Unsupported("Mean of integer inputs")
            acc = cx.op("aten::div", acc, float(n))
        return acc
    return convert


def clip(cx: NodeContext):
    cx.require_dtype(0, NUMERIC)
    x = cx.x(0)
    lo_c, hi_c = (cx.const(i) if cx.has(i) else None for i in (1, 2))
    dynamic = (cx.has(1) and lo_c is None) or (cx.has(2) and hi_c is None)
    if dynamic:
        lo = cx.x(1) if cx.has(1) else None
        hi = cx.x(2) if cx.has(2) else None
        return cx.op("aten::clamp", x, lo, hi)
    lo = scalar_arg(cx, 1, "min") if cx.has(1) else None
    hi = scalar_arg(cx, 2, "max") if cx.has(2) else None
    if lo is None and hi is None:
        return cx.op("aten::clone", x, None)
    return cx.op("aten::clamp", x, lo, hi)


def leaky_relu(cx: NodeContext):
    return cx.op("aten::leaky_relu", cx.x(0), float(cx.attr("alpha", 0.01)))


def elu(cx: NodeContext):
    return cx.op("aten::elu", cx.x(0), float(cx.attr("alpha", 1.0)), 1, 1)


def selu(cx: NodeContext):
    alpha = float(cx.attr("alpha", 1.67326319217681884765625))
    gamma = float(cx.attr("gamma", 1.05070102214813232421875))
    return cx.op("aten::elu", cx.x(0), alpha, gamma, 1)


def celu(cx: NodeContext):
    return cx.op("aten::celu", cx.x(0), float(cx.attr("alpha", 1.0)))


def hard_sigmoid(cx: NodeContext):
    alpha, beta = float(cx.attr("alpha", 0.2)), float(cx.attr("beta", 0.5))
    y = cx.op("aten::add", cx.op("aten::mul", cx.x(0), alpha), beta, 1)
    return cx.op("aten::clamp", y, 0.0, 1.0)


def softplus(cx: NodeContext):
    return cx.op("aten::softplus", cx.x(0), 1, 20)


def softsign(cx: NodeContext):
    x = cx.x(0)
    return cx.op("aten::div", x, cx.op("aten::add", cx.op("aten::abs", x), 1.0, 1))


def gelu(cx: NodeContext):
    approx = cx.attr("approximate", "none")
    if approx not in ("none", "tanh"):
        raise Unsupported(f"approximate={approx!r}")
    return cx.op("aten::gelu", cx.x(0), approx)


def thresholded_relu(cx: NodeContext):
    return cx.op("aten::threshold", cx.x(0), float(cx.attr("alpha", 1.0)), 0)


def shrink(cx: NodeContext):
    bias, lambd = float(cx.attr("bias", 0.0)), float(cx.attr("lambd", 0.5))
    x = cx.x(0)
    if cx.dtype(0) in INTS:  # ONNX computes in the input's type; keep the constants exact
        bias, lambd = _exact_int(bias), _exact_int(lambd)
    low = cx.op("aten::where", cx.op("aten::lt", x, -lambd), cx.op("aten::add", x, bias, 1), 0)
    return cx.op("aten::where", cx.op("aten::gt", x, lambd), cx.op("aten::sub", x, bias, 1), low)


def _exact_int(v: float):
    if v != int(v):
        raise Unsupported("non-integral bias/lambd on an integer input")
    return int(v)


def prelu(cx: NodeContext):
    x, slope = cx.x(0), cx.x(1)
    xs, ss = cx.shape(0), cx.shape(1)
    if xs is not None and ss is not None and len(ss) == 1 and isinstance(ss[0], int) and not _broadcasts(ss, xs):
        # a slope per channel from before PRelu-7 (numpy broadcasting came later): put it on the one
        # dim of its size, as onnx's reference does
        where = [i for i, d in enumerate(xs) if d == ss[0]]
        if len(where) != 1:
            raise Unsupported(f"slope of shape {list(ss)} does not broadcast to {list(xs)}")
        shape = [1] * len(xs)
        shape[where[0]] = ss[0]
        slope = cx.op("aten::reshape", slope, shape)
    return cx.op("aten::where", cx.op("aten::lt", x, 0), cx.op("aten::mul", x, slope), x)


def _broadcasts(small, big) -> bool:
    """Whether ``small`` broadcasts unidirectionally to ``big`` (unknown dims count as fitting)."""
    if len(small) > len(big):
        return False
    return all(not (isinstance(a, int) and isinstance(b, int)) or a in (1, b) for a, b in zip(reversed(small), reversed(big)))


def swish(cx: NodeContext):
    alpha = float(cx.attr("alpha", 1.0))
    x = cx.x(0)
    if alpha == 1.0:
        return cx.op("aten::silu", x)
    return cx.op("aten::mul", x, cx.op("aten::sigmoid", cx.op("aten::mul", x, alpha)))


def is_inf(cx: NodeContext):
    neg, pos = cx.attr("detect_negative", 1), cx.attr("detect_positive", 1)
    cx.require_dtype(0, FLOATS)
    x = cx.x(0)
    if neg and pos:
        return cx.op("aten::isinf", x)
    if pos:
        return cx.op("aten::eq", x, float("inf"))
    if neg:
        return cx.op("aten::eq", x, float("-inf"))
    return cx.op("aten::full_like", x, False, 11, None, None, None, None, None)


_MIRROR = {"aten::lt": "aten::gt", "aten::gt": "aten::lt", "aten::le": "aten::ge", "aten::ge": "aten::le"}


def compare(kind: str):
    def convert(cx: NodeContext):
        _same_dtype(cx)
        return _binary(cx, kind, kind == "aten::eq", _MIRROR.get(kind))
    return convert


def logical(kind: str, n: int = 2):
    def convert(cx: NodeContext):
        for i in range(n):
            cx.require_dtype(i, {"bool"})
        return cx.op(kind, *(cx.x(i) for i in range(n)))
    return convert


def bitwise(kind: str, n: int = 2):
    def convert(cx: NodeContext):
        for i in range(n):
            cx.require_dtype(i, INTS | {"bool"})
        if n == 2:
            _same_dtype(cx)
        return cx.op(kind, *(cx.x(i) for i in range(n)))
    return convert


def where(cx: NodeContext):
    cx.require_dtype(0, {"bool"})
    if cx.dtype(1) != cx.dtype(2) or cx.dtype(1) is None:
        raise Unsupported(f"X and Y of dtypes {cx.dtype(1)} and {cx.dtype(2)}")
    return cx.op("aten::where", cx.x(0), cx.x(1), cx.x(2))


def bit_shift(cx: NodeContext):
    """BitShift: srcore's shifts give ONNX's results for amounts below 0 or past the width too (0, or
    the sign fill of a right shift), as torch's do."""
    direction = cx.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise Unsupported(f"direction={direction!r}")
    dt = cx.require_dtype(0, INTS)
    if cx.dtype(1) != dt:
        raise Unsupported(f"X and Y of dtypes {dt} and {cx.dtype(1)}")
    return cx.op(f"aten::bitwise_{direction.lower()}_shift", cx.x(0), cx.x(1))


def cast_(cx: NodeContext):
    from ..dtypes import dtype_of

    to = dtype_of(cx.attr("to"))
    saturate = bool(cx.attr("saturate", 1))
    cx.attr("round_mode", "up")   # Cast-24+: only for float8e8m0/float4 targets, which srcore lacks
    return _cast_to(cx, to, saturate)


def cast_like(cx: NodeContext):
    saturate = bool(cx.attr("saturate", 1))
    cx.attr("round_mode", "up")
    to = cx.dtype(1)
    if to is None:
        raise Unsupported("the dtype of target_type is unknown")
    return _cast_to(cx, to, saturate)


def bit_cast(cx: NodeContext):
    """BitCast-26: the same bits read as another dtype of the same width (``aten::view.dtype``)."""
    from ..dtypes import dtype_of, np_dtype

    to, src = dtype_of(cx.attr("to")), cx.dtype(0)
    if src is None:
        raise Unsupported("the dtype of the input is unknown")
    if src in INT4 or to in INT4:
        raise Unsupported(f"bit cast from {src} to {to} (srcore stores 4-bit types one per byte)")
    if np_dtype(src).itemsize != np_dtype(to).itemsize:
        raise Unsupported(f"bit cast from {src} to {to}: their widths differ (ONNX requires the same width)")
    if to == src:
        return cx.x(0)
    return cx.op("aten::view", cx.x(0), scalar_type(to))


def _cast_to(cx: NodeContext, to: str, saturate: bool = True):
    """ONNX Cast: numpy's (ml_dtypes') conversion, after ONNX's rules for the narrow types: to float8
    with ``saturate``, out-of-range values and infinities become the largest finite value; to int4/uint4,
    floats truncate toward zero and values out of range wrap around (ml_dtypes' conversion)."""
    v = cx.val(0)
    src = cx.dtype(0)
    if src is None:
        raise Unsupported("the dtype of the input is unknown")
    if src not in NUMERIC | FLOAT8 | INT4 | {"bool"}:
        raise Unsupported(f"cast from {src}")
    if v.ints is not None and to in ("int64", "int32"):  # a shape value stays one
        return attrs.evolve(v, type=v.type.with_dtype(to), tensor=None)
    x = cx.x(0)
    if to == src:
        return cast(cx, x, to)
    if to in FLOAT8 and saturate and src in FLOATS | FLOAT8:
        return saturate_float8(cx, cast(cx, x, "float32") if src in FLOAT8 else x, to)
    return cast(cx, x, to)


def _unaries() -> dict:
    f = FLOATS
    spec = {
        # name: (aten op, versions, dtypes)
        "Abs": ("aten::abs", (13,), NUMERIC), "Neg": ("aten::neg", (13,), NUMERIC - UNSIGNED),
        "Exp": ("aten::exp", (13,), f), "Log": ("aten::log", (13,), f), "Sqrt": ("aten::sqrt", (13,), f),
        "Reciprocal": ("aten::reciprocal", (13,), f), "Floor": ("aten::floor", (13,), f),
        "Ceil": ("aten::ceil", (13,), f), "Round": ("aten::round", (11, 22), f),
        "Sign": ("aten::sign", (13,), NUMERIC), "Erf": ("aten::erf", (13,), f),
        "Sigmoid": ("aten::sigmoid", (13,), f), "Tanh": ("aten::tanh", (13,), f),
        "Relu": ("aten::relu", (13, 14), NUMERIC - UNSIGNED),
        "Sin": ("aten::sin", (7, 22), f), "Cos": ("aten::cos", (7, 22), f), "Tan": ("aten::tan", (7, 22), f),
        "Asin": ("aten::asin", (7, 22), f), "Acos": ("aten::acos", (7, 22), f),
        "Atan": ("aten::atan", (7, 22), f), "Sinh": ("aten::sinh", (9, 22), f),
        "Cosh": ("aten::cosh", (9, 22), f), "Asinh": ("aten::asinh", (9, 22), f),
        "Acosh": ("aten::acosh", (9, 22), f), "Atanh": ("aten::atanh", (9, 22), f),
        "IsNaN": ("aten::isnan", (13, 20), f), "Mish": ("aten::mish", (18, 22), f),
        "HardSwish": ("aten::hardswish", (14, 22), f),
    }
    return {name: (unary(kind, dtypes), *versions) for name, (kind, versions, dtypes) in spec.items()}


CONVERTERS = table(
    **_unaries(),
    Add=(add, 13, 14), Sub=(sub, 13, 14), Mul=(mul, 13, 14), Div=(div, 13, 14), Mod=(mod, 13, 28),
    Pow=(pow_, 13, 15),
    Max=(variadic("aten::maximum"), 13), Min=(variadic("aten::minimum"), 13),
    Sum=(variadic("aten::add"), 13), Mean=(variadic("aten::add", mean=True), 13),
    Clip=(clip, 13),
    LeakyRelu=(leaky_relu, 6, 16), Elu=(elu, 6, 22), Selu=(selu, 6, 22), Celu=(celu, 12, 28),
    HardSigmoid=(hard_sigmoid, 6, 22), Softplus=(softplus, 1, 22), Softsign=(softsign, 1, 22),
    Gelu=(gelu, 20), ThresholdedRelu=(thresholded_relu, 10, 22), Shrink=(shrink, 9), PRelu=(prelu, 9, 16),
    Swish=(swish, 24), IsInf=(is_inf, 10, 20),
    Equal=(compare("aten::eq"), 13, 19), Less=(compare("aten::lt"), 13),
    LessOrEqual=(compare("aten::le"), 12, 16), Greater=(compare("aten::gt"), 13),
    GreaterOrEqual=(compare("aten::ge"), 12, 16),
    And=(logical("aten::logical_and"), 7), Or=(logical("aten::logical_or"), 7),
    Xor=(logical("aten::logical_xor"), 7), Not=(logical("aten::logical_not", 1), 1),
    BitwiseAnd=(bitwise("aten::bitwise_and"), 18), BitwiseOr=(bitwise("aten::bitwise_or"), 18),
    BitwiseXor=(bitwise("aten::bitwise_xor"), 18), BitwiseNot=(bitwise("aten::bitwise_not", 1), 18),
    BitShift=(bit_shift, 11, 28),
    Where=(where, 9, 16), Cast=(cast_, 13, 19, 21, 23, 24, 25, 28), BitCast=(bit_cast, 26), CastLike=(cast_like, 15, 19, 21, 23, 24, 25),
)
