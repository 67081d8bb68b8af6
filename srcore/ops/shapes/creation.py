"""Tensor creation (arange/zeros/ones/full/empty/rand, ``*_like``, ``new_*``) and dtype casts (``to``)."""
from __future__ import annotations

import math

from ...ir.types import BoolType, FloatType, IntType, ListType, TensorType
from .base import A, Ctx, UNKNOWN, as_dims, dtype_code, rule, tt
from .dtypes import DEFAULT_FLOAT


def _dtype(ctx: Ctx, pos: int | None, default):
    """The ``dtype=`` argument (by name when the schema is known): None -> ``default``."""
    if ctx.names is not None:
        if "dtype" not in ctx.names:
            return default
        code = ctx.known(0, "dtype")
    else:
        code = ctx.known(pos) if pos is not None and pos < len(ctx.args) else None
    if code is UNKNOWN:
        return None
    if code is None:
        return default
    return dtype_code(code)


def _scalar_dtype(a: A | None):
    if a is None:
        return None
    k = a.known
    if isinstance(k, bool) or (k is UNKNOWN and isinstance(a.type, BoolType)):
        return "bool"
    if isinstance(k, int) or (k is UNKNOWN and isinstance(a.type, IntType)):
        return "int64"
    if isinstance(k, float) or (k is UNKNOWN and isinstance(a.type, FloatType)):
        return DEFAULT_FLOAT
    if isinstance(a.type, TensorType):
        return a.type.dtype
    return None


@rule("aten::zeros", "aten::ones", "aten::empty", "aten::rand", "aten::randn", "aten::new_empty_strided_",
      "aten::empty_strided")
def zeros(ctx: Ctx):
    """``zeros(size, dtype, layout, device, pin_memory)`` (names overload: size, names, dtype...)."""
    size = ctx.int_list(0, "size")
    pos = 1 if len(ctx.args) <= 5 else 2
    if ctx.op.startswith("aten::empty_strided"):
        pos = 2
    return [tt(_dtype(ctx, pos, DEFAULT_FLOAT), size)]


@rule("aten::full")
def full(ctx: Ctx):
    size = ctx.int_list(0, "size")
    fill = ctx.arg(1, "fill_value")
    return [tt(_dtype(ctx, 2, _scalar_dtype(fill)), size)]


@rule("aten::zeros_like", "aten::ones_like", "aten::empty_like", "aten::rand_like", "aten::randn_like",
      "aten::full_like", "aten::randint_like")
def like(ctx: Ctx):
    x = ctx.tensor(0)
    pos = 2 if ctx.op.startswith(("aten::full_like", "aten::randint_like")) else 1
    return [tt(_dtype(ctx, pos, x.dtype), x.shape)]


@rule("aten::new_zeros", "aten::new_ones", "aten::new_empty", "aten::new_full")
def new_(ctx: Ctx):
    x = ctx.tensor(0)
    pos = 3 if ctx.op.startswith("aten::new_full") else 2
    return [tt(_dtype(ctx, pos, x.dtype), ctx.int_list(1, "size"))]


@rule("aten::arange")
def arange(ctx: Ctx):
    """arange(end, ...), arange(start, end, ...), arange(start, end, step, ...): 4 trailing options."""
    if ctx.names is not None:
        nums = [ctx.arg(0, n) for n in ("start", "end", "step") if n in ctx.names]
        dpos = None
    else:
        n_num = max(1, len(ctx.args) - 4)
        nums = ctx.args[:n_num]
        dpos = n_num
    if len(nums) == 1:
        start, end, step = A(IntType(), 0), nums[0], A(IntType(), 1)
    elif len(nums) == 2:
        start, end, step = nums[0], nums[1], A(IntType(), 1)
    else:
        start, end, step = nums[:3]
    kinds = [_scalar_dtype(a) for a in (start, end, step)]
    default = None if None in kinds else ("int64" if all(k in ("int64", "bool") for k in kinds)
                                          else DEFAULT_FLOAT)
    dtype = _dtype(ctx, dpos, default)
    vals = [a.known for a in (start, end, step)]
    n = None
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        if vals[2] == 0:
            raise ctx.fail("arange step must be nonzero")
        n = max(0, math.ceil((vals[1] - vals[0]) / vals[2]))
    elif vals[0] == 0 and vals[2] == 1 and isinstance(vals[1], str):
        n = vals[1]  # arange(batch)
    return [tt(dtype, (n,))]


@rule("aten::linspace", "aten::logspace")
def linspace(ctx: Ctx):
    steps = ctx.known(2, "steps")
    return [tt(_dtype(ctx, 3 if ctx.op.startswith("aten::linspace") else 4, DEFAULT_FLOAT),
               (steps if isinstance(steps, int) else None,))]


@rule("aten::eye")
def eye(ctx: Ctx):
    n = ctx.known(0, "n")
    has_m = (ctx.names is not None and "m" in ctx.names) or (ctx.names is None and len(ctx.args) == 6)
    m = ctx.known(1, "m") if has_m else n
    d = lambda v: v if isinstance(v, (int, str)) and not isinstance(v, bool) else None  # noqa: E731
    return [tt(_dtype(ctx, 2 if has_m else 1, DEFAULT_FLOAT), (d(n), d(m)))]


def _nested_shape(v):
    if isinstance(v, (list, tuple)):
        if not v:
            return (0,)
        inner = _nested_shape(v[0])
        return None if inner is None else (len(v),) + inner
    return ()


def _nested_dtype(v):
    while isinstance(v, (list, tuple)) and v:
        v = v[0]
    return {bool: "bool", int: "int64", float: DEFAULT_FLOAT}.get(type(v))


@rule("aten::tensor")
def tensor(ctx: Ctx):
    data = ctx.arg(0, "data")
    v = data.known if data is not None else UNKNOWN
    if v is UNKNOWN:
        shape = (len(data.elems),) if data is not None and data.elems is not None else None
        return [tt(_dtype(ctx, 1, _scalar_dtype(data.elems[0]) if shape and shape[0] else None), shape)]
    return [tt(_dtype(ctx, 1, _nested_dtype(v)), _nested_shape(v))]


@rule("aten::to", "aten::_to_copy", "aten::type")
def to(ctx: Ctx):
    """Overloads: to.dtype(self, dtype, ...), to.device(self, device, dtype, ...), to.other(self, other, ...),
    to.prim_Device(self, device?, dtype?, ...), to.prim_dtype(self, dtype?, ...), to.dtype_layout(self, *, dtype, ...).
    """
    x = ctx.tensor(0)
    if ctx.is_tensor(1):
        return [tt(ctx.tensor(1).dtype, x.shape)]
    if ctx.names is not None:
        if "dtype" not in ctx.names:
            return [x]
        code = ctx.known(0, "dtype")
    else:
        code = None
        # the first argument after self that is a ScalarType code (int, not bool) or unknown int
        from ...ir.types import DeviceType, StrType
        for a in ctx.args[1:3]:
            if isinstance(a.type, (DeviceType, StrType)) or isinstance(a.known, str):
                continue
            if isinstance(a.known, bool):
                break
            code = a.known
            break
    if code is UNKNOWN:
        return [tt(None, x.shape)]
    return [tt(x.dtype if code is None else dtype_code(code), x.shape)]


@rule("aten::bernoulli", "aten::normal_same")
def same(ctx: Ctx):
    return [ctx.tensor(0)]
