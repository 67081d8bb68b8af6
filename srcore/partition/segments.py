"""Which nodes may go into an engine, and how they group into segments.

A node is *eligible* for an engine backend when the backend's builder says it
``supports`` it and the node is pure: no sub-blocks, no side effects, no
in-place writes, and none of its values shares memory with a value something
writes in place (an engine returns fresh arrays, so an alias the rest of the
program relies on would silently break). A *segment* is a maximal run of
eligible nodes in program order within one block (``prim::Constant`` nodes and
the non-tensor chains of :mod:`.dependencies` do not break a run: the segment
gets its own copies). This is TRTorch's segmentation: what is not eligible stays
in the graph and runs node by node on the next backends.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

import attrs

from ..dispatch.resolve import STRUCTURAL_KINDS, node_info, node_op, node_schema
from ..ir.alias import mutated_inputs, mutated_values
from ..ir.effects import has_side_effects
from ..ir.graph import Block, Graph, Node, Value
from ..ir.types import ListType, TensorType
from .dependencies import Chains
from .extract import ENGINE_KIND
from .scopes import ScopeMatcher


@attrs.frozen
class Candidate:
    """One run of eligible nodes (program order) in one block."""

    block: Any
    nodes: tuple[Node, ...]


@attrs.frozen
class Refusal:
    """A node that did not go into an engine, and why (for the partition report)."""

    node: Node
    reason: str


def _base(kind: str) -> str:
    return kind.split(".", 1)[0]


class Eligibility:
    """Decides, node by node, whether one engine backend may take it (with the reason if not)."""

    def __init__(self, graph: Graph, table: Any, supports: Callable[[Any], Any], backend: str,
                 fallback_ops: tuple[str, ...] = (), fallback_modules: tuple[str, ...] = ()):
        self.table = table
        self.supports = supports
        self.backend = backend
        self.fallback_ops = frozenset(fallback_ops)
        self.fallback_modules = ScopeMatcher(fallback_modules)
        self.tainted = mutated_values(graph)  # written in place, or may alias such a value
        self.chains = Chains(graph)
        self._list_makers_refused: dict[int, bool] = {}   # id(node) -> it makes a tensor list outside engines

    def check(self, node: Node) -> str | None:
        """None if ``node`` may go into an engine, else the reason it may not."""
        if node.kind == ENGINE_KIND:
            return "already in an engine"
        if node.blocks or node.kind in STRUCTURAL_KINDS:
            return "control flow runs outside engines"
        schema = node_schema(node, self.table)
        op = node_op(node, schema)
        if op in self.fallback_ops or _base(op) in self.fallback_ops:
            return "listed in Options.engine_fallback_ops"
        module = self.fallback_modules.match(node.meta.get("scope"))
        if module is not None:
            return f"in module {module}, listed in Options.engine_fallback_modules"
        if mutated_inputs(node) or has_side_effects(node):
            return "writes in place or has side effects"
        made = next((v for v in node.inputs if _control_flow_tensor_list(v) or self._list_of_refused_op(v)), None)
        if made is not None:
            return (f"reads the tensor list %{made.name or '?'} made by {made.node.kind} (a segment's inputs "
                    "are tensors: no engine takes a list)")
        # (the tensors of a list argument too: an engine reads them through its copy of the list)
        if any(id(v) in self.tainted for v in (*node.inputs, *node.outputs, *_list_elements(node, self.chains))):
            return "shares memory with a value written in place"
        info = node_info(node, schema, op)
        derived = [i for i, (v, a) in enumerate(zip(node.inputs, info.args))
                   if not a.is_constant and id(v) in self.chains.values]
        if derived:
            args = list(info.args)
            for i in derived:
                args[i] = attrs.evolve(args[i], derived=True)
            info = attrs.evolve(info, args=tuple(args))
        try:
            answer = self.supports(info)
        except Exception as exc:  # a builder's bug must not take the model down: run it elsewhere
            return f"{self.backend}'s supports() raised {type(exc).__name__}: {exc}"
        if isinstance(answer, str) and answer:   # a refusal that says why
            return f"not supported by {self.backend}: {answer}"
        if answer and not isinstance(answer, str):
            return None
        if any(_unknown_layout(v.type) for v in (*node.inputs, *node.outputs)):
            return (f"not supported by {self.backend}; the dtype or rank of its tensors is unknown (an op "
                    "without a shape rule before it? see StaticModule.load_report)")
        return f"not supported by {self.backend}"


    def _list_of_refused_op(self, v: Value) -> bool:
        """A ``Tensor[]`` made by an op that may not go into an engine (``tensor_split`` where the backend
        has none): it would reach the reader's segment as a list input. A ``prim::ListConstruct``'s list
        is copied in instead."""
        if not (isinstance(v.type, ListType) and isinstance(v.type.elem, TensorType)) or v.node is None \
                or v.node.kind == "prim::ListConstruct" or self.chains.is_chain(v.node):
            return False
        memo = self._list_makers_refused
        if id(v.node) not in memo:
            memo[id(v.node)] = self.check(v.node) is not None
        return memo[id(v.node)]


def _control_flow_tensor_list(v: Value) -> bool:
    """A ``Tensor[]`` made by control flow or a graph input: it would reach a segment as a list input
    (a list built by ``prim::ListConstruct`` is copied in instead, one from an op goes in with it)."""
    return (isinstance(v.type, ListType) and isinstance(v.type.elem, TensorType)
            and (bool(v.node.blocks) or v.node.kind in STRUCTURAL_KINDS or v.node.kind == "prim::Param"))


def _list_elements(node: Node, chains: Chains) -> list[Value]:
    """The tensors of the lists ``node`` reads that a segment would copy in."""
    return [x for v in node.inputs if id(v) in chains.copied and id(v) not in chains.values for x in v.node.inputs]


def _unknown_layout(t) -> bool:
    return isinstance(t, TensorType) and (t.dtype is None or t.shape is None)


def find_candidates(block: Block, eligibility: Eligibility) -> tuple[list[Candidate], list[Refusal]]:
    """Runs of eligible nodes in ``block`` and its sub-blocks, and the refused nodes."""
    runs: list[Candidate] = []
    refused: list[Refusal] = []
    for b in _blocks(block):
        current: list[Node] = []
        for n in b.nodes:
            if n.kind == "prim::Constant" or eligibility.chains.is_chain(n):
                continue
            reason = eligibility.check(n)
            if reason is None:
                current.append(n)
                continue
            refused.append(Refusal(n, reason))
            if current:
                runs.append(Candidate(b, tuple(current)))
                current = []
        if current:
            runs.append(Candidate(b, tuple(current)))
    return runs, refused


def _blocks(block: Block) -> Iterator[Block]:
    yield block
    for n in block.nodes:
        for sub in n.blocks:
            yield from _blocks(sub)


def boundary(nodes: tuple[Node, ...], chain: tuple[Node, ...] = (),
             absorbed: frozenset[int] = frozenset()) -> tuple[list[Value], list[Value]]:
    """A run's inputs (non-constant values read from outside it, first-use order) and outputs
    (values it makes that anything outside it reads, including block returns). ``chain``: the
    chain nodes the segment gets copies of (their inputs are the segment's too); ``absorbed``:
    ids of those whose originals go with the run (their reads are not outside reads)."""
    inside = {id(n) for n in nodes} | set(absorbed)
    made = {id(o) for n in (*nodes, *chain) for o in n.outputs}
    inputs: dict[int, Value] = {}
    for n in _in_order(nodes, chain):
        for v in n.inputs:
            if id(v) not in made and v.node.kind != "prim::Constant":
                inputs.setdefault(id(v), v)
    outputs = [o for n in nodes for o in n.outputs if any(id(u.user) not in inside for u in o.uses)]
    return list(inputs.values()), outputs


def _in_order(nodes, chain) -> list[Node]:
    if not chain:
        return list(nodes)
    from .dependencies import program_order

    return program_order([*nodes, *chain])
