"""Cutting a run of nodes out of a graph: its subgraph, and the engine node that replaces it."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..ir.graph import Graph, Node, Value, clone_node

#: the node kind of a compiled segment; ``attrs``: backend, name, subgraph (a Graph)
ENGINE_KIND = "srcore::engine"


def segment_graph(nodes: Sequence[Node], inputs: list[Value], outputs: list[Value],
                  input_types: Mapping[Value, Any] | None = None) -> Graph:
    """A standalone graph computing ``outputs`` from ``inputs`` with clones of ``nodes``.

    Constants the nodes read are cloned in (before their first use), parameters keep their
    ``param`` names, values keep their names and types, nodes their sources; ``input_types``
    gives inputs a type other than their own (e.g. the static one shape propagation found).
    """
    g = Graph()
    env: dict[int, Value] = {}
    for v in inputs:
        env[id(v)] = g.add_input(input_types.get(v, v.type) if input_types else v.type, v.name)
    for n in nodes:
        for v in n.inputs:
            if id(v) not in env and v.node.kind == "prim::Constant":
                g.block.append(clone_node(v.node, g, env))
        g.block.append(clone_node(n, g, env))
    for v in outputs:
        g.register_output(env[id(v)])
    return g


def replace_with_engine(graph: Graph, nodes: tuple[Node, ...], inputs: list[Value], outputs: list[Value],
                        *, backend: str, name: str, subgraph: Graph, also: tuple[Node, ...] = ()) -> Node:
    """Put one ``srcore::engine`` node where ``nodes`` were (they must be consecutive but for
    constants and non-tensor chains), reading ``inputs`` and making values that stand for
    ``outputs``; ``also``: chain nodes the segment took over, removed with ``nodes`` (every node
    in program order, ``nodes`` and ``also`` together)."""
    eng = Node(graph, ENGINE_KIND)
    for v in inputs:
        eng.add_input(v)
    for v in outputs:
        eng.add_output(v.type)
    eng.attrs.update(backend=backend, name=name, subgraph=subgraph)
    eng.source = nodes[0].source
    eng.insert_before(nodes[0])
    for old, new in zip(outputs, eng.outputs):
        old.replace_all_uses_with(new)
    names = [o.name for o in outputs]
    for n in reversed(nodes if not also else _in_order(nodes, also)):
        n.destroy()
    for v, nm in zip(eng.outputs, names):
        graph.rename(v, nm)
    return eng


def _in_order(nodes, also) -> list[Node]:
    from .dependencies import program_order

    return program_order([*nodes, *also])
