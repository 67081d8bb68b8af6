"""Turning a prepared, dispatched graph into block infos and processed nodes.

Every value gets a slot in the runtime's value array (graph inputs first).
Each node becomes a :class:`ProcessedNode` whose :class:`ProcessedFunction`
knows how to unbox the node's arguments for its kernel: value slots or
constants, positional or by keyword (schema order; missing trailing
arguments of an older model come from the schema's defaults, RFC-0020).
"""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from ..errors import SrcoreError
from ..ir.alias import mutated_inputs
from ..ir.types import TensorType, contains_tensor
from ..memory.liveness import NodeFacts, analyze
from ..plugin.types import is_const
from .processed import STRUCTURAL_KINDS, Arg, BlockInfo, ManagedTensor, ProcessedFunction, ProcessedNode


def enumerate_values(graph) -> Iterator[Any]:
    """Every value of the graph in a fixed order (inputs, then outputs and block inputs in program order)."""
    yield from graph.inputs
    yield from _block_values(graph.block)


def _block_values(block) -> Iterator[Any]:
    for n in block.nodes:
        yield from n.outputs
        for b in n.blocks:
            yield from b.inputs
            yield from _block_values(b)


def free_slots(block, slot_of: dict[int, int]) -> tuple[int, ...]:
    """Slots of values defined outside ``block`` but read inside it (nested blocks included)."""
    inner: set[int] = set()
    reads: list[int] = []

    def walk(b):
        for v in b.inputs:
            inner.add(id(v))
        for n in b.nodes:
            for v in n.inputs:
                reads.append(id(v))
            for sub in n.blocks:
                walk(sub)
            for v in n.outputs:
                inner.add(id(v))
        for v in b.outputs:
            reads.append(id(v))

    walk(block)
    seen: dict[int, None] = {}
    for vid in reads:
        if vid not in inner and vid in slot_of:
            seen[slot_of[vid]] = None
    return tuple(seen)


class GraphProcessor:
    """Builds block infos from a graph whose nodes have schemas, types and resolved kernels."""

    def __init__(self, graph, resolved: dict[Any, Any], plan_memory: bool = True):
        self.graph = graph
        self.plan_memory = plan_memory
        self.resolved = resolved
        self.values: list[Any] = list(enumerate_values(graph))
        self.slot_of: dict[int, int] = {id(v): i for i, v in enumerate(self.values)}
        self.constants: dict[int, Any] = {}
        self.blocks: list[BlockInfo] = []
        self._frozen: dict[int, Any] = {}
        self._written: set[int] = set()

    def frozen(self, value: Any) -> Any:
        """A constant as the runtime binds it: an array becomes a read-only view of itself, so
        neither a kernel nor a caller holding a returned constant (or a view of one) can
        change the model's parameters for later runs; a write raises instead. A constant the
        graph itself writes in place (``relu_`` of a view of it) stays as it is."""
        if not isinstance(value, np.ndarray) or not value.flags.writeable or id(value) in self._written:
            return value
        view = self._frozen.get(id(value))
        if view is None:
            view = value.view()
            view.flags.writeable = False
            self._frozen[id(value)] = view
        return view

    def slot(self, v) -> int:
        return self.slot_of[id(v)]

    def run(self) -> BlockInfo:
        self._written = _written_constants(self.graph)
        for v in self.values:
            if v.node.kind == "prim::Constant":
                self.constants[self.slot(v)] = self.frozen(v.node.attrs.get("value"))
        return self.process_block(self.graph.block)

    # -- blocks -------------------------------------------------------------------------
    def process_block(self, block) -> BlockInfo:
        index = len(self.blocks)
        self.blocks.append(None)  # reserve the index: sub-blocks come after their parent
        nodes: list[ProcessedNode] = []
        facts: list[NodeFacts] = []
        position = 0
        for n in block.nodes:
            if n.kind == "prim::Constant":
                continue
            position += 1
            subs = tuple(self.process_block(b) for b in n.blocks)
            fn = self.function(n)
            inputs = tuple(self.slot(v) for v in n.inputs)
            outputs = tuple(self.slot(v) for v in n.outputs)
            nodes.append(ProcessedNode(n, fn, inputs, outputs, subs, position))
            facts.append(self.facts(n, fn, position, inputs, outputs))
        out_slots = tuple(self.slot(v) for v in block.outputs)
        # a tensor stored into a container defined outside this block (e.g. `outs.append(h)` in a
        # loop body) outlives the block: count the container as one of its outputs. A block input
        # counts as outside: a loop-carried list is, at the first iteration, the loop's input list
        defined = {id(o) for n in block.nodes for o in n.outputs}
        stored_outside = tuple(self.slot(v) for n in block.nodes for v in _filled_containers(n)
                               if id(v) not in defined)
        live = analyze(facts, out_slots + stored_outside, position + 1)
        managed = tuple(ManagedTensor(s, a, b) for s, (a, b) in sorted(live.lifetimes.items()))
        if block.owning_node is not None and block.owning_node.kind == "prim::fork":
            managed = ()   # a forked block may run concurrently with itself: no shared buffers
        info = BlockInfo(index, block, tuple(self.slot(v) for v in block.inputs), out_slots, tuple(nodes), managed)
        self.blocks[index] = info
        return info

    def facts(self, n, fn: ProcessedFunction | None, position: int, inputs, outputs) -> NodeFacts:
        reads = [s for s in inputs if s not in self.constants]
        for b in n.blocks:
            reads.extend(s for s in free_slots(b, self.slot_of) if s not in self.constants)
        tensorish = [self.slot(o) for o in n.outputs if contains_tensor(o.type)]
        if fn is not None and fn.kind == "out":
            # out variants make fresh tensors; without planning they allocate like natives
            return NodeFacts(position, tuple(reads), tuple(tensorish) if self.plan_memory else (), ())
        # a container a node stores into (aten::append, _set_item, ...) holds its tensor inputs from
        # then on: it aliases them like an output does (else their buffers are reused while listed)
        tensorish += [self.slot(v) for v in _filled_containers(n)]
        # so does a container from outside that a node inside its blocks stores into (a dict filled
        # in a loop over a list: its tensors must outlive the list)
        tensorish += [self.slot(v) for v in _filled_in_blocks(n)]
        return NodeFacts(position, tuple(reads), (), tuple(tensorish))

    # -- functions ------------------------------------------------------------------------
    def function(self, n) -> ProcessedFunction | None:
        if n.kind in STRUCTURAL_KINDS:
            return None
        rk = self.resolved.get(n)
        if rk is None:
            raise SrcoreError(f"internal error: node {n.kind} was not dispatched")
        full = self.full_args(n)
        spec = rk.specialized
        if spec is not None:
            def pick(i):
                return Arg(None, i.value) if is_const(i) else full[i][1]

            args = tuple(pick(i) for i in spec.args)
            kwargs = tuple((name, pick(i)) for name, i in spec.kwargs)
        else:
            args = tuple(a for kw, a in full if kw is None)
            kwargs = tuple((kw, a) for kw, a in full if kw is not None)
        p = rk.kernel.provider
        op = rk.kernel.op if not rk.kernel.is_wildcard or n.schema is None else n.schema.qualified_name
        return ProcessedFunction(rk.fn, rk.kind, args, kwargs, len(n.outputs), rk.backend,
                                 (p.dist or p.name) if p else None, op)

    def full_args(self, n) -> list[tuple[str | None, Arg]]:
        """(keyword or None, source) for every schema argument, defaults bound for missing ones."""
        def source(v) -> Arg:
            if v.node.kind == "prim::Constant":
                return Arg(None, self.frozen(v.node.attrs.get("value")))
            return Arg(self.slot(v), None)

        schema = n.schema
        if schema is None:
            return [(None, source(v)) for v in n.inputs]
        sargs = list(schema.arguments)
        out: list[tuple[str | None, Arg]] = []
        for i, v in enumerate(n.inputs):
            if i < len(sargs):
                out.append((sargs[i].name if sargs[i].kwarg_only else None, source(v)))
            else:  # varargs
                out.append((None, source(v)))
        for a in sargs[len(n.inputs):]:
            if a.default is None:
                raise SrcoreError(f"node {n.kind} has {len(n.inputs)} inputs but argument {a.name!r} of "
                                  f"{schema} has no default")
            out.append((a.name if a.kwarg_only else None, Arg(None, default_value(a))))
        return out


