"""Aliasing: which inputs a node writes, and which values may share memory.

Derived from the schemas' alias annotations, as TorchScript's alias analysis
does: an argument typed ``Tensor(a!)`` is written in place; a return whose
alias set meets an argument's (``Tensor(a) self -> Tensor(a)``), or that
carries the wildcard (``t(*)``: an element of a container argument), or a type
variable of an argument (``t[] l -> t[]``), may share that argument's memory.
Name tables serve only where a node has no schema (graphs before schema
resolution), plus two facts no schema states:

* :data:`CONTAINER_OPS`: ``prim::`` packing and unpacking (declared with ``Any``)
  hold or are their inputs;
* :data:`KERNEL_ALIASES`: ops whose srcore kernels may return their input
  although torch's schema promises a fresh tensor (dropout in eval mode
  returns its input; ``type_as`` to the same dtype does too).

Passes (DCE, CSE, constant folding, fusion), the runtime's liveness and the
partitioner all read aliasing from here.
"""
from __future__ import annotations

from .graph import Graph, Node, Value
from .names import base_op as _base

__all__ = ["mutated_inputs", "alias_sources", "alias_class", "is_mutated", "mutated_values", "may_alias_inputs",
           "CONTAINER_MUTATORS", "VIEW_OPS", "CONTAINER_OPS", "KERNEL_ALIASES"]

#: without a schema: list/dict ops that write their first input
CONTAINER_MUTATORS = frozenset({
    "aten::append", "aten::insert", "aten::pop", "aten::clear", "aten::extend", "aten::_set_item",
    "aten::remove", "aten::__setitem__", "aten::reverse", "aten::sort", "aten::update",
    "aten::setdefault", "aten::popitem", "aten::Delete", "aten::__delitem__",
})

#: without a schema: ops whose output may share memory with their first input
VIEW_OPS = frozenset({
    "aten::view", "aten::reshape", "aten::t", "aten::transpose", "aten::permute", "aten::select",
    "aten::slice", "aten::squeeze", "aten::unsqueeze", "aten::expand", "aten::expand_as",
    "aten::narrow", "aten::flatten", "aten::as_strided", "aten::contiguous", "aten::detach",
    "aten::to", "aten::__getitem__", "aten::view_as", "aten::reshape_as", "aten::unflatten",
    "aten::chunk", "aten::split", "aten::unbind", "aten::alias", "aten::movedim", "aten::diagonal",
    "aten::numpy_T", "aten::real", "aten::unfold",
})

#: containers: construction holds every input, unpacking and indexing return (part of) the first
CONTAINER_OPS = frozenset({"prim::ListConstruct", "prim::TupleConstruct", "prim::DictConstruct"})
UNPACK_OPS = frozenset({"prim::ListUnpack", "prim::TupleUnpack", "prim::TupleIndex", "prim::unchecked_cast"})

#: srcore kernels that may return their (first) input though torch's schema says the result is fresh
KERNEL_ALIASES = frozenset({"aten::dropout", "aten::feature_dropout", "aten::alpha_dropout", "aten::type_as"})

_TYPE_VAR_PATTERN = r"^(t\d*|K|V|Any)$"


def _is_type_var(name: str) -> bool:
    """``re.match(_TYPE_VAR_PATTERN, name)`` with str methods (``$`` also before a final newline, ``\\d`` as
    ``str.isdecimal``): a load checks every schema's type names, and compiling the pattern was ~0.1 ms of
    a cold start (tests/test_ir_name_checks.py checks it against the regex)."""
    if name.endswith("\n"):
        name = name[:-1]
    return name in ("K", "V", "Any") or (name[:1] == "t" and (len(name) == 1 or name[1:].isdecimal()))


#: per schema object (by identity: hashing a schema hashes every argument and type, and the passes ask
#: for the same few schemas thousands of times a load): (the schema, its mutable argument positions,
#: the argument positions its returns may alias); schemas are frozen
_BY_SCHEMA: dict[int, tuple] = {}
_MAX_SCHEMAS = 4096


