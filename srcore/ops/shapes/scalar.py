"""Scalar ops on ints, floats and bools (``aten::add.int``, ``aten::size``, ``aten::Int``, ...).

Their results are *known values* when the operands are: ``aten::size(x, 1)``
of a known shape is an int, of a symbolic one the symbol; arithmetic on
symbols stays symbolic when it is a product (``symbolic.py``).
"""
from __future__ import annotations

import math
import operator

from ...ir.types import (BOOL, FLOAT, INT, STR, BoolType, FloatType, IntType, ListType, NumberType,
                         TensorType)
from . import symbolic as sym
from .base import alias, A, Ctx, UNKNOWN, int_value, rule, scalar_type_of

_CMP = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
        "ge": operator.ge, "greater": operator.gt, "less": operator.lt, "greater_equal": operator.ge,
        "less_equal": operator.le, "not_equal": operator.ne}
_ARITH = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "floordiv": operator.floordiv,
          "floor_divide": operator.floordiv, "remainder": operator.mod, "fmod": math.fmod,
          "pow": operator.pow, "div": operator.truediv, "true_divide": operator.truediv,
          "maximum": max, "minimum": min, "max": max, "min": min, "__and__": operator.and_,
          "__or__": operator.or_, "__xor__": operator.xor, "logical_and": lambda a, b: bool(a and b),
          "logical_or": lambda a, b: bool(a or b), "logical_xor": lambda a, b: bool(a) != bool(b),
          "__lshift__": operator.lshift, "__rshift__": operator.rshift, "atan2": math.atan2}
_SYM = {"add": sym.add, "sub": sym.sub, "mul": sym.mul, "floordiv": sym.floordiv,
        "floor_divide": sym.floordiv}


def _result_type(ctx: Ctx, a: A, b: A, opname: str):
    declared = ctx.node.outputs[0].type if ctx.node.outputs else None
    if opname in _CMP:
        return BOOL
    if opname in ("div", "true_divide", "atan2"):
        return FLOAT
    if isinstance(declared, (IntType, FloatType, BoolType)):
        return declared
    kinds = {type(x.type) for x in (a, b)}
    if FloatType in kinds or any(isinstance(x.known, float) for x in (a, b)):
        return FLOAT
    if kinds <= {BoolType} and opname.startswith(("__", "logical")):
        return BOOL
    if kinds <= {IntType, BoolType}:
        return INT
    return declared if declared is not None else NumberType()


def scalar_binary(ctx: Ctx):
    """A binary op on two scalars: compute it when both are known (symbols: products, equality)."""
    opname = ctx.op.split("::", 1)[1].split(".", 1)[0]
    a, b = ctx.args[0], ctx.args[1]
    out_t = _result_type(ctx, a, b, opname)
    x, y = a.known, b.known
    if x is UNKNOWN or y is UNKNOWN:
        return [A(out_t)]
    if isinstance(x, str) or isinstance(y, str):  # symbolic ints
        if opname in _CMP:
            eq = sym.equal(x, y)
            if eq is None or opname not in ("eq", "ne"):
                return [A(out_t)]
            return [A(BOOL, eq if opname == "eq" else not eq)]
        fn = _SYM.get(opname)
        d = fn(x, y) if fn else None
        return [A(out_t, UNKNOWN if d is None else d)]
    fn = _CMP.get(opname) or _ARITH.get(opname)
    if fn is None:
        return [A(out_t)]
    try:
        v = fn(x, y)
    except (ArithmeticError, TypeError, ValueError):
        return [A(out_t)]
    if out_t == INT and isinstance(v, float) and opname not in ("div", "true_divide"):
        v = int(v)
    elif out_t == FLOAT and isinstance(v, int) and not isinstance(v, bool):
        v = float(v)
    return [A(out_t, v)]


@rule("aten::floordiv", "aten::__and__.bool", "aten::__or__.bool", "aten::__xor__.bool")
def floordiv(ctx: Ctx):
    return scalar_binary(ctx)