def _written_constants(graph) -> set[int]:
    """``id``s of the constant arrays an in-place node of ``graph`` may write (through views)."""
    from ..ir.alias import alias_class

    out: set[int] = set()
    for n in graph.all_nodes():
        for i in mutated_inputs(n):
            for v in alias_class(n.inputs[i]):
                if v.node.kind == "prim::Constant":
                    out.add(id(v.node.attrs.get("value")))
    return out


def _filled_in_blocks(n) -> list:
    """The containers defined outside node ``n`` that nodes in its blocks (at any depth) write to;
    one carried by ``n``'s loop counts as its initial value (at the first iteration it is that)."""
    found: list = []
    for b in n.blocks:
        defined = {id(o) for m in b.nodes for o in m.outputs}
        carried = {id(v): i for i, v in enumerate(b.inputs)}
        for m in b.nodes:
            for v in _filled_containers(m) + (_filled_in_blocks(m) if m.blocks else []):
                if id(v) in defined:
                    continue
                if id(v) in carried:   # prim::Loop: block inputs (i, carried...) <- node inputs (n, cond, initial...)
                    i = carried[id(v)]
                    if n.kind != "prim::Loop" or i == 0 or i + 1 >= len(n.inputs):
                        continue
                    v = n.inputs[i + 1]
                if all(v is not f for f in found):
                    found.append(v)
    return found


def _filled_containers(n) -> list:
    """The container inputs (lists, dicts of tensors) that node ``n`` writes to."""
    return [n.inputs[i] for i in mutated_inputs(n) if i < len(n.inputs)
            and contains_tensor(n.inputs[i].type) and not isinstance(n.inputs[i].type, TensorType)]


def default_value(arg) -> Any:
    """An argument's default as a kernel receives it (``int[2] stride=1`` is ``[1, 1]``)."""
    value = arg.default.value
    size = getattr(arg.type, "size", None)
    if size and not isinstance(value, (tuple, list)) and value is not None:
        return [value] * size
    if isinstance(value, tuple):
        return list(value)
    return value
