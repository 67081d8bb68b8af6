"""Full unrolling of loops with a constant trip count.

A ``prim::Loop`` is unrolled when its trip count is a constant ``n``, its
initial condition is the constant ``True``, its body's continue condition is
the constant ``True`` (a ``for`` loop, not a ``while`` or a ``for`` with
``break``), its body owns no nested loop, and ``n * len(body)`` is at most
``max_nodes`` (with ``n <= max_trips``). The body is copied ``n`` times with
the iteration counter bound to the constants ``0..n-1``; partial unrolling is
not done.
"""
from __future__ import annotations

from ..ir.graph import Graph, Node, Value
from ._util import clone_block_before, const_or, walk_blocks

DEFAULT_MAX_NODES = 256
DEFAULT_MAX_TRIPS = 64


def _body_size(node: Node) -> int:
    return sum(1 + sum(_nested(b) for b in n.blocks) for n in node.blocks[0].nodes)


def _nested(block) -> int:
    return sum(1 + sum(_nested(b) for b in n.blocks) for n in block.nodes)


def _unrollable(node: Node, max_nodes: int, max_trips: int) -> int | None:
    trips = const_or(node.inputs[0], None)
    if not isinstance(trips, int) or isinstance(trips, bool) or trips < 0 or trips > max_trips:
        return None
    if const_or(node.inputs[1], None) is not True:
        return None
    body = node.blocks[0]
    if const_or(body.outputs[0], None) is not True:
        return None
    if any(n.kind == "prim::Loop" for b in node.blocks for n in b.nodes):
        return None
    if trips * _body_size(node) > max_nodes:
        return None
    return trips


def unroll_loops(graph: Graph, *, max_nodes: int = DEFAULT_MAX_NODES, max_trips: int = DEFAULT_MAX_TRIPS) -> bool:
    """Unroll every loop that fits the budget (innermost first); True if any was unrolled."""
    changed = False
    for block in reversed(list(walk_blocks(graph.block))):  # nested blocks come after their parents
        for node in list(block.nodes):
            if node.kind != "prim::Loop" or node.owning_block is None:
                continue
            trips = _unrollable(node, max_nodes, max_trips)
            if trips is None:
                continue
            _unroll(node, trips)
            changed = True
    return changed


def _unroll(node: Node, trips: int) -> None:
    body = node.blocks[0]
    g = node.graph
    carried: list[Value] = list(node.inputs[2:])
    for i in range(trips):
        counter = g.insert_constant(i, before=node)
        env = {id(body.inputs[0]): counter}
        env.update({id(p): v for p, v in zip(body.inputs[1:], carried)})
        carried = clone_block_before(body, node, env)[1:]
    for o, v in zip(node.outputs, carried):
        o.replace_all_uses_with(v)
    node.destroy()
