"""Loop simplifications: loops that never run, and carried values the body passes through unchanged.

``simplify_loops`` guarantees:

* a ``prim::Loop`` whose trip count is the constant 0, or whose initial
  condition is the constant ``False``, is replaced by its initial carried values;
* a carried value whose body output is the body input itself (``x -> x``)
  keeps its initial value on every iteration: the loop's output is replaced by
  the initial value, the body's reads by the outer value, and the carried slot
  is removed (this is the loop-invariant step that empties
  ``for i in range(n): x = x.t().t()`` once the peephole pass has removed the
  transposes).
"""
from __future__ import annotations

from ..ir.graph import Graph, Node
from ._util import const_or, walk_blocks


def simplify_loops(graph: Graph) -> bool:
    changed = False
    for block in list(walk_blocks(graph.block)):
        for node in list(block.nodes):
            if node.kind == "prim::Loop" and node.owning_block is not None:
                changed |= _simplify(node)
    return changed


def never_runs(node: Node) -> bool:
    trips = const_or(node.inputs[0], None)
    cond = const_or(node.inputs[1], None)
    return (isinstance(trips, int) and not isinstance(trips, bool) and trips <= 0) or cond is False


def _simplify(node: Node) -> bool:
    if never_runs(node):
        for o, v in zip(node.outputs, node.inputs[2:]):
            o.replace_all_uses_with(v)
        node.destroy()
        return True
    body = node.blocks[0]
    changed = False
    for i in reversed(range(len(node.outputs))):
        param = body.inputs[1 + i]
        if body.outputs[1 + i] is not param:
            continue
        init = node.inputs[2 + i]
        node.outputs[i].replace_all_uses_with(init)
        body.erase_output(1 + i)
        param.replace_all_uses_with(init)
        body.erase_input(1 + i)
        node.remove_input(2 + i)
        node.erase_output(i)
        changed = True
    return changed
