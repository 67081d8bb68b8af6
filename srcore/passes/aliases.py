"""``normalize_aliases``: every node of an alias op (``aten::absolute``) becomes the op it names (``aten::abs``).

TorchScript's NormalizeOps does this when it emits a graph; srcore does it when a model is
loaded (``StaticModule``, and first in ``prepare_for_static_runtime``), so graphs written
with either name run on one kernel and one shape rule. The table is ``srcore/ops/aliases.yaml``.
"""
from __future__ import annotations

from ..ir.graph import Graph
from ..ops.aliases import canonical

__all__ = ["normalize_aliases"]


def normalize_aliases(graph: Graph) -> bool:
    """Rewrite alias nodes in place; True if any changed."""
    changed = 0
    for n in graph.all_nodes():
        target = canonical(n.kind)
        if target != n.kind:
            n.meta["alias_of"] = n.kind  # the name the model used, for reports
            n.kind = target
            n.schema = None  # resolved again against the op it names
            n.meta.pop("shapes.unresolved", None)
            changed += 1
    return changed > 0
