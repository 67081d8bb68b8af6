"""Which nodes have side effects (used by DCE, CSE, constant folding).

The rule: a node has side effects when it is observable beyond its outputs:

1. its kind is in :data:`SIDE_EFFECT_OPS` (printing, raising, warnings, attribute
   stores, forks, calls into unknown code, profiling points), or
2. a node nested in one of its blocks has side effects, or
3. it writes (a ``Tensor(a!)`` argument of its schema, or the first input of a
   list/dict mutator, or the first input of an ``aten::foo_`` in-place op when no
   schema is set) to a value the rest of the program can still see: a graph or
   block input, a value used by a node after this one, or a value produced by
   a view/alias op (which may share memory with a live value).

Writes to a fresh temporary that nobody reads afterwards are not effects: DCE may
remove them.
"""
from __future__ import annotations

from .graph import Node, Value, PARAM

__all__ = ["has_side_effects", "mutated_inputs", "SIDE_EFFECT_OPS", "CONTAINER_MUTATORS", "VIEW_OPS"]

SIDE_EFFECT_OPS = frozenset({
    "prim::Print", "prim::RaiseException", "aten::warn", "prim::SetAttr", "prim::Enter",
    "prim::Exit", "prim::CallMethod", "prim::CallFunction", "prim::AddStatValue", "prim::TimePoint",
    "aten::save", "prim::rpc_async", "prim::fork", "aten::wait", "prim::Store", "prim::PythonOp",
    "aten::manual_seed", "prim::profile", "prim::BailOut",
})

CONTAINER_MUTATORS = frozenset({
    "aten::append", "aten::insert", "aten::pop", "aten::clear", "aten::extend", "aten::_set_item",
    "aten::remove", "aten::__setitem__", "aten::reverse", "aten::sort", "aten::update",
    "aten::setdefault", "aten::popitem", "aten::Delete", "aten::__delitem__",
})

#: ops whose output may share memory with an input
VIEW_OPS = frozenset({
    "aten::view", "aten::reshape", "aten::t", "aten::transpose", "aten::permute", "aten::select",
    "aten::slice", "aten::squeeze", "aten::unsqueeze", "aten::expand", "aten::expand_as",
    "aten::narrow", "aten::flatten", "aten::as_strided", "aten::contiguous", "aten::detach",
    "aten::to", "aten::__getitem__", "aten::view_as", "aten::reshape_as", "aten::unflatten",
    "aten::chunk", "aten::split", "aten::unbind", "aten::alias", "aten::movedim", "aten::diagonal",
    "prim::ListUnpack", "prim::TupleUnpack", "prim::TupleIndex", "prim::ListConstruct",
    "prim::TupleConstruct", "prim::DictConstruct", "prim::unchecked_cast", "aten::dropout",
})


def mutated_inputs(node: Node) -> list[int]:
    """Indices of the inputs ``node`` writes to."""
    schema = node.schema
    if schema is not None:
        idx = []
        args = list(getattr(schema, "arguments", ()))
        for i, a in enumerate(args):
            if i < len(node.inputs) and a.type.is_mutable():
                idx.append(i)
        return idx
    if node.kind in CONTAINER_MUTATORS:
        return [0] if node.inputs else []
    name = node.kind.rpartition("::")[2]
    if node.kind.startswith("aten::") and name.endswith("_") and not name.endswith("__") \
            and node.inputs:
        return [0]
    return []


def _visible(v: Value, writer: Node) -> bool:
    """True if a write to ``v`` by ``writer`` can be observed by anything else."""
    if v.node.kind == PARAM or v.node.kind in VIEW_OPS:
        return True
    if v.node.owning_block is not writer.owning_block:
        return True  # defined outside: a loop's next iteration or the enclosing block sees it
    return any(u.user is not writer and u.user.owning_block is not None and writer.is_before(u.user)
               for u in v.uses)


def has_side_effects(node: Node) -> bool:
    """True if removing ``node`` (when its outputs are unused) could change the program."""
    if node.kind in SIDE_EFFECT_OPS:
        return True
    if any(has_side_effects(n) for b in node.blocks for n in b.nodes):
        return True
    return any(_visible(node.inputs[i], node) for i in mutated_inputs(node))
