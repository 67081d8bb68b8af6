"""Helpers shared by the passes: randomness, block inlining.

Side effects come from :mod:`srcore.ir.effects`, writes and aliasing from
:mod:`srcore.ir.alias`, constants from :mod:`srcore.ir.constants`.
"""
from __future__ import annotations

from typing import Any, Iterator

from ..ir import effects as _effects
from ..ir.constants import const_or, is_const, unique_param_name  # noqa: F401  (the passes' helpers)
from ..ir.effects import NONDETERMINISTIC_OPS, SIDE_EFFECT_OPS
from ..ir.graph import Block, Node, Value, clone_node
from ..ir.names import base_op
from ..ir.types import TensorType


def has_side_effects(node: Node) -> bool:
    """True if ``node`` is observable beyond its outputs, its own writes aside.

    The node's own in-place writes are left to the caller (DCE tracks whether the
    written value is read later); writes by nodes nested in its blocks count
    when the rest of the program can see them (:func:`srcore.ir.effects.has_side_effects`).
    """
    if node.kind in SIDE_EFFECT_OPS:
        return True
    return any(_effects.has_side_effects(n) for b in node.blocks for n in b.nodes)


def is_nondeterministic(node: Node) -> bool:
    if node.kind not in NONDETERMINISTIC_OPS:
        return False
    if node.kind.endswith("dropout"):  # dropout(x, p, train): deterministic when train is False
        train = const_or(node.inputs[-1], None) if node.inputs else None
        return train is not False
    return True


def dtype_of(value: Value) -> str | None:
    t = value.type
    return t.dtype if isinstance(t, TensorType) else None


def is_floating(dtype: str | None) -> bool:
    return dtype is not None and (dtype.startswith("float") or dtype.startswith("bfloat")
                                  or dtype.startswith("complex"))


def walk_blocks(block: Block) -> Iterator[Block]:
    """``block`` and every block nested in it."""
    yield block
    for n in block.nodes:
        for b in n.blocks:
            yield from walk_blocks(b)


def replace_with_values(node: Node, values: list[Value]) -> None:
    """Replace every output of ``node`` by ``values`` and destroy the node."""
    for o, v in zip(node.outputs, values):
        o.replace_all_uses_with(v)
    node.destroy()


def replace_with_constant(node: Node, value: Any, type=None) -> Value:
    """Replace ``node``'s single output by a new constant inserted before it."""
    old = node.output
    const = node.graph.insert_constant(value, type if type is not None else None, before=node)
    const.node.source = node.source
    old.replace_all_uses_with(const)
    name = old.name
    node.destroy()
    if name is not None:
        node.graph.rename(const, name)
    return const


def inline_block(node: Node, index: int) -> None:
    """Replace ``node`` by the nodes of its block ``index`` (a ``prim::If`` branch taken statically).

    The block must have no inputs (If branches never do); its outputs replace the node's outputs.
    """
    block = node.blocks[index]
    for n in list(block.nodes):
        n.move_before(node)
    for o, v in zip(node.outputs, block.outputs):
        o.replace_all_uses_with(v)
    # the moved nodes' uses stay valid: the block's return node is destroyed with ``node``
    node.destroy()


def clone_block_before(block: Block, anchor: Node, env: dict[int, Value]) -> list[Value]:
    """Clone ``block``'s nodes before ``anchor`` (``env`` maps its inputs); returns its mapped outputs."""
    g = anchor.graph
    for n in block.nodes:
        c = clone_node(n, g, env)
        c.insert_before(anchor)
    return [env.get(id(v), v) for v in block.outputs]


def base_kind(node: Node) -> str:
    """The op of ``node`` without its overload name: ``aten::add.Tensor`` -> ``aten::add``."""
    return base_op(node.kind)
