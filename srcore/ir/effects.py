"""Which nodes have side effects (used by DCE, CSE, constant folding).

The rule: a node has side effects when it is observable beyond its outputs:

1. its kind is in :data:`SIDE_EFFECT_OPS` (printing, raising, warnings, attribute
   stores, forks, calls into unknown code, profiling points), or
2. a node nested in one of its blocks has side effects, or
3. it writes (:func:`srcore.ir.alias.mutated_inputs`) to a value the rest of the
   program can still see: a graph or block input, a value used by a node after
   this one, or a value that may share memory with another
   (:func:`srcore.ir.alias.may_alias_inputs`).

Writes to a fresh temporary that nobody reads afterwards are not effects: DCE may
remove them.
"""
from __future__ import annotations

from .alias import may_alias_inputs, mutated_inputs
from .graph import Node, Value, PARAM

__all__ = ["has_side_effects", "SIDE_EFFECT_OPS", "NONDETERMINISTIC_OPS"]

#: ops whose result is random (never folded, never merged by CSE)
NONDETERMINISTIC_OPS = frozenset({
    "aten::rand", "aten::randn", "aten::rand_like", "aten::randn_like", "aten::randint",
    "aten::randint_like", "aten::randperm", "aten::bernoulli", "aten::bernoulli_", "aten::multinomial",
    "aten::normal", "aten::normal_", "aten::poisson", "aten::uniform_", "aten::rrelu",
    "aten::rrelu_with_noise", "aten::dropout", "aten::feature_dropout", "aten::alpha_dropout",
    "aten::feature_alpha_dropout", "aten::native_dropout", "aten::exponential_", "aten::geometric_",
})

SIDE_EFFECT_OPS = frozenset({
    "prim::Print", "prim::RaiseException", "aten::warn", "prim::SetAttr", "prim::Enter",
    "prim::Exit", "prim::CallMethod", "prim::CallFunction", "prim::AddStatValue", "prim::TimePoint",
    "aten::save", "prim::rpc_async", "prim::fork", "aten::wait", "prim::Store", "prim::PythonOp",
    "aten::manual_seed", "prim::profile", "prim::BailOut",
})

def _visible(v: Value, writer: Node) -> bool:
    """True if a write to ``v`` by ``writer`` can be observed by anything else."""
    if v.node.kind == PARAM or may_alias_inputs(v.node):
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
