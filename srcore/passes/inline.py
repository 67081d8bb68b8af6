"""Inlining: ``prim::If`` with a constant condition, and calls to known graphs.

Supported calls: ``prim::CallFunction(%f, args...)`` where ``%f`` is produced
by ``prim::Constant`` whose ``graph`` attribute is a :class:`Graph`, or whose
``name`` attribute names a graph in the ``functions`` mapping given to
:func:`inline_calls`. The callee's nodes are copied in place of the call
(recursively, up to ``max_depth``), its inputs bound to the arguments and its
outputs replacing the call's (a callee with several outputs must match the
call's outputs one to one). Not supported (left as they are): ``prim::CallMethod``
(methods of module objects: the frontends inline those before building a
srcore graph), calls whose target is not a constant, and recursion deeper
than ``max_depth``.
"""
from __future__ import annotations

from typing import Mapping

from ..ir.graph import Graph, Node, Value, clone_node
from ._util import const_or, inline_block, walk_blocks


def inline_constant_ifs(graph: Graph) -> bool:
    """Replace each ``prim::If`` whose condition is a constant by the branch it takes."""
    changed = False
    progress = True
    while progress:
        progress = False
        for block in list(walk_blocks(graph.block)):
            for node in list(block.nodes):
                if node.owning_block is None or node.kind != "prim::If":
                    continue
                cond = const_or(node.inputs[0], None)
                if isinstance(cond, bool):
                    inline_block(node, 0 if cond else 1)
                    progress = changed = True
    return changed


def _callee(node: Node, functions: Mapping[str, Graph]) -> Graph | None:
    if not node.inputs or node.inputs[0].node.kind != "prim::Constant":
        return None
    target = node.inputs[0].node.attrs
    g = target.get("graph")
    if isinstance(g, Graph):
        return g
    name = target.get("name")
    return functions.get(name) if isinstance(name, str) else None


def inline_calls(graph: Graph, *, functions: Mapping[str, Graph] | None = None, max_depth: int = 16) -> bool:
    """Inline ``prim::CallFunction`` nodes whose callee is known; True if any was inlined."""
    functions = functions or {}
    changed = False
    for _ in range(max_depth):
        progress = False
        for block in list(walk_blocks(graph.block)):
            for node in list(block.nodes):
                if node.kind != "prim::CallFunction" or node.owning_block is None:
                    continue
                callee = _callee(node, functions)
                if callee is None or len(callee.inputs) != len(node.inputs) - 1 \
                        or len(callee.outputs) != len(node.outputs):
                    continue
                _inline_call(node, callee)
                progress = changed = True
        if not progress:
            break
    return changed


def _inline_call(node: Node, callee: Graph) -> None:
    env: dict[int, Value] = {id(p): a for p, a in zip(callee.inputs, node.inputs[1:])}
    g = node.graph
    for n in callee.nodes:
        c = clone_node(n, g, env)
        c.insert_before(node)
        if c.source is None:
            c.source = node.source
    outs = [env.get(id(v), v) for v in callee.outputs]
    for o, v in zip(node.outputs, outs):
        o.replace_all_uses_with(v)
    node.destroy()
