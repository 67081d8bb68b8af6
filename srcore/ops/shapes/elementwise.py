"""Elementwise ops: broadcasting and torch's type promotion.

Tables of op names share one rule each: unary ops that keep the dtype, unary
ops that make integers floating (``exp``), predicates (``isnan``), binary
ops that promote (``add``), comparisons and logical ops (-> bool), true
division (integers -> float32), ternary ops (``where``, ``lerp``).
"""
from __future__ import annotations

import math

from ...ir.quant import is_quantized
from ...ir.types import BoolType, FloatType, IntType, ListType, NumberType, TensorType
from . import symbolic as sym
from .base import alias, A, Ctx, UNKNOWN, rule, tt
from .dtypes import DEFAULT_FLOAT, is_integral, result_type


def broadcast_dim(a, b, fail):
    if a == b:
        return a
    if a == 1:
        return b
    if b == 1:
        return a
    if isinstance(a, int) and isinstance(b, int):
        raise fail(f"cannot broadcast dimension {a} with {b}")
    if sym.equal(a, b):
        return a
    # an unknown/symbolic dim against a fixed one (> 1) must be 1 or equal: the result is the fixed one
    if isinstance(a, int) and a != 1 and b is not None:
        return a
    if isinstance(b, int) and b != 1 and a is not None:
        return b
    if isinstance(a, int) and a != 1:
        return a
    if isinstance(b, int) and b != 1:
        return b
    return None


def broadcast_shapes(shapes, fail):
    """The broadcast of several shapes (None if any rank is unknown)."""
    out: list = []
    for s in shapes:
        if s is None:
            return None
        s = list(s)
        if len(s) > len(out):
            out = [1] * (len(s) - len(out)) + out
        off = len(out) - len(s)
        for i, d in enumerate(s):
            out[off + i] = broadcast_dim(out[off + i], d, fail)
    return tuple(out)


def _scalar_kind(a: A, anchor_float: bool) -> str | None:
    k = a.known
    if isinstance(k, bool) or isinstance(a.type, BoolType):
        return "bool"
    if isinstance(k, int) or (k is UNKNOWN and isinstance(a.type, IntType)):
        return "int"
    if isinstance(k, float) or (k is UNKNOWN and isinstance(a.type, FloatType)):
        return "float"
    if isinstance(k, complex):
        return "complex"
    return "int" if anchor_float else None  # an unknown Scalar cannot change a floating result


def promote(operands: list[A]) -> str | None:
    """``torch.result_type`` of tensor and scalar operands (None entries are skipped)."""
    dims, zeros, wrapped_args = [], [], []
    for a in operands:
        if a is None or a.type is None:
            continue
        t = a.type
        if isinstance(t, TensorType):
            (zeros if t.shape == () else dims).append(t.dtype)
        elif isinstance(t, (IntType, FloatType, BoolType, NumberType)):
            wrapped_args.append(a)
    anchor = next((d for d in dims + zeros if d is not None), None)
    anchor_float = anchor is not None and not is_integral(anchor) and anchor != "bool"
    wrapped = []
    for a in wrapped_args:
        kind = _scalar_kind(a, anchor_float)
        if kind is None:
            return None
        wrapped.append({"bool": "bool", "int": "int64", "float": DEFAULT_FLOAT,
                        "complex": "complex64"}[kind])
    return result_type(dims, zeros, wrapped)


def tensor_shapes(ctx: Ctx, positions) -> list:
    return [ctx.args[i].type.shape for i in positions
            if i < len(ctx.args) and isinstance(ctx.args[i].type, TensorType)]


def _float_of(dtype):
    return DEFAULT_FLOAT if is_integral(dtype) else dtype


# -- unary -----------------------------------------------------------------------------
UNARY_SAME = """abs neg negative relu relu6 clone contiguous detach dropout feature_dropout alpha_dropout
hardtanh leaky_relu elu selu celu gelu silu hardswish hardsigmoid mish softplus softshrink hardshrink
sign sgn floor ceil round trunc frac bitwise_not positive nan_to_num prelu rrelu threshold
fill zero lift_fresh lift_fresh_copy alias clamp_min_ clamp_max_ nan_to_num_""".split()
UNARY_FLOAT = """sigmoid tanh exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh cosh
asinh acosh atanh erf erfc erfinv reciprocal digamma lgamma i0 sinc tanhshrink logit""".split()
UNARY_BOOL = "isnan isinf isfinite isneginf isposinf signbit logical_not".split()


@rule(*[f"aten::{n}" for n in UNARY_SAME], "prim::data", *[f"aten::{n}_" for n in UNARY_SAME + UNARY_FLOAT],
      "aten::clamp_", "aten::masked_fill_", "aten::copy_", "aten::fill_", "aten::zero_")
