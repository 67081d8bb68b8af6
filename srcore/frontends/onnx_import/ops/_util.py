"""Helpers shared by the op converters: axes, casts, int items, static dims."""
from __future__ import annotations

from typing import Any, Sequence

import attrs

from ....ir.graph import Value
from ....ir.types import TensorType
from ..context import NodeContext, Unsupported
from ..dtypes import scalar_type
from ..values import Val

#: torch's ``aten::to.dtype`` trailing arguments: non_blocking, copy, memory_format
_TO_REST = (False, False, None)


@attrs.frozen
class OpConverter:
    """One table entry: the converter and the op's schema versions (``since_version``) it knows."""

    fn: Any
    versions: tuple[int, ...]


def table(**entries: tuple) -> dict[str, OpConverter]:
    """``table(Relu=(relu, 13, 14))`` -> ``{"Relu": OpConverter(relu, (13, 14))}``."""
    return {name: OpConverter(e[0], tuple(e[1:])) for name, e in entries.items()}


def norm_axis(axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1):
        raise Unsupported(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def cast(cx: NodeContext, x: Value, dtype: str) -> Value:
    """``aten::to(x, dtype)`` (a copy only when the dtype changes)."""
    return cx.op("aten::to", x, scalar_type(dtype), *_TO_REST)


#: the largest finite value of each float8 type (ml_dtypes' finfo)
FLOAT8_MAX = {"float8_e4m3fn": 448.0, "float8_e4m3fnuz": 240.0, "float8_e5m2": 57344.0, "float8_e5m2fnuz": 57344.0}


def saturate_float8(cx: NodeContext, x: Value, to: str) -> Value:
    """``x`` (a float tensor) cast to the float8 type ``to`` saturating, as ONNX's Cast and
    QuantizeLinear do by default: out-of-range values and infinities become the largest finite
    value of their sign (as onnx's reference implementation does); NaN stays NaN."""
    m = FLOAT8_MAX[to]
    return cast(cx, cx.op("aten::clamp", x, -m, m), to)


def dim_item(cx: NodeContext, i: int, x: Value, d: int) -> Any:
    """Input ``i``'s dim ``d`` (non-negative) as an int item: static from ONNX inference, else ``aten::size``."""
    shape = cx.shape(i)
    if shape is not None and d < len(shape) and isinstance(shape[d], int):
        return shape[d]
    return cx.int_op("aten::size", x, d)


def static_dim(cx: NodeContext, i: int, d: int, what: str) -> int:
    shape = cx.shape(i)
    if shape is None or d >= len(shape) or not isinstance(shape[d], int):
        raise Unsupported(f"{what} needs input {i}'s dim {d} to be known at conversion")
    return shape[d]


def ints_val(cx: NodeContext, items: Sequence[Any], *, scalar: bool = False, dtype: str = "int64") -> Val:
    """A shape value kept as int items (see ``values.Val``)."""
    return Val("", TensorType(dtype, () if scalar else (len(items),)), ints=list(items), scalar=scalar,
               block=cx.conv.builder.block)


def int_binop(cx: NodeContext, kind: str, a: Any, b: Any) -> Any:
    """``a <op> b`` on int items (Python ints fold here); ``kind`` one of add, sub, mul, div (trunc), mod."""
    if isinstance(a, int) and isinstance(b, int):
        if kind == "add":
            return a + b
        if kind == "sub":
            return a - b
        if kind == "mul":
            return a * b
        if b == 0:
            raise Unsupported("integer division by zero in a shape computation")
        if kind == "div":
            q = abs(a) // abs(b)
            return q if (a >= 0) == (b >= 0) else -q
        if kind == "mod":
            return a % b
    if kind == "div":  # ONNX integer Div truncates toward zero: int(a / b)
        return cx.int_op("aten::Int", cx.op("aten::div", a, b, types=[_float()]))
    if kind == "mod":
        return cx.int_op("aten::remainder", a, b)
    return cx.int_op(f"aten::{kind}", a, b)


def _float():
    from ....ir.types import FLOAT

    return FLOAT


def broadcast_items(a: list, b: list) -> tuple[list, list]:
    """Two int-item lists of a rank-0/1 broadcast: a length-1 side repeats."""
    if len(a) == len(b):
        return a, b
    if len(a) == 1:
        return a * len(b), b
    if len(b) == 1:
        return a, b * len(a)
    raise Unsupported(f"shapes ({len(a)},) and ({len(b)},) do not broadcast")


def scalar_arg(cx: NodeContext, i: int, what: str) -> Any:
    """Input ``i`` (a one-element tensor) as a Scalar argument: a Python number when constant,
    else the element as an srcore number Value (``aten::item``)."""
    c = cx.const(i)
    if c is not None:
        if c.size != 1:
            raise Unsupported(f"input {i} ({what}) must hold one value, it has shape {list(c.shape)}")
        return c.reshape(-1)[0].item()
    if cx.shape(i) not in ((), (1,)):
        raise Unsupported(f"input {i} ({what}) must be a scalar (shape [] or [1])")
    from ....ir.types import NUMBER

    return cx.op("aten::item", cx.x(i), types=[NUMBER])
