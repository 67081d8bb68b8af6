"""What a load could not do at full strength, and why: ``StaticModule.load_report``.

Each entry names the node (its op, its printed form and source) and what is
lost; :meth:`LoadReport.lines` is what the load warns with and what ``srcore
inspect --dispatch`` prints.
"""
from __future__ import annotations

from typing import Any

import attrs

from .._repr import shared_repr
from ..ir.types import TensorType


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


@attrs.define
@shared_repr
class LoadReport:
    """Per load: failed plugins whose namespace the model touches, nodes without a shape rule, nodes
    replaced by decompositions, nodes run by fallback kernels, nodes whose kernels check dtypes at run time."""

    missing_shape_rules: list[MissingShapeRule] = attrs.Factory(list)
    dtype_guards: list[DtypeGuard] = attrs.Factory(list)
    failed_plugins: list[str] = attrs.Factory(list)  # "plugin mylib (...) failed to import: ..."
    decomposed: list[Decomposed] = attrs.Factory(list)
    fallbacks: list[Fallback] = attrs.Factory(list)

    def lines(self) -> list[str]:
        entries = (*self.missing_shape_rules, *self.decomposed, *self.fallbacks, *self.dtype_guards)
        return [*self.failed_plugins, *(e.describe() for e in entries)]

    def __bool__(self) -> bool:
        return bool(self.missing_shape_rules or self.dtype_guards or self.failed_plugins or self.decomposed
                    or self.fallbacks)

    def to_json(self) -> dict[str, Any]:
        return {"failed_plugins": list(self.failed_plugins),
                "missing_shape_rules": [attrs.asdict(e) for e in self.missing_shape_rules],
                "decomposed": [attrs.asdict(e) for e in self.decomposed],
                "fallbacks": [attrs.asdict(e) for e in self.fallbacks],
                "dtype_guards": [attrs.asdict(e) for e in self.dtype_guards]}


def _source(node) -> str | None:
    return str(node.source) if getattr(node, "source", None) is not None else None


def _downstream_tensors(node) -> list:
    """Every tensor value computed (transitively) from ``node``'s outputs, its own outputs included."""
    seen: dict[int, Any] = {}
    stack = list(node.outputs)
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen[id(v)] = v
        for use in v.uses:
            user = use.user
            if user.kind == "prim::Return":  # a sub-block's output flows into its owning node's outputs
                owner = user.owning_block.owning_node if user.owning_block is not None else None
                stack.extend(owner.outputs if owner is not None else ())
            else:
                stack.extend(user.outputs)
    return [v for v in seen.values() if isinstance(v.type, TensorType)]


def missing_shape_rules(nodes, schemas=None) -> list[MissingShapeRule]:
    """Entries for the nodes propagation found without a rule (after it has run)."""
    out = []
    for n in nodes:
        tensors = _downstream_tensors(n)
        declared_by = None
        if schemas is not None and n.schema is not None:
            try:
                declared_by = schemas.provider(n.schema.qualified_name)
            except KeyError:
                declared_by = None
        out.append(MissingShapeRule(
            n.kind if n.schema is None else n.schema.qualified_name, repr(n).strip(), _source(n), declared_by,
            sum(1 for v in tensors if not v.type.is_static), sum(1 for v in tensors if v.type.dtype is None)))
    return out
