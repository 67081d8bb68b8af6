"""The pieces every shape rule uses: abstract values, the rule table, the rule context.

An abstract value (:class:`A`) is what propagation knows about one IR value:
its type, its Python value when known (non-tensors only; ``UNKNOWN`` if not)
and, for lists and tuples of known length, one abstract value per element.
A rule is ``fn(ctx) -> list`` of abstract values or types, one per output.
"""
from __future__ import annotations

from typing import Any, Callable

import attrs

from ..._repr import shared_repr
from ...errors import ShapeError
from ...ir.names import base_op as base_name  # noqa: F401  (rules import it from here)
from ...ir.types import (BOOL, FLOAT, INT, NONE, SCALAR_TYPE_CODES, BoolType, FloatType, IntType,
                         ListType, NoneType, NumberType, OptionalType, TensorType, TupleType, Type)
from . import symbolic as sym
from .dtypes import DEFAULT_FLOAT


class _Unknown:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:
        return False


UNKNOWN: Any = _Unknown()


class _Bottom:
    __slots__ = ()

    def __repr__(self) -> str:
        return "BOTTOM"


#: the "known value" of prim::Uninitialized: no execution reads it, so joins ignore it
BOTTOM: Any = _Bottom()


@attrs.define(slots=True, eq=False)
@shared_repr
class A:
    """An abstract value: type, known Python value (or UNKNOWN), element abstract values."""

    type: Type
    known: Any = UNKNOWN
    elems: list | None = None

    @property
    def is_known(self) -> bool:
        return self.known is not UNKNOWN


Rule = Callable[["Ctx"], Any]
#: qualified op name ("aten::add.Tensor") or base name ("aten::add", serves every overload) -> rule
RULES: dict[str, Rule] = {}


def rule(*names: str):
    """Register the decorated function as the rule of every op in ``names``."""
    def deco(fn: Rule) -> Rule:
        for n in names:
            RULES[n] = fn
        return fn
    return deco


def alias(target: str, *names: str) -> None:
    for n in names:
        RULES[n] = RULES[target]


def lookup(qualified: str) -> Rule | None:
    """The rule of an op: by its exact overload name, else by its base name."""
    fn = RULES.get(qualified)
    if fn is None:
        fn = RULES.get(base_name(qualified))
    if fn is None:  # an alias (aten::absolute) has the rule of the op it names
        from ..aliases import canonical

        target = canonical(base_name(qualified))
        if target != base_name(qualified):
            fn = lookup(target + qualified[len(base_name(qualified)):])
    return fn


def where(node) -> str:
    src = str(node.source) if node.source is not None else "<no source>"
    return f"{src}: {node!r}"


def shape_error(node, message: str, schema_name: str | None = None) -> ShapeError:
    what = node.kind if schema_name in (None, node.kind) else f"{node.kind} ({schema_name})"
    return ShapeError(f"{what}: {message}\n  at {where(node)}")


class Ctx:
    """What a rule sees: the node, its input abstract values, argument names when the schema is known."""

    __slots__ = ("node", "args", "names", "op")

    def __init__(self, node, args: list[A], names: list[str] | None, op: str):
        self.node, self.args, self.names, self.op = node, args, names, op

    # -- arguments --------------------------------------------------------------------
    def arg(self, pos: int, name: str | None = None) -> A | None:
        """Argument by schema name when the schema is known, else by position (None if absent)."""
        if name is not None and self.names is not None:
            try:
                pos = self.names.index(name)
            except ValueError:
                return None
        return self.args[pos] if 0 <= pos < len(self.args) else None

    def known(self, pos: int, name: str | None = None, default: Any = UNKNOWN) -> Any:
        a = self.arg(pos, name)
        if a is None:
            return default
        return a.known

    def tensor(self, pos: int, name: str | None = None) -> TensorType:
        a = self.arg(pos, name)
        return a.type if a is not None and isinstance(a.type, TensorType) else TensorType()

    def is_tensor(self, pos: int) -> bool:
        return 0 <= pos < len(self.args) and isinstance(self.args[pos].type, TensorType)

    def int_list(self, pos: int, name: str | None = None, n: int | None = None) -> list | None:
        """A known ``int[]`` argument as dims (unknown elements are None); an int repeats ``n`` times."""
        a = self.arg(pos, name)
        if a is None:
            return None
        return as_dims(a, n)

    def fail(self, message: str) -> ShapeError:
        return shape_error(self.node, message, self.op)

    # -- dims -------------------------------------------------------------------------
    def norm_dim(self, d: Any, rank: int | None, *, extra: int = 0) -> int | None:
        """Wrap a negative dim; ``extra`` = 1 for ops that insert a dim (unsqueeze, stack)."""
        if not isinstance(d, int) or isinstance(d, bool) or rank is None:
            return None
        n = rank + extra
        if n == 0 and d in (0, -1):  # a 0-dim tensor accepts dim 0 / -1
            return 0
        if not -n <= d < n:
            raise self.fail(f"dim {d} out of range for a tensor of rank {rank}")
        return d + n if d < 0 else d


def as_dims(a: A, n: int | None = None) -> list | None:
    """Known ints of an ``int[]`` value as dimensions (element unknown -> None)."""
    if a.elems is not None:
        return [dim_of(e.known) for e in a.elems]
    k = a.known
    if isinstance(k, (list, tuple)):
        return [dim_of(x) for x in k]
    if isinstance(k, int) and not isinstance(k, bool) and n is not None:
        return [k] * n
    if a.known is None:
        return None
    return None


def dim_of(x: Any):
    """A known int (or symbol) as a dimension; anything else is unknown (None)."""
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, int):
        return x
    if isinstance(x, str):
        return sym.canon(x)
    return None


def to_known(d):
    """A dimension as a known int value: an int, a symbol, or UNKNOWN for None."""
    return UNKNOWN if d is None else d


def int_value(d) -> A:
    return A(INT, to_known(d))


def tt(dtype: str | None, shape) -> TensorType:
    return TensorType(dtype, None if shape is None else tuple(shape))


def dtype_code(x: Any) -> str | None:
    """A known ``ScalarType`` argument (torch's integer code, or a dtype name) as a dtype name."""
    if isinstance(x, bool) or x is UNKNOWN or x is None:
        return None
    if isinstance(x, int):
        return SCALAR_TYPE_CODES.get(x)
    if isinstance(x, str):
        return x
    return None


def scalar_type_of(value: Any) -> Type:
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return INT
    if isinstance(value, float):
        return FLOAT
    if value is None:
        return NONE
    return NumberType()


def is_scalar_type(t: Type) -> bool:
    return isinstance(t, (IntType, FloatType, BoolType, NumberType))


__all__ = ["A", "UNKNOWN", "BOTTOM", "RULES", "rule", "alias", "lookup", "Ctx", "shape_error", "as_dims", "dim_of",
           "to_known", "int_value", "tt", "dtype_code", "scalar_type_of", "is_scalar_type", "DEFAULT_FLOAT",
           "INT", "FLOAT", "BOOL", "NONE", "ListType", "TupleType", "OptionalType", "NoneType", "TensorType"]
