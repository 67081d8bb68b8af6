"""Helpers shared by the passes: effects, mutation, constants, block inlining.

Side effects and mutation come from :mod:`srcore.ir.effects`; this module adds
what the passes need on top (randomness, aliasing, constants, inlining).
"""
from __future__ import annotations

from typing import Any, Iterator

from ..ir import effects as _effects
from ..ir.effects import CONTAINER_MUTATORS, SIDE_EFFECT_OPS, VIEW_OPS  # noqa: F401  (re-exported)
from ..ir.graph import Block, Graph, Node, Value, clone_node
from ..ir.types import FloatType, IntType, TensorType

#: ops whose result is random (never folded, never merged by CSE)
NONDETERMINISTIC_OPS = frozenset({
    "aten::rand", "aten::randn", "aten::rand_like", "aten::randn_like", "aten::randint",
    "aten::randint_like", "aten::randperm", "aten::bernoulli", "aten::bernoulli_", "aten::multinomial",
    "aten::normal", "aten::normal_", "aten::poisson", "aten::uniform_", "aten::rrelu",
    "aten::rrelu_with_noise", "aten::dropout", "aten::feature_dropout", "aten::alpha_dropout",
    "aten::feature_alpha_dropout", "aten::native_dropout", "aten::exponential_", "aten::geometric_",
})

#: ops whose output may share memory with their first input (a view or alias)
ALIAS_OPS = VIEW_OPS | frozenset({"aten::numpy_T", "aten::real", "aten::type_as", "aten::unfold",
                                  "aten::feature_dropout", "aten::alpha_dropout"})


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


def mutated_inputs(node: Node) -> list[int]:
    """Indices of the inputs that ``node`` writes to (in-place ops and container mutators)."""
    return _effects.mutated_inputs(node)


CONSTRUCT_OPS = frozenset({"prim::ListConstruct", "prim::TupleConstruct", "prim::DictConstruct"})


def _alias_sources(node: Node) -> list[Value]:
    """The inputs that ``node``'s outputs may share memory with (or contain)."""
    if node.kind in CONSTRUCT_OPS:
        return list(node.inputs)
    written = [node.inputs[i] for i in mutated_inputs(node) if i < len(node.inputs)]
    if written:  # an in-place op returns the tensor it wrote
        return written
    if node.kind in ALIAS_OPS and node.inputs:
        return [node.inputs[0]]
    return _schema_alias_sources(node)


def _alias_sets(t) -> set[str]:
    """The alias set names a schema type (or its element types) carries, wildcards aside."""
    names: set[str] = set()
    alias = getattr(t, "alias", None)
    if alias is not None:
        names.update(a for a in alias.sets if a != "*")
    for inner in (getattr(t, "elem", None), *getattr(t, "elems", ())):
        if inner is not None:
            names |= _alias_sets(inner)
    return names


def _schema_alias_sources(node: Node) -> list[Value]:
    """Inputs whose schema alias set a return shares (``Tensor(a) self -> Tensor(a)[]``): views the
    hand list does not name (``split_with_sizes``, ``tensor_split``, ``swapaxes``...)."""
    schema = getattr(node, "schema", None)
    if schema is None:
        return []
    returned: set[str] = set()
    for r in getattr(schema, "returns", ()):
        returned |= _alias_sets(r.type)
    if not returned:
        return []
    args = list(getattr(schema, "arguments", ()))
    return [node.inputs[i] for i, a in enumerate(args) if i < len(node.inputs) and _alias_sets(a.type) & returned]