def unary_same(ctx: Ctx):
    """The output is the first argument's type (activations, in-place ops, dropout, clone)."""
    if ctx.args and not ctx.is_tensor(0):  # ceil.int, abs.float, round.Scalar ...
        return _scalar_unary(ctx)
    if "dropout" in ctx.op:   # torch's check, also in eval mode (where the kernels return the input)
        p = ctx.known(1, "p", None)
        if isinstance(p, (int, float)) and not 0 <= p <= 1:
            raise ctx.fail(f"dropout probability has to be between 0 and 1, but got {p}")
    t = ctx.tensor(0)
    dtype = t.dtype
    if ctx.op.split(".")[0] == "aten::abs" and dtype in _COMPLEX_REAL:
        dtype = _COMPLEX_REAL[dtype]   # |z| of a complex tensor is real (an STFT magnitude)
    return [tt(dtype, t.shape)] * max(1, len(ctx.node.outputs))


_COMPLEX_REAL = {"complex64": "float32", "complex128": "float64"}


@rule("aten::copy")
def copy(ctx: Ctx):
    """Out-of-place ``copy(self, src)``: ``self``'s type, ``src`` must broadcast to ``self``'s shape;
    ``copy.Dict_*`` (and ``copy.t``, see scalar.py): a shallow copy of the container."""
    if not ctx.is_tensor(0):
        a = ctx.args[0]
        return [A(a.type, a.known, a.elems)]
    x, src = ctx.tensor(0), ctx.tensor(1)
    if x.shape is not None and src.shape is not None:
        b = broadcast_shapes([x.shape, src.shape], ctx.fail)
        if len(b) != len(x.shape) or any(isinstance(p, int) and isinstance(q, int) and p != q
                                          for p, q in zip(b, x.shape)):
            raise ctx.fail(f"src of shape {list(src.shape)} does not broadcast to self's shape {list(x.shape)}")
    return [tt(x.dtype, x.shape)]


_SCALAR_UNARY = {"abs": abs, "neg": lambda x: -x, "ceil": math.ceil, "floor": math.floor, "round": round}


def _scalar_unary(ctx: Ctx):
    out = ctx.node.outputs[0].type if ctx.node.outputs else None
    fn = _SCALAR_UNARY.get(ctx.op.split("::")[1].split(".")[0])
    x = ctx.args[0].known
    if fn is None or x is UNKNOWN or isinstance(x, (str, bool)) or not isinstance(x, (int, float)):
        return [A(out)]
    try:
        return [A(out, fn(x))]
    except (ArithmeticError, ValueError):
        return [A(out)]


@rule(*[f"aten::{n}" for n in UNARY_FLOAT])
def unary_float(ctx: Ctx):
    if ctx.args and not ctx.is_tensor(0):
        return [A(ctx.node.outputs[0].type)]
    t = ctx.tensor(0)
    return [tt(_float_of(t.dtype), t.shape)]


@rule(*[f"aten::{n}" for n in UNARY_BOOL])
def unary_bool(ctx: Ctx):
    return [tt("bool", ctx.tensor(0).shape)]


# -- binary ----------------------------------------------------------------------------
BINARY = """add sub subtract mul multiply floor_divide remainder fmod pow maximum minimum fmax fmin
bitwise_and bitwise_or bitwise_xor bitwise_left_shift bitwise_right_shift __and__ __or__ __xor__
__lshift__ __rshift__ rsub heaviside""".split()
COMPARE = "eq ne lt le gt ge equal_ logical_and logical_or logical_xor greater less greater_equal less_equal not_equal".split()


def _binary_shape(ctx: Ctx, positions=(0, 1)):
    return broadcast_shapes(tensor_shapes(ctx, positions), ctx.fail)


@rule(*[f"aten::{n}" for n in BINARY], "srcore::add_relu")
def binary(ctx: Ctx):
    """Broadcast the first two operands; promote their dtypes (alpha does not take part)."""
    if not any(ctx.is_tensor(i) for i in (0, 1)):
        from .scalar import scalar_binary
        return scalar_binary(ctx)
    _no_bool_subtraction(ctx)
    return [tt(promote(ctx.args[:2]), _binary_shape(ctx))]


_SUBTRACTIONS = {"sub", "subtract", "rsub"}


def _no_bool_subtraction(ctx: Ctx) -> None:
    """torch refuses subtraction with a bool tensor or a bool scalar (x - True): so does srcore,
    instead of computing x - 1."""
    if ctx.op.split("::")[1].split(".")[0].rstrip("_") not in _SUBTRACTIONS:
        return
    for a in ctx.args[:2]:
        t = a.type
        if (isinstance(t, TensorType) and t.dtype == "bool") or isinstance(t, BoolType) or isinstance(a.known, bool):
            raise ctx.fail("subtraction with a bool operand is not supported (torch refuses it too); "
                           "use logical_xor or bitwise_not instead")


