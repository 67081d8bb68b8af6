"""The IR data structure: ``Graph``, ``Block``, ``Node``, ``Value``.

TorchScript's semantics: values are SSA, each produced by exactly one node
(block inputs are produced by the block's ``prim::Param`` node) and used by
nodes (block outputs are the inputs of the block's ``prim::Return`` node).
Nodes sit in a doubly linked list per block, so inserting, moving and
removing are O(1) and iteration tolerates removing the current node.
``prim::If`` owns two blocks; ``prim::Loop`` owns one, whose inputs are the
iteration counter and the loop-carried values and whose outputs are the
continue condition and the new carried values.
"""
from __future__ import annotations

from typing import Any, Iterator, Sequence

import attrs

from .._repr import shared_repr
from .types import Type

PARAM = "prim::Param"
RETURN = "prim::Return"


@attrs.frozen
@shared_repr
class SourceLocation:
    """Where a node came from (``# file:line:col`` in IR text).

    ``in_text``: not a source comment but the node's own position in the IR text it was
    parsed from (nodes without a comment): errors name it, the printer does not write it.
    """

    file: str
    line: int | None = None
    col: int | None = None
    in_text: bool = attrs.field(default=False, eq=False, repr=False)

    def __str__(self) -> str:
        s = self.file
        if self.line is not None:
            s += f":{self.line}"
            if self.col is not None:
                s += f":{self.col}"
        return s


@attrs.frozen
@shared_repr
class Use:
    """One use of a value: ``user.inputs[offset] is value``."""

    user: "Node"
    offset: int


class Value:
    """An SSA value: produced once by ``node`` (its output number ``offset``)."""

    __slots__ = ("name", "type", "node", "offset", "uses", "__weakref__")

    def __init__(self, node: "Node", offset: int, type: Type, name: str | None = None):
        self.node = node
        self.offset = offset
        self.type = type
        self.name = name
        self.uses: list[Use] = []

    @property
    def graph(self) -> "Graph":
        return self.node.graph

    def replace_all_uses_with(self, other: "Value") -> None:
        """Make every user of ``self`` use ``other`` instead."""
        if other is self:
            return
        for use in list(self.uses):
            use.user._set_input(use.offset, other)

    def replace_uses_after(self, other: "Value", node: "Node") -> None:
        """Replace the uses of ``self`` by nodes that come after ``node``."""
        for use in list(self.uses):
            if node.is_before(use.user):
                use.user._set_input(use.offset, other)

    def is_constant(self) -> bool:
        return self.node.kind == "prim::Constant"

    def constant_value(self) -> Any:
        """The value of a ``prim::Constant`` output (raises if not constant)."""
        if self.node.kind != "prim::Constant":
            raise ValueError(f"%{self.name} is not a constant")
        return self.node.attrs.get("value")

    def __repr__(self) -> str:
        return f"%{self.name} : {self.type}" if self.name else f"<Value {self.type}>"