@rule("aten::size")
def size(ctx: Ctx):
    """``size(x)`` -> the shape as a known list; ``size(x, d)`` -> one dim (int or symbol)."""
    t = ctx.tensor(0)
    if len(ctx.args) >= 2 and not isinstance(ctx.args[1].type, ListType):
        d = ctx.args[1].known
        if t.shape is None or d is UNKNOWN or isinstance(d, str):
            return [A(INT)]
        return [int_value(t.shape[ctx.norm_dim(d, t.rank)])]
    if t.shape is None:
        return [A(ListType(INT))]
    elems = [int_value(d) for d in t.shape]
    known = [e.known for e in elems] if all(e.is_known for e in elems) else UNKNOWN
    return [A(ListType(INT), known, elems)]


@rule("aten::sym_size")
def sym_size(ctx: Ctx):
    return size(ctx)


@rule("aten::dim")
def dim(ctx: Ctx):
    r = ctx.tensor(0).rank
    return [A(INT, UNKNOWN if r is None else r)]


@rule("aten::numel")
def numel(ctx: Ctx):
    s = ctx.tensor(0).shape
    n = None if s is None else sym.prod(s)
    return [int_value(n)]


@rule("aten::len")
def length(ctx: Ctx):
    a = ctx.args[0]
    if isinstance(a.type, TensorType):
        s = a.type.shape
        return [int_value(s[0] if s else None)]
    if a.elems is not None:
        return [A(INT, len(a.elems))]
    if isinstance(a.known, (list, tuple, str)):
        return [A(INT, len(a.known))]
    return [A(INT)]


@rule("aten::__getitem__", "aten::select.t")
def getitem(ctx: Ctx):
    a, i = ctx.args[0], ctx.args[1].known
    out_t = ctx.node.outputs[0].type
    if isinstance(a.type, ListType):
        out_t = a.type.elem
    if a.elems is not None and isinstance(i, int) and -len(a.elems) <= i < len(a.elems):
        return [a.elems[i]]
    if isinstance(a.known, (list, tuple, str, dict)) and i is not UNKNOWN:
        try:
            v = a.known[i]
        except (IndexError, KeyError, TypeError):
            return [A(out_t)]
        return [A(out_t if not isinstance(v, str) or out_t == STR else INT, v)]
    return [A(out_t)]


def _convert(ctx: Ctx, typ, fn):
    x = ctx.args[0].known if ctx.args else UNKNOWN
    if isinstance(ctx.args[0].type, TensorType) or x is UNKNOWN:
        return [A(typ)]
    if isinstance(x, str) and typ is INT:
        return [A(INT, x)]  # a symbolic int stays that symbol
    try:
        return [A(typ, fn(x))]
    except (TypeError, ValueError):
        return [A(typ)]


@rule("aten::Int", "aten::ScalarImplicit", "prim::Int")
def to_int(ctx: Ctx):
    if ctx.op.startswith("aten::ScalarImplicit"):
        return [A(ctx.node.outputs[0].type)]
    return _convert(ctx, INT, int)


@rule("aten::Float", "prim::Float")
def to_float(ctx: Ctx):
    return _convert(ctx, FLOAT, float)


@rule("aten::Bool", "prim::Bool")
def to_bool(ctx: Ctx):
    return _convert(ctx, BOOL, bool)


@rule("aten::item", "aten::_local_scalar_dense")
def item(ctx: Ctx):
    return [A(ctx.node.outputs[0].type)]


@rule("aten::__not__")
def not_(ctx: Ctx):
    x = ctx.args[0].known
    return [A(BOOL, UNKNOWN if x is UNKNOWN else (not x))]


@rule("aten::__is__", "aten::__isnot__")
def is_(ctx: Ctx):
    x, y = ctx.args[0], ctx.args[1]
    res = UNKNOWN
    none_x = x.known is None or type(x.type).__name__ == "NoneType"
    none_y = y.known is None or type(y.type).__name__ == "NoneType"
    if ctx.node.inputs[0] is ctx.node.inputs[1] or (none_x and none_y):
        res = True
    elif (none_x and isinstance(y.type, TensorType)) or (none_y and isinstance(x.type, TensorType)):
        res = False
    if res is not UNKNOWN and ctx.op.startswith("aten::__isnot__"):
        res = not res
    return [A(BOOL, res)]


def _unary_math(fn, typ):
    def r(ctx: Ctx):
        x = ctx.args[0].known
        if isinstance(ctx.args[0].type, TensorType):
            from .elementwise import unary_same
            return unary_same(ctx)
        t = typ or ctx.node.outputs[0].type
        if x is UNKNOWN or isinstance(x, str):
            return [A(t)]
        try:
            return [A(t, fn(x))]
        except (ArithmeticError, TypeError, ValueError):
            return [A(t)]
    return r


