"""Types of constant values (``prim::Constant[value=...]``).

Constants hold Python values: ``int``, ``float``, ``bool``, ``str``, ``None``,
lists and tuples of those, a device string (typed ``Device``), or a numpy array
(a tensor constant, printed as a named parameter: ``prim::Constant[param="fc1.weight"]``).
"""
from __future__ import annotations

from typing import Any

from .types import (BOOL, FLOAT, INT, NONE, STR, ListType, OptionalType, TensorType, TupleType, Type,
                    ANY)


def type_of_constant(value: Any) -> Type:
    """The IR type of a Python constant value."""
    if value is None:
        return NONE
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return INT
    if isinstance(value, float):
        return FLOAT
    if isinstance(value, str):
        return STR
    if isinstance(value, tuple):
        return TupleType(tuple(type_of_constant(v) for v in value))
    if isinstance(value, list):
        elems = {type_of_constant(v) for v in value}
        if len(elems) == 1:
            return ListType(elems.pop())
        if not elems:
            return ListType(INT)
        if NONE in elems and len(elems) == 2:
            (other,) = elems - {NONE}
            return ListType(OptionalType(other))
        return ListType(ANY)
    dtype = getattr(value, "dtype", None)
    shape = getattr(value, "shape", None)
    if dtype is not None and shape is not None:
        qdtype = getattr(value, "qdtype", None)   # a QuantizedArray: its quantized dtype and parameters
        if qdtype is not None:
            return TensorType(qdtype, tuple(int(d) for d in shape), value.qparams)
        return TensorType(str(dtype), tuple(int(d) for d in shape))
    raise TypeError(f"no IR type for constant {value!r} of type {type(value).__name__}")