class Node:
    """An operation: ``outputs = kind[attrs](inputs)`` with optional sub-blocks."""

    __slots__ = ("kind", "inputs", "outputs", "attrs", "blocks", "owning_block", "prev", "next",
                 "source", "schema", "graph", "_topo", "meta", "__weakref__")

    def __init__(self, graph: "Graph", kind: str):
        self.graph = graph
        self.kind = kind
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        self.attrs: dict[str, Any] = {}
        self.blocks: list[Block] = []
        self.owning_block: Block | None = None
        self.prev: Node | None = None
        self.next: Node | None = None
        self.source: SourceLocation | None = None
        self.schema = None  # the resolved FunctionSchema, set by schema resolution
        self.meta: dict[str, Any] = {}
        self._topo = 0

    # -- inputs and outputs ---------------------------------------------------------
    def add_input(self, value: Value) -> Value:
        value.uses.append(Use(self, len(self.inputs)))
        self.inputs.append(value)
        return value

    def insert_input(self, index: int, value: Value) -> Value:
        for i in range(index, len(self.inputs)):
            self._drop_use(i)
        tail = self.inputs[index:]
        del self.inputs[index:]
        self.add_input(value)
        for v in tail:
            self.add_input(v)
        return value

    def replace_input(self, index: int, value: Value) -> None:
        self._set_input(index, value)

    def remove_input(self, index: int) -> None:
        for i in range(index, len(self.inputs)):
            self._drop_use(i)
        tail = self.inputs[index + 1:]
        del self.inputs[index:]
        for v in tail:
            self.add_input(v)

    def remove_all_inputs(self) -> None:
        for i in range(len(self.inputs)):
            self._drop_use(i)
        self.inputs.clear()

    def _set_input(self, index: int, value: Value) -> None:
        self._drop_use(index)
        self.inputs[index] = value
        value.uses.append(Use(self, index))

    def _drop_use(self, index: int) -> None:
        old = self.inputs[index]
        for j, use in enumerate(old.uses):
            if use.user is self and use.offset == index:
                del old.uses[j]
                return

    def add_output(self, type: Type, name: str | None = None) -> Value:
        v = Value(self, len(self.outputs), type, self.graph._unique(name))
        self.outputs.append(v)
        return v

    def insert_output(self, index: int, type: Type, name: str | None = None) -> Value:
        v = Value(self, index, type, self.graph._unique(name))
        self.outputs.insert(index, v)
        for i, o in enumerate(self.outputs):
            o.offset = i
        return v

    def erase_output(self, index: int) -> None:
        v = self.outputs[index]
        if v.uses:
            raise ValueError(f"cannot erase output %{v.name} of {self.kind}: it still has uses")
        del self.outputs[index]
        self.graph._names.discard(v.name)
        for i, o in enumerate(self.outputs):
            o.offset = i

    @property
    def output(self) -> Value:
        """The single output (raises if the node has not exactly one)."""
        if len(self.outputs) != 1:
            raise ValueError(f"{self.kind} has {len(self.outputs)} outputs, not 1")
        return self.outputs[0]

    def add_block(self) -> "Block":
        b = Block(self.graph, self)
        self.blocks.append(b)
        return b

    # -- placement ------------------------------------------------------------------
    @property
    def in_block_list(self) -> bool:
        return self.owning_block is not None

    def insert_before(self, other: "Node") -> "Node":
        """Insert this (unplaced) node just before ``other``."""
        self._link(other.prev, other)
        return self

    def insert_after(self, other: "Node") -> "Node":
        """Insert this (unplaced) node just after ``other``."""
        self._link(other, other.next)
        return self

    def move_before(self, other: "Node") -> None:
        self._unlink()
        self.insert_before(other)

    def move_after(self, other: "Node") -> None:
        self._unlink()
        self.insert_after(other)

    def _link(self, prev: "Node", nxt: "Node") -> None:
        if self.owning_block is not None:
            raise ValueError(f"{self.kind} node is already in a block")
        block = prev.owning_block
        self.owning_block = block
        self.prev, self.next = prev, nxt
        prev.next = self
        nxt.prev = self
        block._dirty = True

    def _unlink(self) -> None:
        if self.owning_block is None:
            return
        self.prev.next = self.next
        self.next.prev = self.prev
        self.owning_block._dirty = True
        self.prev = self.next = None
        self.owning_block = None

    def destroy(self) -> None:
        """Remove this node from its block; its outputs must have no uses left."""
        for o in self.outputs:
            if o.uses:
                users = ", ".join(u.user.kind for u in o.uses)
                raise ValueError(f"cannot destroy {self.kind}: output %{o.name} is still used by {users}")
        self.remove_all_inputs()
        for b in self.blocks:
            b._destroy_contents()
        self._unlink()
        for o in self.outputs:
            self.graph._names.discard(o.name)

    # -- order ----------------------------------------------------------------------
    def is_before(self, other: "Node") -> bool:
        """True if ``self`` runs before ``other`` (nodes may be in nested blocks)."""
        a, b = self, other
        if a.owning_block is b.owning_block:
            a.owning_block._renumber()
            return a._topo < b._topo
        # climb to a common block
        a_chain = a._block_chain()
        b_chain = b._block_chain()
        a_blocks = {id(blk): k for k, (blk, _) in enumerate(a_chain)}
        for j, (blk, bn) in enumerate(b_chain):
            if id(blk) in a_blocks:
                k = a_blocks[id(blk)]
                an = a_chain[k][1]
                if an is bn:
                    if an is a or bn is b:  # one node is nested inside the other
                        return an is a
                    # a and b sit in different blocks of the same node: block order decides
                    return an.blocks.index(a_chain[k - 1][0]) < bn.blocks.index(b_chain[j - 1][0])
                blk._renumber()
                return an._topo < bn._topo
        raise ValueError("nodes belong to different graphs")

    def is_after(self, other: "Node") -> bool:
        return other.is_before(self)

    def _block_chain(self) -> list[tuple["Block", "Node"]]:
        """(block, ancestor of self that sits in that block), innermost first."""
        chain = []
        n: Node | None = self
        while n is not None and n.owning_block is not None:
            chain.append((n.owning_block, n))
            n = n.owning_block.owning_node
        return chain

    # -- helpers --------------------------------------------------------------------
    def has_side_effects(self) -> bool:
        from . import effects  # local import: effects consults the schema

        return effects.has_side_effects(self)

    def __repr__(self) -> str:
        from .printer import print_node

        try:
            return print_node(self).strip()
        except Exception:  # repr must never fail
            return f"<Node {self.kind}>"


