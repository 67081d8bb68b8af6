"""Does an IR node match a schema? (TorchScript's ``n->matches(schema)``, scored.)

A node passes every argument positionally, in schema order (positional, then
keyword-only). :func:`match_score` returns ``None`` when the node cannot call
the schema, else a cost: 0 per argument whose type fits (including TorchScript
subtyping: ``int``/``float``/``bool`` are ``Scalar``s, anything binds a type
variable ``t``), 1 per implicit conversion (``str -> Device``, ``int -> int[2]``),
2 per argument whose IR type is unknown (``Any``), each times 256, plus 1 per
trailing argument left to its default. Overload resolution takes the cheapest
schema, ties going to declaration order: like TorchScript, which takes the
first overload in registration order that matches (``float(int)`` calls
``aten::Float.Scalar``, declared before ``aten::Float.int``), so declare
specific overloads before generic ones.

RFC-0020 backward compatibility: a node with fewer inputs than the schema
matches when every missing trailing argument has a default;
:func:`bind_defaults` gives those default values.
"""
from __future__ import annotations

from typing import Any

from ..errors import VerificationError
from ..ir import types as T
from .schema import BaseType, FunctionSchema, ListType, OptionalType, SchemaType

__all__ = ["match_score", "matches", "type_score", "bind_defaults"]

_EXACT, _CONVERT, _UNKNOWN = 0, 1, 2
_PER_TYPE_COST = 256  # one conversion outweighs any number of defaulted arguments

# schema base type name -> IR types it accepts exactly / by implicit conversion
_INT_LIKE = (T.IntType,)
_EXACT_BASE: dict[str, tuple[type, ...]] = {
    "Tensor": (T.TensorType,),
    "int": _INT_LIKE, "SymInt": _INT_LIKE,
    "float": (T.FloatType,),
    "bool": (T.BoolType,),
    "str": (T.StrType,),
    "Scalar": (T.NumberType,),
    "number": (T.NumberType,),
    "Device": (T.DeviceType,),
    "Generator": (T.GeneratorType,),
    "NoneType": (T.NoneType,),
    # TorchScript carries these enums as ints; srcore's IR may also name them
    "ScalarType": (T.ScalarTypeType, T.IntType),
    "Layout": (T.LayoutType, T.IntType),
    "MemoryFormat": (T.MemoryFormatType, T.IntType),
}
#: implicit conversions (cost 1); `Scalar <- int/float/bool` is subtyping in TorchScript (free)
_SUBTYPE_BASE: dict[str, tuple[type, ...]] = {
    "Scalar": (T.IntType, T.FloatType, T.BoolType),
    "number": (T.IntType, T.FloatType, T.BoolType),
}
_CONVERT_BASE: dict[str, tuple[type, ...]] = {
    "Device": (T.StrType,),
}
#: opaque runtime objects that srcore's IR only carries as Any
_OPAQUE = {"Any", "Dimname", "Storage", "Stream", "QScheme"}  # not AnyEnumType: no enums in the IR


def _is_typevar(name: str) -> bool:
    # TorchScript's type variables: t, tVal, t1, t2, ...
    return name == "t" or (name[0] == "t" and (name[1:].isdigit() or name[1].isupper()))


def type_score(st: SchemaType, it: T.Type) -> int | None:
    """Cost of passing an IR value of type ``it`` as schema type ``st`` (``None``: impossible)."""
    if isinstance(it, T.AnyType):
        return _UNKNOWN
    if isinstance(st, BaseType):
        name = st.name
        exact = _EXACT_BASE.get(name)
        if exact is not None:
            if isinstance(it, exact) or isinstance(it, _SUBTYPE_BASE.get(name, ())):
                return _EXACT
            return _CONVERT if isinstance(it, _CONVERT_BASE.get(name, ())) else None
        if name in _OPAQUE or _is_typevar(name):
            return _EXACT
        return None  # complex, __torch__ classes, ...: nothing in srcore's IR carries them
    if isinstance(st, OptionalType):
        if isinstance(it, T.NoneType):
            return _EXACT
        if isinstance(it, T.lazy_type("OptionalType")):
            return type_score(st.elem, it.elem)
        return type_score(st.elem, it)
    if isinstance(st, ListType):
        if isinstance(it, T.ListType):
            return type_score(st.elem, it.elem)
        if (st.size is not None and isinstance(st.elem, BaseType) and st.elem.name in ("int", "SymInt")
                and isinstance(it, T.IntType)):
            return _CONVERT  # `int[2] stride` given one int: broadcast
        return None
    # a tuple or generic schema type: its module is imported (srcore.ops.schema_rare_types)
    from .schema_rare_types import GenericType, TupleType

    if isinstance(st, TupleType):
        if isinstance(it, T.lazy_type("TupleType")) and len(it.elems) == len(st.elems):
            return _sum(type_score(s, i) for s, i in zip(st.elems, it.elems))
        return None
    if isinstance(st, GenericType):
        if st.name == "Dict" and isinstance(it, T.lazy_type("DictType")) and len(st.args) == 2:
            return _sum((type_score(st.args[0], it.key), type_score(st.args[1], it.value)))
        if st.name == "Union":
            scores = [s for s in (type_score(a, it) for a in st.args) if s is not None]
            return min(scores) if scores else None
        if st.name == "Optional" and len(st.args) == 1:
            return type_score(OptionalType(st.args[0]), it)
        if st.name == "List" and len(st.args) == 1:
            return type_score(ListType(st.args[0]), it)
        return None  # Future/Await/RRef: not IR types
    return None


def _sum(scores) -> int | None:
    total = 0
    for s in scores:
        if s is None:
            return None
        total += s
    return total


def match_score(node: Any, schema: FunctionSchema) -> int | None:
    """Cost of calling ``schema`` with ``node``'s inputs; ``None`` if it cannot."""
    inputs = node.inputs
    args = schema.arguments
    n, m = len(inputs), len(args)
    if n > m and not schema.is_vararg:
        return None
    if not schema.is_varret and len(node.outputs) != len(schema.returns):
        return None
    total = 0
    for i, a in enumerate(args):
        if i >= n:
            if a.default is None:
                return None
            total += 1  # prefer the overload the node fills completely (aten::sum(x, None))
            continue
        s = type_score(a.type, inputs[i].type)
        if s is None:
            return None
        total += s * _PER_TYPE_COST
    return total


def matches(node: Any, schema: FunctionSchema) -> bool:
    """True if ``node`` can call ``schema`` (types, arity, defaults for missing trailing args)."""
    return match_score(node, schema) is not None


def bind_defaults(node: Any, schema: FunctionSchema) -> list[Any]:
    """Default values of the schema arguments the node leaves out (trailing), in schema order.

    Raises :class:`srcore.VerificationError` if a left-out argument has no default.
    """
    n = len(node.inputs)
    out = []
    for a in schema.arguments[n:]:
        if a.default is None:
            raise VerificationError(
                f"{node.kind} gives {n} inputs but {schema.qualified_name} has no default for "
                f"argument {a.name!r}{_where(node)}")
        v = a.default.value
        out.append(list(v) if isinstance(v, tuple) else v)
    return out


def _where(node: Any) -> str:
    src = getattr(node, "source", None)
    return f" (at {src})" if src else ""
