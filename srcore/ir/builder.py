"""``GraphBuilder``: build IR graphs from Python (tests, examples, frontends).

    b = GraphBuilder()
    x = b.input("x", TensorType("float32", ("batch", 64)))
    w = b.param("fc1.weight", weight)          # a named tensor constant
    y = b.op("aten::linear", x, w, None)       # Python values become prim::Constant
    b.output(b.op("aten::relu", y))
    g = b.graph

Control flow: ``with b.if_(cond, outputs=1) as (then_, else_):`` then build in
``with then_: ... then_.output(v)``; ``with b.loop(n, carried=[x]) as body:``
with ``body.index`` / ``body.carried`` and ``body.output(cond, *new_carried)``.
The node's outputs are ``b.last.outputs`` or the ``.outputs`` of the context.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Sequence

import numpy as np

from .constants import type_of_constant
from .graph import Block, Graph, Node, SourceLocation, Value
from .types import ANY, BOOL, INT, TENSOR, ListType, TupleType, Type

__all__ = ["GraphBuilder", "BlockScope", "LoopScope"]


class GraphBuilder:
    """Appends nodes to the current block (the graph's, or a control-flow block)."""

    def __init__(self, graph: Graph | None = None):
        self.graph = graph if graph is not None else Graph()
        self._blocks: list[Block] = [self.graph.block]
        self.source: SourceLocation | None = None  # attached to every new node
        self.last: Node | None = None

    @property
    def block(self) -> Block:
        return self._blocks[-1]

    # -- inputs, outputs, constants -------------------------------------------------
    def input(self, name: str | None = None, type: Type = TENSOR) -> Value:
        return self.graph.add_input(type, name)

    def output(self, *values: Value) -> None:
        for v in values:
            self.graph.register_output(self.value(v))

    def constant(self, value: Any, type: Type | None = None, name: str | None = None) -> Value:
        """``prim::Constant[value=...]`` (numpy arrays: use :meth:`param` to name them)."""
        if isinstance(value, np.ndarray) or isinstance(value, np.generic):
            value = np.asarray(value)
        t = type if type is not None else type_of_constant(value)
        attrs = {} if value is None else {"value": value}
        return self._append("prim::Constant", [], [t], attrs, [name]).output

    def param(self, name: str, array: Any, type: Type | None = None) -> Value:
        """A named tensor constant: ``prim::Constant[param="name"]`` holding ``array``."""
        array = np.asarray(array)
        t = type if type is not None else type_of_constant(array)
        return self._append("prim::Constant", [], [t], {"param": name, "value": array},
                            [name]).output

    def value(self, v: Any) -> Value:
        """``v`` itself if it is a Value; a list/tuple holding Values becomes
        ``prim::ListConstruct``/``prim::TupleConstruct``; anything else a new constant."""
        if isinstance(v, Value):
            return v
        if isinstance(v, (list, tuple)) and any(isinstance(e, Value) for e in v):
            elems = [self.value(e) for e in v]
            types = [e.type for e in elems]
            if isinstance(v, tuple):
                return self._append("prim::TupleConstruct", elems, [TupleType(types)], {}, None).output
            t = ListType(types[0] if len(set(types)) == 1 else ANY)
            return self._append("prim::ListConstruct", elems, [t], {}, None).output
        return self.constant(v)

    # -- ops ------------------------------------------------------------------------
    def op(self, kind: str, *args: Any, outputs: int | None = None,
           output_types: Sequence[Type] | None = None, names: Sequence[str | None] | None = None,
           source: SourceLocation | None = None, **attrs: Any) -> Any:
        """Append ``kind(*args)``; returns its output (or a tuple if it has != 1 outputs).

        ``outputs`` (default 1) outputs of type ``Tensor`` unless ``output_types`` says;
        keyword arguments become node attributes.
        """
        node = self.node(kind, *args, outputs=outputs, output_types=output_types, names=names,
                         source=source, **attrs)
        return node.outputs[0] if len(node.outputs) == 1 else tuple(node.outputs)

    def node(self, kind: str, *args: Any, outputs: int | None = None,
             output_types: Sequence[Type] | None = None, names: Sequence[str | None] | None = None,
             source: SourceLocation | None = None, **attrs: Any) -> Node:
        """Like :meth:`op` but returns the Node."""
        if output_types is None:
            output_types = [TENSOR] * (1 if outputs is None else outputs)
        elif outputs is not None and outputs != len(output_types):
            raise ValueError(f"outputs={outputs} but {len(output_types)} output_types")
        inputs = [self.value(a) for a in args]
        return self._append(kind, inputs, list(output_types), attrs, names, source)

    def _append(self, kind, inputs, types, attrs, names, source=None) -> Node:
        n = self.graph.create(kind, inputs, types, attrs, source or self.source,
                              output_names=list(names) if names else None)
        self.block.append(n)
        self.last = n
        return n

    @contextmanager
    def at(self, source: SourceLocation | str) -> Iterator[None]:
        """Nodes created inside get this source location (``"file.py:3:1"`` or a SourceLocation)."""
        if isinstance(source, str):
            from .parser import parse_source_location
            source = parse_source_location(source) or SourceLocation(source)
        saved, self.source = self.source, source
        try:
            yield
        finally:
            self.source = saved

    # -- control flow ---------------------------------------------------------------
    @contextmanager
    def if_(self, cond: Any, outputs: int = 1,
            output_types: Sequence[Type] | None = None) -> Iterator[tuple["BlockScope", "BlockScope"]]:
        """``prim::If``: yields (then, else) scopes; each must ``.output(...)`` the node's outputs."""
        types = list(output_types) if output_types is not None else [TENSOR] * outputs
        n = self._append("prim::If", [self.value(cond)], types, {}, None)
        then_, else_ = BlockScope(self, n.add_block()), BlockScope(self, n.add_block())
        yield then_, else_
        self.last = n
        for s in (then_, else_):
            if len(s.block.outputs) != len(n.outputs):
                raise ValueError(f"prim::If block returns {len(s.block.outputs)} values, "
                                 f"the node has {len(n.outputs)} outputs")

    @contextmanager
    def loop(self, trip_count: Any, carried: Sequence[Value] = (), cond: Any = True,
             ) -> Iterator["LoopScope"]:
        """``prim::Loop(trip_count, cond, *carried)``: yields the body scope."""
        carried = [self.value(c) for c in carried]
        n = self._append("prim::Loop", [self.value(trip_count), self.value(cond), *carried],
                         [c.type for c in carried], {}, None)
        b = n.add_block()
        body = LoopScope(self, b)
        body.index = b.add_input(INT)
        body.carried = [b.add_input(c.type) for c in carried]
        yield body
        self.last = n
        if len(b.outputs) != len(carried) + 1:
            raise ValueError(f"prim::Loop body must output (cond, *carried): "
                             f"{len(carried) + 1} values, got {len(b.outputs)}")


class BlockScope:
    """``with scope:`` makes the builder append to ``scope.block``."""

    def __init__(self, builder: GraphBuilder, block: Block):
        self.builder, self.block = builder, block

    @property
    def outputs(self) -> list[Value]:
        return self.block.owning_node.outputs

    def output(self, *values: Any) -> None:
        """Register the block's outputs (Python values become constants inside the block)."""
        with self:
            vals = [self.builder.value(v) for v in values]
        for v in vals:
            self.block.register_output(v)

    def __enter__(self) -> "BlockScope":
        self.builder._blocks.append(self.block)
        return self

    def __exit__(self, *exc) -> bool:
        self.builder._blocks.pop()
        return False


class LoopScope(BlockScope):
    index: Value
    carried: list[Value]

    def output(self, cond: Any, *carried: Any) -> None:
        """The body's outputs: the continue condition, then the new carried values."""
        if not isinstance(cond, Value):
            with self:
                cond = self.builder.constant(bool(cond), BOOL)
        super().output(cond, *carried)
