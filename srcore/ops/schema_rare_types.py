"""The schema types few op overloads use: tuples (``(T1, T2)``, prim ops) and parameterised types
(``Dict(str, Tensor)``, ``Union(int, str)``, ``Future(t)``).

They are ``srcore.ops.schema``'s as much as the others (``from srcore.ops.schema import TupleType`` works, through
that module's ``__getattr__``); they live here so that a start whose schemas hold none (a selection's few ops) does
not build their two attrs classes (~1 M instructions each, docs/performance-log.md's cold-start topic). Code that
tests for them imports this module where it meets a schema type that is none of the others.
"""
from __future__ import annotations

import attrs

from .._repr import shared_repr
from .schema import AliasInfo, SchemaType, _alias_str

__all__ = ["TupleType", "GenericType"]


@attrs.frozen
@shared_repr
class TupleType(SchemaType):
    """``(T1, T2, ...)`` as used by prim ops."""

    elems: tuple[SchemaType, ...]
    alias: AliasInfo | None = None

    def is_mutable(self) -> bool:
        return any(e.is_mutable() for e in self.elems)

    def __str__(self) -> str:
        return "(" + ", ".join(map(str, self.elems)) + ")" + _alias_str(self.alias)


@attrs.frozen
@shared_repr
class GenericType(SchemaType):
    """A parameterised type: ``Dict(str, Tensor)``, ``Future(t)``, ``Union(int, str)``."""

    name: str
    args: tuple[SchemaType, ...]
    alias: AliasInfo | None = None

    def is_mutable(self) -> bool:
        return self.alias is not None and self.alias.is_write

    def __str__(self) -> str:
        return f"{self.name}(" + ", ".join(map(str, self.args)) + ")" + _alias_str(self.alias)