for _n, _fn, _t in (("aten::ceil.int", math.ceil, INT), ("aten::floor.int", math.floor, INT),
                    ("aten::ceil.float", math.ceil, INT), ("aten::floor.float", math.floor, INT),
                    ("aten::neg.int", operator.neg, INT), ("aten::neg.float", operator.neg, FLOAT),
                    ("aten::abs.int", abs, INT), ("aten::sqrt.int", math.sqrt, FLOAT),
                    ("aten::sqrt.float", math.sqrt, FLOAT), ("aten::round.float", round, FLOAT)):
    rule(_n)(_unary_math(_fn, _t))


@rule("prim::min", "prim::max")
def prim_minmax(ctx: Ctx):
    """min/max of two scalars, or of one list."""
    out_t = ctx.node.outputs[0].type
    fn = min if ctx.op.startswith("prim::min") else max
    vals = [a.known for a in ctx.args]
    if len(ctx.args) == 1:
        vals = ctx.args[0].known if isinstance(ctx.args[0].known, (list, tuple)) else [UNKNOWN]
    if not vals or any(v is UNKNOWN or isinstance(v, str) for v in vals):
        return [A(out_t)]
    return [A(out_t, fn(vals))]


@rule("aten::format", "aten::str", "aten::__str__")
def fmt(ctx: Ctx):
    return [A(STR)]


@rule("aten::warn")
def warn(ctx: Ctx):
    return []


@rule("aten::is_floating_point")
def is_floating_point(ctx: Ctx):
    from .dtypes import category
    d = ctx.tensor(0).dtype
    return [A(BOOL, UNKNOWN if d is None else category(d) == 2)]


@rule("aten::list", "aten::copy.t")
def list_copy(ctx: Ctx):
    """A new list: its own ``elems`` (``aten::append`` to the copy grows them in place; shared, a
    loop body's ``list(carried) + append`` grew the loop's initial list with every pass, and the
    fixpoint settled on a wrong, constant length: ONNX SequenceInsert in a Loop)."""
    a = ctx.args[0]
    return [A(a.type, a.known, None if a.elems is None else list(a.elems))]


__all__ = ["scalar_binary", "scalar_type_of"]


@rule("aten::__contains__")
def contains(ctx: Ctx):
    container, item = ctx.args[0].known, ctx.args[1].known
    if isinstance(container, (list, tuple, str, dict)) and item is not UNKNOWN and not isinstance(item, str) \
            or isinstance(container, str) and isinstance(item, str):
        return [A(BOOL, item in container)]
    return [A(BOOL)]


@rule("aten::__derive_index")
def derive_index(ctx: Ctx):
    """``__derive_index(index, start, step) = start + index * step`` (range loops)."""
    i, start, step = (a.known for a in ctx.args[:3])
    if all(isinstance(x, int) for x in (i, start, step)):
        return [A(INT, start + i * step)]
    return [A(INT)]


@rule("aten::__range_length")
def range_length(ctx: Ctx):
    lo, hi, step = (a.known for a in ctx.args[:3])
    if all(isinstance(x, int) for x in (lo, hi, step)) and step:
        return [A(INT, len(range(lo, hi, step)))]
    return [A(INT)]


@rule("aten::is_grad_enabled", "aten::is_autocast_enabled", "prim::is_nested")
def always_false(ctx: Ctx):
    return [A(BOOL, False)]


@rule("prim::abs")
def prim_abs(ctx: Ctx):
    if ctx.is_tensor(0):
        from .elementwise import unary_same
        return unary_same(ctx)
    return _unary_math(abs, None)(ctx)


@rule("prim::shape")
def prim_shape(ctx: Ctx):
    return size(Ctx(ctx.node, ctx.args[:1], None, "aten::size"))


@rule("prim::type", "aten::wait", "prim::fork", "prim::DictConstruct", "aten::items", "aten::keys", "aten::values",
      "aten::get", "aten::dict", "aten::str")
def declared_outputs(ctx: Ctx):
    """Opaque ops (and dict readers, ``str(x)``): their outputs keep their declared types."""
    return [o.type for o in ctx.node.outputs]


alias("aten::numel", "aten::sym_numel")
