"""The function schema language of native_functions.yaml, as an immutable model.

``FunctionSchema.parse(text)`` reads one schema such as
``aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor`` (the
tokenizer and recursive-descent parser are in :mod:`srcore.ops.schema_parser`);
``str(schema)`` prints it back in the canonical form torch itself prints
(``torch._C.FunctionSchema.__str__``).

Grammar (``?`` optional, ``*`` repeated)::

    schema   := opname '(' [arg (',' arg)*] ')' '->' returns
    opname   := [ident '::'] ident ['.' ident]
    arg      := '*' | '...' | type ident ['=' default]
    returns  := '...' | '(' ')' | '(' ret (',' ret)* ')' | ret
    ret      := '...' | type [ident]
    type     := primary (alias | '[' [int] ']' | '?')*
    primary  := ident ['.' ident]* ['(' type (',' type)* ')']   # Dict(str, t), Future(t)
              | '(' type (',' type)* ')'                         # tuple
    alias    := '(' ('*' | set) ['!'] ['->' ('*' | set)] ')'     set := ident ('|' ident)*
    default  := number | 'inf' | '-inf' | 'nan' | string | 'True' | 'False' | 'None'
              | '[' [default (',' default)*] ']' | ident
"""
from __future__ import annotations

import math
from typing import Any

import attrs

from .._repr import shared_repr

__all__ = ["FunctionSchema", "Argument", "Return", "SchemaType", "BaseType", "OptionalType",
           "ListType", "TupleType", "GenericType", "AliasInfo", "Default"]

_MAX_DEPTH = 32  # nesting of types/defaults; deeper text is an error, not a RecursionError


# -- types ---------------------------------------------------------------------------------
@attrs.frozen
@shared_repr
class AliasInfo:
    """An alias annotation: ``(a)``, ``(a!)``, ``(a -> *)``, ``(*)``, ``(b|a)``."""

    sets: tuple[str, ...]
    is_write: bool = False
    after: tuple[str, ...] | None = None

    def __str__(self) -> str:
        s = "|".join(self.sets) + ("!" if self.is_write else "")
        if self.after is not None:
            s += " -> " + "|".join(self.after)
        return f"({s})"


def _alias_str(alias: AliasInfo | None) -> str:
    return "" if alias is None else str(alias)


class SchemaType:
    """Base class of schema types."""

    __slots__ = ()
    alias: AliasInfo | None

    def is_mutable(self) -> bool:
        """True if this type (or an element type) carries a write (``!``) alias."""
        return False


@attrs.frozen
@shared_repr
class BaseType(SchemaType):
    """A named type: ``Tensor``, ``int``, ``Scalar``, ``t``, ``__torch__.x.Y`` ... with an alias."""

    name: str
    alias: AliasInfo | None = None

    def is_mutable(self) -> bool:
        return self.alias is not None and self.alias.is_write

    def __str__(self) -> str:
        return self.name + _alias_str(self.alias)


@attrs.frozen
@shared_repr
class OptionalType(SchemaType):
    """``T?``."""

    elem: SchemaType
    alias: AliasInfo | None = None

    def is_mutable(self) -> bool:
        return self.elem.is_mutable() or (self.alias is not None and self.alias.is_write)

    def __str__(self) -> str:
        return f"{self.elem}?" + _alias_str(self.alias)


@attrs.frozen
@shared_repr
class ListType(SchemaType):
    """``T[]`` or fixed-size ``T[N]``; ``alias`` is the list's own (``Tensor[](a)``)."""

    elem: SchemaType
    size: int | None = None
    alias: AliasInfo | None = None

    def is_mutable(self) -> bool:
        return self.elem.is_mutable() or (self.alias is not None and self.alias.is_write)

    def __str__(self) -> str:
        return f"{self.elem}[{'' if self.size is None else self.size}]" + _alias_str(self.alias)


# -- defaults ------------------------------------------------------------------------------
#: enum-like identifiers of native_functions.yaml and the integer TorchScript carries for them
ENUM_DEFAULTS: dict[str, int] = {
    "contiguous_format": 0, "preserve_format": 1, "channels_last": 2, "channels_last_3d": 3,
    "Mean": 1, "Sum": 2, "strided": 0, "sparse_coo": 1,
    "long": 4, "int": 3, "float": 6, "double": 7, "bool": 11, "half": 5,
}


@attrs.frozen
@shared_repr
class Default:
    """A default value: the Python ``value`` and its canonical ``text``."""

    value: Any
    text: str

    def __str__(self) -> str:
        return self.text


