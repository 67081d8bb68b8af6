"""Dependency resolution: the non-tensor chains an engine node needs (TRTorch's "dependency
resolution in segmentation").

A value is *derived* when it is known as soon as the shapes of the tensors are: a constant, the
result of a shape query (``aten::size``, ``aten::dim``, ``aten::numel``, ``aten::len`` of a tensor:
they read only the tensor's metadata) or of a pure node without tensor inputs or outputs whose
inputs are all derived (int arithmetic, ``prim::ListConstruct`` of ints, ``aten::__getitem__``...).
Such a node is a *chain node*. In ``y.reshape(y.size(0), -1)`` with a symbolic batch, ``size`` and
the ``ListConstruct`` are a chain; the ``reshape``'s ``shape`` argument is derived.

A list of tensors built for one op (``prim::ListConstruct`` of tensors, read by ``aten::cat`` or
``aten::stack``) is copied the same way: it is not a tensor op (no engine takes it on its own)
and it must not split the run between the tensors and their ``cat``; a segment whose node reads
it gets a copy, its tensors become segment inputs (or are made inside), and its value is not
derived (it holds tensor data: nothing folds it).

Chain nodes neither join nor break a run of engine nodes: a segment whose node reads a derived
value gets copies of the chain that computes it (its tensor inputs, read for their shape only,
become segment inputs), so that the engine is self-contained; the originals stay where they are
for other users, or go when nothing else reads them. An engine that plans per input signature
folds the chain into constants for each signature (:func:`srcore.partition.specialize`).
"""
from __future__ import annotations

import functools

from ..dispatch.resolve import STRUCTURAL_KINDS
from ..ir.alias import mutated_inputs, mutated_values
from ..ir.effects import has_side_effects
from ..ir.graph import Block, Graph, Node, Value
from ..ir.names import base_op as _base
from ..ir.types import DictType, ListType, TensorType

#: ops that read only a tensor's metadata (its shape), never its data
SHAPE_QUERIES = frozenset({"aten::size", "aten::sym_size", "aten::dim", "aten::numel", "aten::len"})
#: pure non-tensor ops that are still not folded per signature (their value is not a function of shapes)
_NOT_DERIVED = frozenset({"prim::Uninitialized", "prim::RaiseException", "aten::warn", "prim::Print"})


def _is_tensor(v: Value) -> bool:
    t = v.type
    return isinstance(t, TensorType) or t is None


class Chains:
    """The chain nodes of a graph and the derived values they make (computed once, at partitioning)."""

    def __init__(self, graph: Graph):
        self.nodes: set[int] = set()          # ids of chain nodes
        self.values: set[int] = set()         # ids of derived values made by chain nodes
        self.copied: set[int] = set()         # ids of the values a segment copies in (derived, tensor lists)
        # a list something writes in place (appended to in a loop) is known only when the program
        # gets there: a copy of the node making it would compute another one
        self._written = mutated_values(graph)
        self._visit(graph.block)

    def _visit(self, block: Block) -> None:
        for n in block.nodes:
            if self._is_chain(n):
                self.nodes.add(id(n))
                self.values.update(id(o) for o in n.outputs)
                self.copied.update(id(o) for o in n.outputs)
            elif _is_tensor_list(n):
                self.nodes.add(id(n))
                self.copied.update(id(o) for o in n.outputs)
            for sub in n.blocks:
                self._visit(sub)

    def _is_chain(self, n: Node) -> bool:
        # (STRUCTURAL_KINDS holds prim::Constant: a constant is derived without being a chain node)
        if n.blocks or n.kind in STRUCTURAL_KINDS or n.kind in _NOT_DERIVED:
            return False
        if not n.outputs or any(_is_tensor(o) or self._written_container(o) for o in n.outputs):
            return False
        if mutated_inputs(n) or has_side_effects(n):
            return False
        query = _base(n.kind) in SHAPE_QUERIES
        for v in n.inputs:
            if _is_tensor(v):
                if not query:
                    return False
            elif not self.derived(v):
                return False
        return True

    def _written_container(self, v: Value) -> bool:
        """A list or dict that something may write in place (numbers and strings are immutable)."""
        return isinstance(v.type, (ListType, DictType)) and id(v) in self._written

    def derived(self, v: Value) -> bool:
        """True if ``v`` is known once the tensors' shapes are: a constant or a chain node's result."""
        return v.node.kind == "prim::Constant" or id(v) in self.values

    def is_chain(self, n: Node) -> bool:
        return id(n) in self.nodes

    def needed(self, nodes: tuple[Node, ...]) -> list[Node]:
        """The chain nodes outside ``nodes`` that compute the derived values ``nodes`` read (and
        the chains those read), in program order."""
        inside = {id(n) for n in nodes}
        found: dict[int, Node] = {}
        stack = [v for n in nodes for v in n.inputs]
        while stack:
            v = stack.pop()
            p = v.node
            if id(v) not in self.copied or id(p) in inside or id(p) in found:
                continue
            found[id(p)] = p
            stack.extend(p.inputs)
        return program_order(found.values())

    def absorbed(self, nodes: tuple[Node, ...], chain: list[Node]) -> set[int]:
        """Ids of the ``chain`` nodes that nothing outside ``nodes`` and the chain itself reads: the
        segment takes them over (their originals go), so their reads are not the segment's outputs."""
        inside = {id(n) for n in nodes}
        taken: set[int] = set()
        for n in reversed(chain):
            if all(id(u.user) in inside or id(u.user) in taken for o in n.outputs for u in o.uses):
                taken.add(id(n))
        return taken


def _is_tensor_list(n: Node) -> bool:
    """A ``prim::ListConstruct`` of tensors that nothing writes to (an op's ``Tensor[]`` argument),
    or of tensors and constant Nones (``Tensor?[]``: ``aten::index.Tensor``'s ``x[:, i, j]``)."""
    if n.kind != "prim::ListConstruct" or not n.inputs or len(n.outputs) != 1:
        return False
    if not all(isinstance(v.type, TensorType) or v.node.kind == "prim::Constant" and v.node.attrs.get("value") is None
               and not isinstance(v.type, TensorType) for v in n.inputs) \
            or not any(isinstance(v.type, TensorType) for v in n.inputs):
        return False
    return not any(u.offset in mutated_inputs(u.user) for u in n.outputs[0].uses)


def program_order(nodes) -> list[Node]:
    """``nodes`` sorted in program order (they may sit in nested blocks)."""
    return sorted(nodes, key=functools.cmp_to_key(lambda a, b: b.is_before(a) - a.is_before(b)))