class Block:
    """A list of nodes with inputs (``param_node`` outputs) and outputs (``return_node`` inputs)."""

    __slots__ = ("graph", "owning_node", "param_node", "return_node", "_dirty", "__weakref__")

    def __init__(self, graph: "Graph", owning_node: Node | None):
        self.graph = graph
        self.owning_node = owning_node
        self.param_node = Node(graph, PARAM)
        self.return_node = Node(graph, RETURN)
        for n in (self.param_node, self.return_node):
            n.owning_block = self
        self.param_node.next = self.return_node
        self.return_node.prev = self.param_node
        self._dirty = True

    @property
    def inputs(self) -> list[Value]:
        return self.param_node.outputs

    @property
    def outputs(self) -> list[Value]:
        return self.return_node.inputs

    def add_input(self, type: Type, name: str | None = None) -> Value:
        return self.param_node.add_output(type, name)

    def insert_input(self, index: int, type: Type, name: str | None = None) -> Value:
        return self.param_node.insert_output(index, type, name)

    def erase_input(self, index: int) -> None:
        self.param_node.erase_output(index)

    def register_output(self, value: Value) -> int:
        self.return_node.add_input(value)
        return len(self.outputs) - 1

    def insert_output(self, index: int, value: Value) -> None:
        self.return_node.insert_input(index, value)

    def erase_output(self, index: int) -> None:
        self.return_node.remove_input(index)

    @property
    def nodes(self) -> "_NodeList":
        return _NodeList(self)

    def append(self, node: Node) -> Node:
        return node.insert_before(self.return_node)

    def prepend(self, node: Node) -> Node:
        return node.insert_after(self.param_node)

    def _renumber(self) -> None:
        if not self._dirty:
            return
        i = 0
        n = self.param_node
        while n is not None:
            n._topo = i
            i += 1
            n = n.next
        self._dirty = False

    def _destroy_contents(self) -> None:
        self.return_node.remove_all_inputs()
        for n in reversed(list(self.nodes)):
            for o in n.outputs:
                for use in list(o.uses):
                    use.user._set_input(use.offset, o)  # keep the list consistent
                o.uses.clear()
            n.remove_all_inputs()
            for b in n.blocks:
                b._destroy_contents()
            n._unlink()

    def __repr__(self) -> str:
        return f"<Block of {self.owning_node.kind if self.owning_node else 'graph'}>"


class _NodeList:
    """Iterates a block's nodes; removing the current node while iterating is fine."""

    __slots__ = ("block",)

    def __init__(self, block: Block):
        self.block = block

    def __iter__(self) -> Iterator[Node]:
        n = self.block.param_node.next
        end = self.block.return_node
        while n is not end and n is not None:
            nxt = n.next
            yield n
            n = nxt

    def __reversed__(self) -> Iterator[Node]:
        n = self.block.return_node.prev
        end = self.block.param_node
        while n is not end and n is not None:
            prv = n.prev
            yield n
            n = prv

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __getitem__(self, i: int) -> Node:
        return list(self)[i]

    @property
    def first(self) -> Node | None:
        n = self.block.param_node.next
        return None if n is self.block.return_node else n