@rule(*[f"aten::{n}_" for n in BINARY + COMPARE + ["div", "true_divide", "atan2", "lerp", "addcmul",
                                                    "addcdiv", "where", "masked_fill", "clamp"]])
def inplace_binary(ctx: Ctx):
    """In-place ops keep self's type; the other operand must broadcast to self."""
    _no_bool_subtraction(ctx)
    t = ctx.tensor(0)
    shape = _binary_shape(ctx)
    if shape is not None and t.shape is not None and len(shape) != len(t.shape):
        raise ctx.fail(f"in-place result shape {shape} differs from self {t.shape}")
    return [t]


@rule(*[f"aten::{n}" for n in COMPARE])
def compare(ctx: Ctx):
    if not any(ctx.is_tensor(i) for i in (0, 1)):
        from .scalar import scalar_binary
        return scalar_binary(ctx)
    return [tt("bool", _binary_shape(ctx))]


FLOAT_BINARY = ("aten::atan2", "aten::arctan2", "aten::copysign", "aten::xlogy", "aten::hypot")


@rule("aten::div", "aten::true_divide", "aten::divide", *FLOAT_BINARY)
def div(ctx: Ctx):
    """True division makes integers floating; ``rounding_mode`` 'trunc'/'floor' keeps them."""
    if not any(ctx.is_tensor(i) for i in (0, 1)):
        from .scalar import scalar_binary
        return scalar_binary(ctx)
    dtype = promote(ctx.args[:2])
    mode = ctx.known(2, "rounding_mode", default=None)
    if mode is UNKNOWN:
        dtype = None if is_integral(dtype) else dtype
    elif mode is None or ctx.op.startswith(FLOAT_BINARY):
        dtype = _float_of(dtype)
    return [tt(dtype, _binary_shape(ctx))]


@rule("aten::where")
def where(ctx: Ctx):
    if len(ctx.args) == 1:  # where(condition) -> a list of int64 index tensors, one per dim of condition
        return [_where_indices(ctx.tensor(0))]
    shape = broadcast_shapes(tensor_shapes(ctx, (0, 1, 2)), ctx.fail)
    return [tt(promote(ctx.args[1:3]), shape)]


def _where_indices(cond):
    """``Tensor[]`` of 1-D int64 tensors of a length known only at run time; with the condition's rank
    known, its elements too (``tok, slot = torch.where(m)`` unpacks typed tensors: kernels need no
    dtype check per call and later nodes know their ranks)."""
    elem = tt("int64", (None,))
    if cond.shape is None:
        return ListType(elem)
    return A(ListType(elem), UNKNOWN, [A(elem) for _ in cond.shape])


@rule("aten::masked_fill")
def masked_fill(ctx: Ctx):
    """Out of place, torch expands ``self`` and the mask against each other: a mask of higher rank
    or larger dims gives a larger result (``x (3, 6)`` with a ``(1, 3, 6)`` mask: ``(1, 3, 6)``)."""
    return [tt(ctx.tensor(0).dtype, _binary_shape(ctx))]


@rule("aten::lerp", "aten::addcmul", "aten::addcdiv")
def ternary(ctx: Ctx):
    shape = broadcast_shapes(tensor_shapes(ctx, (0, 1, 2)), ctx.fail)
    dtype = promote(ctx.args[:3])
    if ctx.op.startswith("aten::addcdiv"):
        dtype = _float_of(dtype)
    return [tt(dtype, shape)]


@rule("aten::clamp", "aten::clip", "aten::clamp_min", "aten::clamp_max")
def clamp(ctx: Ctx):
    """A quantized ``self`` stays quantized (torch clamps its values and keeps its parameters: the
    bounds are Scalars); otherwise the bounds take part in type promotion."""
    shape = broadcast_shapes(tensor_shapes(ctx, range(len(ctx.args))), ctx.fail)
    self_type = ctx.args[0].type
    if isinstance(self_type, TensorType) and is_quantized(self_type.dtype):
        return [tt(self_type.dtype, shape)]
    ops = [a for a in ctx.args[:3] if a.known is not None]
    return [tt(promote(ops), shape)]


@rule("aten::square")
def square(ctx: Ctx):
    """``pow(x, 2)``: bool is promoted with the int exponent."""
    t = ctx.tensor(0)
    return [tt("int64" if t.dtype == "bool" else t.dtype, t.shape)]


@rule("aten::type_as", "aten::expand_as_dtype")
def type_as(ctx: Ctx):
    return [tt(ctx.tensor(1).dtype, ctx.tensor(0).shape)]




# same-shape ops declared later than the tables above
alias("aten::relu", "aten::feature_alpha_dropout", "aten::log_sigmoid", "aten::logical_not_", "aten::square_",
      "aten::tril_", "aten::triu_")
