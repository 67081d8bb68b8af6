"""Lists built by ``append`` made plain lists before partitioning.

TorchScript builds some argument lists by appending to an empty one: ``F.interpolate`` makes
its ``scale_factors`` with ``prim::ListConstruct()`` and one ``aten::append`` per dim, a
``for`` loop over heads collects ``outs.append(...)`` for a ``cat``, and a DenseNet's unrolled
loop appends each layer's output to the feature list that the next layer's ``cat`` reads. Appends
write in place, so the list and the op reading it ``share memory with a value written in place``
and no engine may take the op (an engine bakes or copies the list at build time). When the appends
sit in the list's own block and nothing but them writes the list, every reader sees the list as
the appends before it left it: this rewrite gives each reader that list as a ``prim::Constant``
(every element a constant) or a ``prim::ListConstruct`` of the elements so far, placed after the
last append the reader sees, and drops the appends.
"""
from __future__ import annotations

from ..ir.alias import alias_class, mutated_inputs
from ..ir.graph import RETURN, Graph, Node


def _base(kind: str) -> str:
    return kind.split(".", 1)[0]


def freeze_appended_lists(graph: Graph) -> int:
    """Rewrite every list that is only appended to, then only read (see the module doc); returns
    how many lists were rewritten."""
    done = 0
    for n in list(graph.all_nodes()):
        if n.kind == "prim::ListConstruct" and len(n.outputs) == 1 and _freeze(graph, n):
            done += 1
    return done


def _freeze(graph: Graph, n: Node) -> bool:
    lst = n.outputs[0]
    appends = [u.user for u in lst.uses if _base(u.user.kind) == "aten::append" and u.offset == 0]
    if not appends:
        return False
    readers = [u for u in lst.uses if u.user not in appends]
    if any(a.owning_block is not n.owning_block or a.outputs[0].uses or len(a.inputs) != 2 for a in appends):
        return False
    order = sorted(appends, key=lambda a: sum(1 for b in appends if b.is_before(a)))
    seen = []   # per reader: how many appends it sees
    for u in readers:
        user = u.user
        if u.offset in mutated_inputs(user):
            return False
        if user.kind == RETURN:
            if user is not n.owning_block.return_node:
                return False
            seen.append(len(order))   # the block returns the finished list
        elif not n.is_before(user):
            return False
        else:
            seen.append(sum(1 for a in order if a.is_before(user)))
    # nothing else may share the list (a container holding it, a loop carrying it, a block returning
    # it): a write through such an alias would change a list this rewrite made a constant
    elements = list(n.inputs) + [a.inputs[1] for a in order]
    allowed = {id(lst)} | {id(a.outputs[0]) for a in order} | {id(e) for e in elements}   # (and what it holds)
    if any(id(v) not in allowed for v in alias_class(lst)):
        return False
    snapshots = {k: _snapshot(graph, n, order, elements[:len(n.inputs) + k]) for k in sorted(set(seen))}
    for u, k in zip(readers, seen):
        u.user.replace_input(u.offset, snapshots[k])
    for a in order:
        a.destroy()
    n.destroy()
    return True


def _snapshot(graph: Graph, n: Node, order: list, elements: list):
    """The list holding ``elements``, placed after the last append that added one (else after ``n``)."""
    lst = n.outputs[0]
    if all(e.node.kind == "prim::Constant" for e in elements):
        return graph.insert_constant([e.node.attrs.get("value") for e in elements], lst.type, before=n)
    node = graph.create("prim::ListConstruct", elements, (lst.type,), {})
    node.insert_after(order[len(elements) - len(n.inputs) - 1] if len(elements) > len(n.inputs) else n)
    node.source = n.source
    return node.outputs[0]