def alias_class(value: Value) -> list[Value]:
    """Every value that may share memory with ``value`` (views, in-place results, containers)."""
    seen: dict[int, Value] = {}
    stack = [value]
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen[id(v)] = v
        n = v.node
        stack.extend(_alias_sources(n))  # up: what v is a view of
        if n.kind == "prim::Loop":  # a loop result is its initial value or a body result
            k = v.offset
            stack += [n.inputs[2 + k], n.blocks[0].inputs[1 + k], n.blocks[0].outputs[1 + k]]
        elif n.kind == "prim::If":
            stack += [b.outputs[v.offset] for b in n.blocks]
        for use in v.uses:  # down: views of v, and where v flows through control flow
            user = use.user
            if v in _alias_sources(user):
                stack.extend(user.outputs)
            elif user.kind == "prim::Loop" and use.offset >= 2:
                stack += [user.blocks[0].inputs[use.offset - 1], user.outputs[use.offset - 2]]
            elif user.kind == "prim::Return" and user.owning_block.owning_node is not None:
                owner = user.owning_block.owning_node
                k = use.offset - 1 if owner.kind == "prim::Loop" else use.offset
                if 0 <= k < len(owner.outputs):
                    stack.append(owner.outputs[k])
                if owner.kind == "prim::Loop" and 1 <= use.offset < len(owner.blocks[0].inputs):
                    stack.append(owner.blocks[0].inputs[use.offset])
        if v.node.kind == "prim::Param" and v.node.owning_block.owning_node is not None:
            owner = v.node.owning_block.owning_node  # a loop-carried input: its initial value
            if owner.kind == "prim::Loop" and v.offset >= 1:  # or the previous iteration's result
                stack += [owner.inputs[v.offset + 1], owner.blocks[0].outputs[v.offset]]
    return list(seen.values())


def is_mutated(value: Value) -> bool:
    """True if anything writes to ``value`` or to a value that may share its memory."""
    for v in alias_class(value):
        for use in v.uses:
            if use.offset in mutated_inputs(use.user):
                return True
    return False


def mutated_values(graph: Graph) -> set[int]:
    """``id`` of every value of ``graph`` that something may write to (one pass over the graph).

    ``id(v) in mutated_values(g)`` answers :func:`is_mutated` for all values at once.
    """
    out: set[int] = set()
    for node in graph.all_nodes():
        for i in mutated_inputs(node):
            if i < len(node.inputs) and id(node.inputs[i]) not in out:
                out.update(id(v) for v in alias_class(node.inputs[i]))
    return out


_MISSING = object()


def const_or(value: Value, default: Any = _MISSING) -> Any:
    """The constant value of ``value``, or ``default`` when it is not a known constant.

    A parameter constant parsed without its data (``param=`` and no ``value``) is not known.
    """
    if is_const(value):
        return value.node.attrs.get("value")
    if default is _MISSING:
        raise ValueError(f"%{value.name} is not a constant")
    return default


def is_const(value: Value) -> bool:
    """True for a ``prim::Constant`` whose value is known.

    Not known: a parameter parsed without its data (``param=`` only), an opaque
    tensor dump (``tensor=``), a function value (``name=``/``graph=``). A constant
    without attributes is ``None``.
    """
    n = value.node
    return n.kind == "prim::Constant" and ("value" in n.attrs or not n.attrs)


def dtype_of(value: Value) -> str | None:
    t = value.type
    return t.dtype if isinstance(t, TensorType) else None


def is_floating(dtype: str | None) -> bool:
    return dtype is not None and (dtype.startswith("float") or dtype.startswith("bfloat")
                                  or dtype.startswith("complex"))


def is_numeric_scalar_type(t) -> bool:
    return isinstance(t, (IntType, FloatType))


def walk_blocks(block: Block) -> Iterator[Block]:
    """``block`` and every block nested in it."""
    yield block
    for n in block.nodes:
        for b in n.blocks:
            yield from walk_blocks(b)


def count_nodes(graph: Graph) -> int:
    return sum(1 for _ in graph.all_nodes())


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
    """The op without its overload name: ``aten::add.Tensor`` -> ``aten::add``."""
    ns, _, name = node.kind.partition("::")
    return f"{ns}::{name.split('.', 1)[0]}" if name else node.kind


def unique_param_name(graph: Graph, base: str) -> str:
    """``base``, or ``base.N``, so that no tensor constant of ``graph`` already uses the name."""
    taken = {n.attrs.get("param") for n in graph.all_nodes() if n.kind == "prim::Constant"}
    if base not in taken:
        return base
    i = 1
    while f"{base}.{i}" in taken:
        i += 1
    return f"{base}.{i}"