class Graph:
    """A function: one top-level block, plus a namespace of unique value names."""

    def __init__(self):
        self._names: set[str] = set()
        self._counter = 0
        self.block = Block(self, None)
        self._insert_point: Node = self.block.return_node

    # -- the top block ----------------------------------------------------------------
    @property
    def inputs(self) -> list[Value]:
        return self.block.inputs

    @property
    def outputs(self) -> list[Value]:
        return self.block.outputs

    @property
    def nodes(self) -> _NodeList:
        return self.block.nodes

    def add_input(self, type: Type, name: str | None = None) -> Value:
        return self.block.add_input(type, name)

    def register_output(self, value: Value) -> int:
        return self.block.register_output(value)

    def all_nodes(self) -> Iterator[Node]:
        """Every node in every block, in program order (a node before its blocks' nodes)."""
        return _walk(self.block)

    # -- making nodes ---------------------------------------------------------------------
    def create(self, kind: str, inputs: Sequence[Value] = (), output_types: Sequence[Type] = (),
               attrs: dict[str, Any] | None = None, source: SourceLocation | None = None,
               output_names: Sequence[str | None] | None = None) -> Node:
        """Make a node (not yet placed in a block)."""
        n = Node(self, kind)
        for v in inputs:
            n.add_input(v)
        names = output_names or [None] * len(output_types)
        for t, name in zip(output_types, names):
            n.add_output(t, name)
        if attrs:
            n.attrs.update(attrs)
        n.source = source
        return n

    def insert(self, kind: str, inputs: Sequence[Value] = (), output_types: Sequence[Type] = (),
               attrs: dict[str, Any] | None = None, source: SourceLocation | None = None) -> Node:
        """Create a node and place it at the insertion point."""
        n = self.create(kind, inputs, output_types, attrs, source)
        n.insert_before(self._insert_point)
        return n

    def insert_constant(self, value: Any, type: Type | None = None, *, before: Node | None = None) -> Value:
        """Insert ``prim::Constant[value=...]`` and return its output."""
        from .constants import type_of_constant

        t = type if type is not None else type_of_constant(value)
        n = self.create("prim::Constant", (), (t,), {"value": value} if value is not None else {})
        n.insert_before(before if before is not None else self._insert_point)
        return n.output

    def inserting_before(self, node: Node) -> "_InsertPoint":
        return _InsertPoint(self, node)

    # -- names ---------------------------------------------------------------------------
    def _unique(self, name: str | None) -> str | None:
        if name is None:
            return None
        if name not in self._names:
            self._names.add(name)
            return name
        base = name.rsplit(".", 1)[0] if name.rsplit(".", 1)[-1].isdigit() and "." in name else name
        while True:
            self._counter += 1
            cand = f"{base}.{self._counter}"
            if cand not in self._names:
                self._names.add(cand)
                return cand

    def rename(self, value: Value, name: str | None) -> None:
        self._names.discard(value.name)
        value.name = self._unique(name)

    # -- whole-graph operations ----------------------------------------------------------
    def copy(self) -> "Graph":
        """A deep copy (nodes, blocks, types, attributes, sources)."""
        g = Graph()
        env: dict[int, Value] = {}
        for v in self.inputs:
            env[id(v)] = g.add_input(v.type, v.name)
        copy_block_into(self.block, g.block, env)
        for v in self.outputs:
            g.register_output(env[id(v)])
        return g

    def __str__(self) -> str:
        from .printer import print_graph

        return print_graph(self)

    def __repr__(self) -> str:
        return f"<Graph {len(self.inputs)} inputs, {sum(1 for _ in self.all_nodes())} nodes>"


def copy_block_into(src: Block, dst: Block, env: dict[int, Value]) -> None:
    """Append clones of ``src``'s nodes to ``dst``; ``env`` maps old value ids to new values.

    ``env`` must already map ``src``'s inputs. Outputs of ``src`` are not registered.
    """
    g = dst.graph
    for n in src.nodes:
        c = clone_node(n, g, env)
        dst.append(c)


def clone_node(n: Node, g: Graph, env: dict[int, Value]) -> Node:
    """Clone ``n`` into graph ``g`` (unplaced), mapping inputs through ``env`` and recording outputs."""
    c = Node(g, n.kind)
    for v in n.inputs:
        c.add_input(env.get(id(v), v))
    for o in n.outputs:
        env[id(o)] = c.add_output(o.type, o.name)
    c.attrs.update(n.attrs)
    c.source = n.source
    c.schema = n.schema
    c.meta.update(n.meta)
    for b in n.blocks:
        nb = c.add_block()
        for v in b.inputs:
            env[id(v)] = nb.add_input(v.type, v.name)
        copy_block_into(b, nb, env)
        for v in b.outputs:
            nb.register_output(env.get(id(v), v))
    return c


def _walk(block: Block) -> Iterator[Node]:
    for n in block.nodes:
        yield n
        for b in n.blocks:
            yield from _walk(b)


class _InsertPoint:
    def __init__(self, graph: Graph, node: Node):
        self.graph, self.node = graph, node

    def __enter__(self):
        self.saved = self.graph._insert_point
        self.graph._insert_point = self.node
        return self

    def __exit__(self, *exc):
        self.graph._insert_point = self.saved
        return False
