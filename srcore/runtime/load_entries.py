"""The entries of a :class:`srcore.runtime.load_report.LoadReport`: a node without a shape rule, a node
whose kernel checks dtypes at run time, a node run by a fallback kernel, a node replaced by its
decomposition.

In a module of their own (``load_report`` still exports them) so that a load at full strength, which has
none, does not build their classes.
"""
from __future__ import annotations

import attrs

from .._repr import shared_repr


@attrs.frozen
@shared_repr
class MissingShapeRule:
    """A node whose op has no shape rule: the tensors computed from it lose their shapes."""

    op: str
    node: str
    source: str | None
    declared_by: str | None       # who declares the op (a plugin), if known
    unknown_shapes: int           # tensors from this node on whose shape is unknown (not planned in the arena)
    unknown_dtypes: int           # ... whose dtype is unknown (dispatch checks it at run time instead)

    def describe(self) -> str:
        who = f" (declared by {self.declared_by})" if self.declared_by else ""
        where = f" at {self.source}" if self.source else ""
        lost = [f"{self.unknown_shapes} tensor(s) from here on have unknown shapes: they are not planned "
                "in the arena and engine backends do not take their nodes"]
        if self.unknown_dtypes:
            lost.append(f"{self.unknown_dtypes} have unknown dtypes: their kernels check dtypes at run time")
        return f"no shape rule for {self.op}{who}{where}: " + "; ".join(lost)


@attrs.frozen
@shared_repr
class DtypeGuard:
    """A node dispatched while some of its dtypes were unknown: its kernel checks them on every call."""

    op: str
    node: str
    source: str | None
    kernel: str                   # "plugin (dist version) kind kernel on backend for dtypes (...)"

    def describe(self) -> str:
        where = f" at {self.source}" if self.source else ""
        return f"{self.op}{where}: dtypes unknown at load; {self.kernel} checks them on every call"


@attrs.frozen
@shared_repr
class Fallback:
    """A node run by a ``fallback`` kernel (torch's, slowly), and why no faster kernel was taken."""

    op: str
    node: str
    source: str | None
    plugin: str
    reason: str

    def describe(self) -> str:
        where = f" at {self.source}" if self.source else ""
        return f"{self.op}{where} falls back to {self.plugin}'s fallback kernel: {self.reason}"


@attrs.frozen
@shared_repr
class Decomposed:
    """A node replaced by its decomposition (no out or native kernel on the listed backends)."""

    op: str
    source: str | None
    into: tuple[str, ...]         # the ops of the decomposition
    plugin: str                   # who gave the decomposition

    def describe(self) -> str:
        where = f" at {self.source}" if self.source else ""
        return f"{self.op}{where} decomposed into {', '.join(self.into)} (decomposition of {self.plugin})"
