"""The IR types a load of a typical model never meets: TorchScript classes, unions, opaque handles, wrappers
and futures (the text parser and the TorchScript frontend make them).

They are ``srcore.ir.types``' as much as the others (``from srcore.ir.types import UnionType`` works, through that
module's ``__getattr__``); they live here so that a start whose graphs hold none does not build their five attrs
classes (~1 M instructions each, docs/performance-log.md's cold-start topic). Code that meets types of any kind
tests for them with ``srcore.ir.types.lazy_type(name)``, which does not import this module.
"""
from __future__ import annotations

import attrs

from .._convert import to_tuple
from .._repr import shared_repr
from .types import Type

__all__ = ["ClassType", "UnionType", "OpaqueType", "WrapperType", "FutureType"]


@attrs.frozen
@shared_repr
class ClassType(Type):
    """A TorchScript class or module (``__torch__.models.MLP``); opaque to srcore."""

    name: str

    def __str__(self) -> str:
        return self.name


@attrs.frozen
@shared_repr
class UnionType(Type):
    """``Union(A, B)``: a value of one of the element types (TorchScript prints ``T?`` for ``Union(T, None)``)."""

    elems: tuple[Type, ...] = attrs.field(converter=to_tuple)

    def __str__(self) -> str:
        return "Union(" + ", ".join(str(e) for e in self.elems) + ")"


@attrs.frozen
@shared_repr
class OpaqueType(Type):
    """A TorchScript type srcore only carries (``Storage``, ``Stream``, ``Capsule``, ``QScheme``...)."""

    name: str

    def __str__(self) -> str:
        return self.name


@attrs.frozen
@shared_repr
class WrapperType(Type):
    """``Await(T)`` / ``RRef(T)``: a handle to a value of type ``elem``, opaque to srcore."""

    name: str
    elem: Type

    def __str__(self) -> str:
        return f"{self.name}({self.elem})"


@attrs.frozen
@shared_repr
class FutureType(Type):
    """The result of ``prim::fork``: ``aten::wait`` turns it into a value of type ``elem``."""

    elem: Type

    def __str__(self) -> str:
        return f"Future({self.elem})"
