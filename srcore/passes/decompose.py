"""Decompositions at load: an op no listed backend runs natively becomes a small graph of ops that do.

The registry's :class:`srcore.ops.decomposition_table.DecompositionTable` holds every plugin's
``srcore_decompositions()`` records (the core's first): IR text per op, or a
generator writing it per op (``"ns::*"`` serves a whole namespace). At load,
:func:`decompose` replaces each node whose op has no out or native kernel on
the module's backends by its decomposition, repeatedly (a decomposition may
use ops that are decomposed in turn), so that fallback kernels are the last
resort. A decomposition is parsed and type-checked the first time it is
needed: its inputs and outputs must match the op's schema one to one (tensor
for tensor, list for list) and every op in it must be declared; otherwise the
load fails with a ``PluginError`` naming the plugin and the op.
"""
from __future__ import annotations

from typing import Sequence

from ..errors import SrcoreError
from ..ir.types import TensorType

MAX_DEPTH = 8
_STRUCTURAL = ("prim::Constant", "prim::If", "prim::Loop", "prim::Param", "prim::Return")


def _runnable(op: str, table, backends: Sequence[str]) -> bool:
    """True if some listed backend has an out or native kernel for ``op`` (its own, not a namespace's)."""
    return any(not k.is_wildcard for b in backends for kind in ("out", "native") for k in table.lookup(op, b, kind))


def decompose(graph, registry, backends: Sequence[str], *, max_depth: int = MAX_DEPTH) -> list:
    """Replace every node no backend of ``backends`` runs natively by its decomposition (in place);
    returns a :class:`srcore.runtime.load_entries.Decomposed` per replaced node (nested ones included)."""
    table = registry.decompositions
    if table is None or not len(table):
        return []
    done: list = []
    for _ in range(max_depth):
        changed = False
        for node in list(graph.all_nodes()):
            schema = node.schema
            if node.owning_block is None or schema is None or node.kind in _STRUCTURAL:
                continue
            op = schema.qualified_name
            if _runnable(op, registry.kernel_table, backends):
                continue
            found = table.graph_for(schema, registry.schemas)
            if found is None or len(node.inputs) > len(schema.arguments):
                continue
            dgraph, rec = found
            into = _inline(node, dgraph, schema)
            p = rec.provider
            from ..runtime.load_entries import Decomposed

            done.append(Decomposed(op, str(node_source) if (node_source := node.source) else None, into,
                                   f"{p.dist or p.name} {p.version or ''}".strip() if p else "?"))
            node.destroy()
            changed = True
        if not changed:
            break
    return done


def _inline(node, dgraph, schema) -> tuple[str, ...]:
    """Copies of ``dgraph``'s nodes before ``node``, bound to its inputs (defaults for the ones it
    leaves out); its outputs' uses move to the copies'. Returns the ops inserted."""
    from ..ir.graph import clone_node
    from ..runtime.process import default_value

    g = node.graph
    args = list(node.inputs)
    for a in schema.arguments[len(args):]:
        if a.default is None:
            raise SrcoreError(f"{node.kind}: argument {a.name!r} of {schema} is missing and has no default")
        with g.inserting_before(node):
            args.append(g.insert_constant(default_value(a)))
    env = {id(p): v for p, v in zip(dgraph.inputs, args)}
    ops = []
    for n in dgraph.nodes:
        c = clone_node(n, g, env)
        c.insert_before(node)
        c.source = node.source  # errors and reports point at the user's node, not the decomposition text
        c.schema = n.schema
        c.meta["decomposed_from"] = schema.qualified_name
        if n.kind != "prim::Constant":
            ops.append(n.schema.qualified_name if n.schema is not None else n.kind)
    for o, v in zip(node.outputs, dgraph.outputs):
        new = env.get(id(v), v)
        if isinstance(o.type, TensorType) and isinstance(new.type, TensorType) and new.type.dtype is None:
            new.type = o.type  # keep what the frontend knew of the result
        o.replace_all_uses_with(new)
    return tuple(ops)
