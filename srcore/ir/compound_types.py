"""The IR types of values that hold others: optionals, tuples and dicts (lists are ``srcore.ir.types.ListType``).

They are ``srcore.ir.types``' as much as the others (``from srcore.ir.types import TupleType`` works, through that
module's ``__getattr__``); they live here so that a start whose graphs hold none (a prepared-cache hit of a model
of tensors, e.g. an MLP or a CNN) does not build their three attrs classes (~1 M instructions each,
docs/performance-log.md's cold-start topic). Code that meets types of any kind tests for them with
``srcore.ir.types.lazy_type(name)``, which does not import this module; the IR text parser imports it.
"""
from __future__ import annotations

import attrs

from .._convert import to_tuple
from .._repr import shared_repr
from .types import Type

__all__ = ["OptionalType", "TupleType", "DictType"]


@attrs.frozen
@shared_repr
class OptionalType(Type):
    elem: Type

    def __str__(self) -> str:
        return f"{self.elem}?"


@attrs.frozen
@shared_repr
class TupleType(Type):
    elems: tuple[Type, ...] = attrs.field(converter=to_tuple)

    def __str__(self) -> str:
        if len(self.elems) == 1:
            return f"({self.elems[0]},)"
        return "(" + ", ".join(str(e) for e in self.elems) + ")"


@attrs.frozen
@shared_repr
class DictType(Type):
    key: Type
    value: Type

    def __str__(self) -> str:
        return f"Dict({self.key}, {self.value})"
