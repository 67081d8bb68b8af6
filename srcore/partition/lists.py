"""Lists built by ``append`` made plain lists before partitioning.

TorchScript builds some argument lists by appending to an empty one: ``F.interpolate`` makes
its ``scale_factors`` with ``prim::ListConstruct()`` and one ``aten::append`` per dim, and a
``for`` loop over heads collects ``outs.append(...)`` for a ``cat``. Appends write in place, so
the list and the op reading it ``share memory with a value written in place`` and no engine may
take the op (an engine bakes or copies the list at build time). When the appends are all done
before anything reads the list, the list is just the one with every element: this rewrite makes
it a ``prim::Constant`` (every element a constant) or a ``prim::ListConstruct`` of the elements
after the last append, and drops the appends.
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
    last = order[-1]
    for u in readers:
        user = u.user
        if user.kind == RETURN:
            if user is n.owning_block.return_node:
                continue   # the block returns the finished list
            return False
        if not last.is_before(user) or u.offset in mutated_inputs(user):
            return False
    # nothing else may share the list (a container holding it, a loop carrying it, a block returning
    # it): a write through such an alias would change a list this rewrite made a constant
    elements = list(n.inputs) + [a.inputs[1] for a in order]
    allowed = {id(lst)} | {id(a.outputs[0]) for a in order} | {id(e) for e in elements}   # (and what it holds)
    if any(id(v) not in allowed for v in alias_class(lst)):
        return False
    if all(e.node.kind == "prim::Constant" for e in elements):
        new = graph.insert_constant([e.node.attrs.get("value") for e in elements], lst.type, before=n)
    else:
        node = graph.create("prim::ListConstruct", elements, (lst.type,), {})
        node.insert_after(last)
        node.source = n.source
        new = node.outputs[0]
    for a in order:
        a.destroy()
    lst.replace_all_uses_with(new)
    n.destroy()
    return True
