"""Types of constant values (``prim::Constant[value=...]``).

Constants hold Python values: ``int``, ``float``, ``bool``, ``str``, ``None``,
lists and tuples of those, a device string (typed ``Device``), or a numpy array
(a tensor constant, printed as a named parameter: ``prim::Constant[param="fc1.weight"]``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .types import (BOOL, FLOAT, INT, NONE, STR, ListType, OptionalType, TensorType, TupleType, Type,
                    ANY)

if TYPE_CHECKING:
    from .graph import Graph, Value


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


_MISSING = object()


def const_or(value: Value, default: Any = _MISSING) -> Any:
    """The constant value of ``value``, or ``default`` when it is not a known constant.

    A parameter constant parsed without its data (``param=`` and no ``value``) is not known.
    """
    if is_const(value):
        return value.node.attrs.get("value")
    if default is _MISSING:
        raise ValueError(f"%{value.name} is not a constant")
    return default


def is_const(value: Value) -> bool:
    """True for a ``prim::Constant`` whose value is known.

    Not known: a parameter parsed without its data (``param=`` only), an opaque
    tensor dump (``tensor=``), a function value (``name=``/``graph=``). A constant
    without attributes is ``None``.
    """
    n = value.node
    return n.kind == "prim::Constant" and ("value" in n.attrs or not n.attrs)


def unique_param_name(graph: "Graph", base: str) -> str:
    """``base``, or ``base.N``, so that no tensor constant of ``graph`` already uses the name."""
    taken = {n.attrs.get("param") for n in graph.all_nodes() if n.kind == "prim::Constant"}
    if base not in taken:
        return base
    i = 1
    while f"{base}.{i}" in taken:
        i += 1
    return f"{base}.{i}"