def _schema_facts(schema) -> tuple:
    facts = _BY_SCHEMA.get(id(schema))
    if facts is None or facts[0] is not schema:
        if len(_BY_SCHEMA) >= _MAX_SCHEMAS:
            _BY_SCHEMA.clear()
        mutable = tuple(i for i, a in enumerate(schema.arguments) if a.type.is_mutable())
        facts = _BY_SCHEMA[id(schema)] = (schema, mutable, _schema_sources(schema))
    return facts


def mutated_inputs(node: Node) -> list[int]:
    """Indices of the inputs ``node`` writes to: its schema's ``(a!)`` arguments; without a schema,
    the first input of a container mutator or of an ``aten::foo_`` in-place op."""
    schema = node.schema
    if schema is not None:
        n = len(node.inputs)
        return [i for i in _schema_facts(schema)[1] if i < n]
    if node.kind in CONTAINER_MUTATORS:
        return [0] if node.inputs else []
    name = node.kind.rpartition("::")[2]
    if node.kind.startswith("aten::") and name.endswith("_") and not name.endswith("__") and node.inputs:
        return [0]
    return []


def _sets(t) -> set[str]:
    """Alias set names a schema type carries, its element types included (``*`` kept)."""
    names: set[str] = set()
    alias = getattr(t, "alias", None)
    if alias is not None:
        names.update(alias.sets)
        names.update(alias.after or ())
    for inner in (getattr(t, "elem", None), *getattr(t, "elems", ()), *getattr(t, "args", ())):
        if inner is not None:
            names |= _sets(inner)
    return names


def _type_vars(t) -> set[str]:
    names: set[str] = set()
    name = getattr(t, "name", None)
    if isinstance(name, str) and _is_type_var(name):
        names.add(name)
    for inner in (getattr(t, "elem", None), *getattr(t, "elems", ()), *getattr(t, "args", ())):
        if inner is not None:
            names |= _type_vars(inner)
    return names


def _schema_sources(schema) -> tuple[int, ...]:
    """Argument positions a return of ``schema`` may alias (by alias sets, wildcard, type variables)."""
    ret_sets: set[str] = set()
    ret_vars: set[str] = set()
    for r in schema.returns:
        ret_sets |= _sets(r.type)
        ret_vars |= _type_vars(r.type)
    wildcard = "*" in ret_sets
    ret_sets.discard("*")
    out = []
    for i, a in enumerate(schema.arguments):
        a_sets = _sets(a.type) - {"*"}
        if (a_sets & ret_sets) or (ret_vars & _type_vars(a.type)) or (wildcard and (a_sets or _type_vars(a.type))):
            out.append(i)
    return tuple(out)


def alias_sources(node: Node) -> list[Value]:
    """The inputs ``node``'s outputs may share memory with (or contain)."""
    if node.kind in CONTAINER_OPS:
        return list(node.inputs)
    written = [node.inputs[i] for i in mutated_inputs(node) if i < len(node.inputs)]
    if written:  # an in-place op returns the tensor it wrote
        return written
    if node.kind in UNPACK_OPS or node.kind in KERNEL_ALIASES or _base(node.kind) in KERNEL_ALIASES:
        return [node.inputs[0]] if node.inputs else []
    schema = node.schema
    if schema is not None:
        return [node.inputs[i] for i in _schema_facts(schema)[2] if i < len(node.inputs)]
    if (node.kind in VIEW_OPS or _base(node.kind) in VIEW_OPS) and node.inputs:
        return [node.inputs[0]]
    return []


def may_alias_inputs(node: Node) -> bool:
    """True if an output of ``node`` may share memory with one of its inputs."""
    return bool(alias_sources(node))


def alias_class(value: Value) -> list[Value]:
    """Every value that may share memory with ``value`` (views, in-place results, containers, and
    the values it flows to or from through ``prim::If``/``prim::Loop``)."""
    seen: dict[int, Value] = {}
    stack = [value]
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen[id(v)] = v
        n = v.node
        stack.extend(alias_sources(n))  # up: what v is a view of
        if n.kind == "prim::Loop":  # a loop result is its initial value or a body result
            k = v.offset
            stack += [n.inputs[2 + k], n.blocks[0].inputs[1 + k], n.blocks[0].outputs[1 + k]]
        elif n.kind == "prim::If":
            stack += [b.outputs[v.offset] for b in n.blocks]
        for use in v.uses:  # down: views of v, and where v flows through control flow
            user = use.user
            if v in alias_sources(user):
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