def _quote(s: str) -> str:
    out = ['"']
    for ch in s:
        esc = _ESCAPES_OUT.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append("\\%03o" % (ord(ch) & 0xFF))
    out.append('"')
    return "".join(out)


_ESCAPES_OUT = {"\\": "\\\\", "'": "\\'", '"': '\\"', "\a": "\\a", "\b": "\\b", "\f": "\\f",
                "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _float_text(d: float) -> str:
    # torch's IValue printing: integral doubles as "1.", others with max_digits10
    if math.isinf(d):
        return "inf" if d > 0 else "-inf"
    if math.isnan(d):
        return "nan"
    if abs(d) < 1e10 and d == int(d):
        return ("-" if d == 0 and math.copysign(1, d) < 0 else "") + f"{int(d)}."
    return "%.17g" % d


def value_text(v: Any) -> str:
    """Canonical text of a plain default value."""
    if v is None:
        return "None"
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _float_text(v)
    if isinstance(v, str):
        return _quote(v)
    if isinstance(v, tuple):
        return "[" + ", ".join(value_text(x) for x in v) + "]"
    raise TypeError(f"not a default value: {v!r}")


# -- arguments and the schema ---------------------------------------------------------------
@attrs.frozen
@shared_repr
class Argument:
    """One argument: ``Tensor self``, ``Scalar alpha=1`` (``kwarg_only`` after ``*``)."""

    name: str
    type: SchemaType
    default: Default | None = None
    kwarg_only: bool = False

    @property
    def has_default(self) -> bool:
        return self.default is not None

    def __str__(self) -> str:
        s = f"{self.type} {self.name}"
        return s if self.default is None else f"{s}={self.default}"


@attrs.frozen
@shared_repr
class Return:
    """One return: a type and an optional name."""

    name: str | None
    type: SchemaType

    def __str__(self) -> str:
        return str(self.type) if self.name is None else f"{self.type} {self.name}"


@attrs.frozen
@shared_repr
class FunctionSchema:
    """An op overload's signature, e.g. ``aten::add.Tensor(Tensor self, ...) -> Tensor``."""

    name: str
    overload_name: str
    arguments: tuple[Argument, ...]
    returns: tuple[Return, ...]
    is_vararg: bool = False
    is_varret: bool = False

    @classmethod
    def parse(cls, text: str, *, source: str | None = None) -> "FunctionSchema":
        """Parse one schema; raise :class:`srcore.SchemaError` naming the column."""
        from .schema_parser import parse_schema

        return parse_schema(text, source)

    @property
    def qualified_name(self) -> str:
        return f"{self.name}.{self.overload_name}" if self.overload_name else self.name

    @property
    def namespace(self) -> str:
        ns, sep, _ = self.name.partition("::")
        return ns if sep else ""

    @property
    def base_name(self) -> str:
        return self.name.rpartition("::")[2]

    @property
    def positional(self) -> list[Argument]:
        return [a for a in self.arguments if not a.kwarg_only]

    @property
    def kwarg_only(self) -> list[Argument]:
        return [a for a in self.arguments if a.kwarg_only]

    @property
    def out_arguments(self) -> list[Argument]:
        """The kwarg-only arguments written in place (``*, Tensor(a!) out``)."""
        return [a for a in self.arguments if a.kwarg_only and a.type.is_mutable()]

    @property
    def is_out(self) -> bool:
        """An out overload: writes into kwarg-only ``Tensor(a!)`` arguments."""
        return bool(self.out_arguments)

    @property
    def is_mutable(self) -> bool:
        """Any argument carries a write alias (``!``): in-place and out overloads."""
        return any(a.type.is_mutable() for a in self.arguments)

    def argument(self, name: str) -> Argument:
        for a in self.arguments:
            if a.name == name:
                return a
        raise KeyError(f"{self.qualified_name} has no argument {name!r}")

    def __str__(self) -> str:
        parts = []
        star = False
        for a in self.arguments:
            if a.kwarg_only and not star:
                parts.append("*")
                star = True
            parts.append(str(a))
        if self.is_vararg:
            parts.append("...")
        rets = [str(r) for r in self.returns]
        if self.is_varret:
            rets.append("...")
        if len(self.returns) == 1 and not self.is_varret and not rets[0].startswith("("):
            ret = rets[0]
        elif not self.returns and self.is_varret:
            ret = "..."
        else:
            ret = "(" + ", ".join(rets) + ")"
        return f"{self.qualified_name}({', '.join(parts)}) -> {ret}"


def __getattr__(name: str):   # ``schema.TupleType`` / ``GenericType`` as before (PEP 562), from their own module
    if name in ("TupleType", "GenericType"):
        from . import schema_rare_types

        return getattr(schema_rare_types, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
