"""What a load could not do at full strength, and why: ``StaticModule.load_report``.

Each entry names the node (its op, its printed form and source) and what is
lost; :meth:`LoadReport.lines` is what the load warns with and what ``srcore
inspect --dispatch`` prints.
"""
from __future__ import annotations

from typing import Any

import attrs

from .._lazy import lazy_getattr
from .._repr import shared_repr
from ..ir.types import TensorType


#: the entries: records built on first use (``srcore.runtime.load_entries``): a load at full strength,
#: the common case, has none
__getattr__ = lazy_getattr(__name__, {n: f"srcore.runtime.load_entries:{n}"
                                     for n in ("MissingShapeRule", "DtypeGuard", "Fallback", "Decomposed")}, globals())


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
        from .load_entries import MissingShapeRule

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
