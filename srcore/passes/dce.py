"""Dead code elimination, aware of side effects, mutation and control flow.

Guarantees: a node is kept if it has side effects (``prim::Print``,
``prim::RaiseException``, ... or anything nested that has), if one of its
outputs is used by a kept node or a graph output, or if it writes to a value
that is still read later (in-place ops, list mutators). Unused outputs of
``prim::If`` and unused loop-carried values of ``prim::Loop`` are removed (a
carried value is needed when the loop's output is used or the body reads it
to compute something needed); a loop or if with no needed output and no side
effects disappears.

Mutation is handled conservatively: an in-place node is kept when any value
that may share memory with the one it writes (views, in-place results, lists
holding it: :func:`srcore.ir.alias.alias_class`) is read later, is a block input, or
is defined in an enclosing block (a loop may read it in the next iteration).
"""
from __future__ import annotations

from ..errors import PassError
from ..ir.graph import Block, Graph, Node, Value
from ..ir.alias import alias_class, mutated_inputs
from ._util import has_side_effects


class _Liveness:
    def __init__(self):
        self.values: set[int] = set()
        self.nodes: set[int] = set()

    def live(self, v: Value) -> bool:
        return id(v) in self.values

    def mark(self, v: Value) -> bool:
        if id(v) in self.values:
            return False
        self.values.add(id(v))
        return True

    # -- marking ------------------------------------------------------------------------
    def mark_block(self, block: Block, outputs_live: list[bool]) -> None:
        for v, live in zip(block.outputs, outputs_live):
            if live:
                self.mark(v)
        for node in reversed(block.nodes):
            if self._node_is_live(node):
                self.nodes.add(id(node))
                self._mark_node(node)

    def _node_is_live(self, node: Node) -> bool:
        if id(node) in self.nodes or any(self.live(o) for o in node.outputs):
            return True
        if has_side_effects(node):
            return True
        return any(self._write_is_observable(node, node.inputs[i]) for i in mutated_inputs(node)
                   if i < len(node.inputs))

    def _write_is_observable(self, node: Node, v: Value) -> bool:
        own = {id(o) for o in node.outputs}
        for m in alias_class(v):
            producer = m.node
            if producer.kind == "prim::Param":
                return True  # a graph or block input: the caller or the next iteration sees it
            if producer is not node and producer.owning_block is not node.owning_block \
                    and producer.is_before(node):
                return True  # defined in an enclosing block: a later loop iteration may read it
            if id(m) not in own and self.live(m):
                return True  # read after this write (we walk backwards)
        return False

    def _mark_node(self, node: Node) -> None:
        if node.kind == "prim::Loop":
            self._mark_loop(node)
        elif node.kind == "prim::If":
            live = [self.live(o) for o in node.outputs]
            for b in node.blocks:
                self.mark_block(b, live)
            self.mark(node.inputs[0])
        else:
            for b in node.blocks:  # unknown block-owning ops: everything inside is live
                self.mark_block(b, [True] * len(b.outputs))
            for v in node.inputs:
                self.mark(v)

    def _mark_loop(self, node: Node) -> None:
        body = node.blocks[0]
        n = len(node.outputs)
        carried = [self.live(o) for o in node.outputs]
        while True:  # a carried value is needed if its output is used or the body reads it
            self.mark_block(body, [True] + carried)
            new = [carried[i] or self.live(body.inputs[1 + i]) for i in range(n)]
            if new == carried:
                break
            carried = new
        for i, live in enumerate(carried):
            if live:
                self.mark(node.outputs[i])
        self.mark(node.inputs[0])
        self.mark(node.inputs[1])
        for i in range(n):
            if carried[i]:
                self.mark(node.inputs[2 + i])


def eliminate_dead_code(graph: Graph) -> bool:
    """Remove dead nodes, unused If outputs and unused loop-carried values; True if anything changed."""
    lv = _Liveness()
    lv.mark_block(graph.block, [True] * len(graph.outputs))
    return _sweep(graph.block, lv)


def _sweep(block: Block, lv: _Liveness) -> bool:
    changed = False
    for node in reversed(block.nodes):
        if id(node) not in lv.nodes:
            for o in node.outputs:  # dead users are destroyed first (reverse order), but be safe
                if o.uses:
                    break
            else:
                node.destroy()
                changed = True
                continue
        dead_carried: list[int] = []
        if node.kind == "prim::Loop":
            dead_carried = _dead_carried(node, lv)
        elif node.kind == "prim::If":
            changed |= _prune_if(node, lv)
        for b in node.blocks:
            changed |= _sweep(b, lv)
        if dead_carried:
            _remove_carried(node, dead_carried)
            changed = True
    return changed


def _prune_if(node: Node, lv: _Liveness) -> bool:
    changed = False
    for i in reversed(range(len(node.outputs))):
        if not lv.live(node.outputs[i]) and not node.outputs[i].uses:
            for b in node.blocks:
                b.erase_output(i)
            node.erase_output(i)
            changed = True
    return changed


def _dead_carried(node: Node, lv: _Liveness) -> list[int]:
    """Indices of dead carried values; their body outputs are erased now, the rest after the sweep."""
    body = node.blocks[0]
    dead = []
    for i in reversed(range(len(node.outputs))):
        out, param = node.outputs[i], body.inputs[1 + i]
        if lv.live(out) or lv.live(param) or out.uses:
            continue
        body.erase_output(1 + i)
        dead.append(i)
    return dead  # descending order


def _remove_carried(node: Node, dead: list[int]) -> None:
    body = node.blocks[0]
    for i in dead:
        param = body.inputs[1 + i]
        if param.uses:  # cannot happen for a dead value: its users were dead too
            raise PassError(f"eliminate_dead_code: dead loop-carried %{param.name} still has uses")
        body.erase_input(1 + i)
        node.remove_input(2 + i)
        node.erase_output(i)
