"""The abstract interpreter: walk a graph's nodes in order and apply the op rules.

``prim::If`` joins its branches (a branch that always raises does not take
part; a known condition picks one branch); ``prim::Loop`` iterates its body
until the carried types stop changing (bounded by ``MAX_LOOP_ITERATIONS``).
"""
from __future__ import annotations

from typing import Any

import attrs

from ..._repr import shared_repr
from ...errors import QuantizationError, ShapeError
from ...ir.quant import QDTYPES
from ...ir.graph import Block, Graph, Node, Value
from ...ir.types import INT, ListType, OptionalType, TensorType, TupleType, Type
from .base import A, BOTTOM, Ctx, UNKNOWN, shape_error
from .reuse import NodeFacts, record, snapshot

MAX_LOOP_ITERATIONS = 8
#: loops with a known trip count up to this run exactly (precise carried shapes)
MAX_UNROLL = 64


@attrs.define(eq=False)
@shared_repr
class PropagationResult:
    """What ``propagate`` found. It also sets ``value.type`` on every value it reaches."""

    types: dict = attrs.field(factory=dict)        # Value -> Type
    known: dict = attrs.field(factory=dict)        # Value -> known Python value (non-tensors)
    missing_rules: list = attrs.field(factory=list)  # nodes whose op has no rule
    #: per node, what its rule read and gave (``propagate(..., previous=this)`` reuses it)
    facts: dict = attrs.field(factory=dict, repr=False)
    evaluated: int = 0   # nodes whose rule ran
    reused: int = 0      # nodes whose facts came from ``previous``
    #: (rules, schemas, strict) the facts were found with: another propagation reuses them only with the same
    tables: tuple = attrs.field(default=(), repr=False)

    def type_of(self, v: Value) -> Type | None:
        return self.types.get(v)


class _Diverged(Exception):
    """A block that always raises (prim::RaiseException on its straight-line path)."""


def _schema_and_names(node: Node, schemas):
    schema = node.schema
    if schema is None and not node.kind.startswith("prim::") and "shapes.unresolved" not in node.meta:
        schema = node.schema = _resolve(node, schemas)  # cached on the node: the runtime propagates repeatedly
        if schema is None:
            node.meta["shapes.unresolved"] = True  # do not retry on every propagation
    if schema is None:
        return node.kind, None, None
    names = _NAMES.get(id(schema))
    if names is None:
        names = [a.name for a in schema.arguments]
        _NAMES[id(schema)] = names
        _KEEP.append(schema)
    if len(names) != len(node.inputs):
        names = None  # vararg or an unusual node: fall back to positions
    return schema.qualified_name, names, schema


_NAMES: dict[int, list] = {}
_KEEP: list = []  # keep schemas alive so that ids stay unique


def _resolve(node: Node, schemas):
    if schemas is None:
        return None
    try:
        return schemas.resolve(node)
    except Exception:
        return None


def _lacks_qparams(r) -> bool:
    """A quantized tensor (or list of them) whose rule gave no quantization parameters."""
    t = r.type if isinstance(r, A) else r
    if isinstance(t, ListType):
        t = t.elem
    return isinstance(t, TensorType) and t.dtype in QDTYPES and t.qparams is None


def _default_tables():
    """The process-wide registry's shape rules (core + plugins) and schemas."""
    from ...plugin.manager import get_plugin_manager

    registry = get_plugin_manager().registry
    return registry.shape_rules, registry.schemas


def join_types(a: Type | None, b: Type | None) -> Type | None:
    if a == b:
        return a
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        dtype = a.dtype if a.dtype == b.dtype else None
        qparams = a.qparams if dtype is not None and a.qparams == b.qparams else None
        if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
            return TensorType(dtype, None, qparams)
        return TensorType(dtype, tuple(x if x == y else None for x, y in zip(a.shape, b.shape)), qparams)
    if isinstance(a, ListType) and isinstance(b, ListType):
        return ListType(join_types(a.elem, b.elem) or a.elem)
    if isinstance(a, TupleType) and isinstance(b, TupleType) and len(a.elems) == len(b.elems):
        return TupleType(tuple(join_types(x, y) for x, y in zip(a.elems, b.elems)))
    return None


def join(a: A | None, b: A | None, declared: Type | None) -> A:
    if a is None or a.known is BOTTOM:
        return b
    if b is None or b.known is BOTTOM:
        return a
    t = join_types(a.type, b.type)
    if t is None:
        t = declared
    known = a.known if a.known is not UNKNOWN and _same(a.known, b.known) else UNKNOWN
    elems = None
    if a.elems is not None and b.elems is not None and len(a.elems) == len(b.elems):
        elems = [join(x, y, None) for x, y in zip(a.elems, b.elems)]
    return A(t, known, elems)


def _same(x, y) -> bool:
    return type(x) is type(y) and x == y


def _same_a(a: A, b: A) -> bool:
    if a.type != b.type or not (_same(a.known, b.known) or (a.known is UNKNOWN and b.known is UNKNOWN)):
        return False
    if (a.elems is None) != (b.elems is None):
        return False
    return a.elems is None or (len(a.elems) == len(b.elems) and all(map(_same_a, a.elems, b.elems)))


class Interpreter:
    def __init__(self, strict: bool, rules, schemas, previous: dict | None = None):
        self.strict = strict
        self.rules, self.schemas = rules, schemas
        self.state: dict[Value, A] = {}
        self.missing: dict[int, Node] = {}
        self.previous = previous or {}   # Node -> [NodeFacts] of an earlier propagation
        self.facts: dict[Node, list[NodeFacts]] = {}
        self.evaluated = self.reused = 0

    def get(self, v: Value) -> A:
        a = self.state.get(v)
        if a is None:
            a = A(v.type)
            self.state[v] = a
        return a

    def set(self, v: Value, a: A) -> None:
        self.state[v] = a
        if a.type is not None:
            v.type = a.type

    # -- blocks ---------------------------------------------------------------------------
    def run_block(self, block: Block, inputs: list[A]) -> list[A]:
        for v, a in zip(block.inputs, inputs):
            self.set(v, a)
        for node in block.nodes:
            if node.kind == "prim::RaiseException":
                self.run_node(node)
                raise _Diverged()
            self.run_node(node)
        return [self.get(v) for v in block.outputs]

    def run_node(self, node: Node) -> None:
        if node.kind == "prim::If":
            return self.run_if(node)
        if node.kind == "prim::Loop":
            return self.run_loop(node)
        op, names, schema = _schema_and_names(node, self.schemas)
        entry = self.rules.lookup(op)
        if entry is None:
            if self.strict:
                raise shape_error(node, f"no shape rule for op {op!r}"
                                  + (f" (schema {schema})" if schema is not None else ""), op)
            self.missing[id(node)] = node
            for o in node.outputs:
                t = o.type
                if isinstance(t, TensorType):
                    t = TensorType(t.dtype, None)
                self.set(o, A(t))
            return
        fn = entry.fn
        args = [self.get(v) for v in node.inputs]
        before = self._reusable(node, args)
        if before is not None:
            for o, a in zip(node.outputs, before.replay()):
                self.set(o, a)
            self._keep(node, before)
            self.reused += 1
            return
        self.evaluated += 1
        declared = [o.type for o in node.outputs]
        read = snapshot(args)
        ctx = Ctx(node, args, names, op)
        try:
            outs = fn(ctx)
        except ShapeError:
            raise
        except QuantizationError:
            raise
        except Exception as e:  # a rule that trips over odd arguments: report it, do not crash
            raise shape_error(node, f"{_rule_of(entry)} failed: {type(e).__name__}: {e}", op) from e
        if not isinstance(outs, (list, tuple)) or not all(r is None or isinstance(r, (A, Type)) for r in outs):
            raise shape_error(node, f"{_rule_of(entry)} returned {outs!r}; a rule returns a list of one type "
                              "(or abstract value) per output", op)
        if len(outs) != len(node.outputs):
            if len(node.outputs) == 0:
                return
            raise shape_error(node, f"{_rule_of(entry)} gives {len(outs)} outputs, the node has "
                              f"{len(node.outputs)}", op)
        if any(_lacks_qparams(r) for r in outs):
            from .quantized import complete_qparams  # here: a float model never needs the quantized rules

            outs = complete_qparams(ctx, outs)
        for o, r in zip(node.outputs, outs):
            a = r if isinstance(r, A) else A(r)
            if isinstance(a.type, TensorType) and a.type.dtype is None and isinstance(o.type, TensorType) \
                    and o.type.dtype is not None and getattr(fn, "__name__", None) not in ("to", "view"):
                a = A(TensorType(o.type.dtype, a.type.shape), a.known, a.elems)
            elif isinstance(o.type, OptionalType) and a.type is None:
                a = A(o.type, a.known, a.elems)
            if isinstance(a.type, TensorType) and a.type.qparams is None and isinstance(o.type, TensorType) \
                    and o.type.qparams is not None and o.type.dtype == a.type.dtype:
                a = A(a.type.with_qparams(o.type.qparams), a.known, a.elems)  # as declared (e.g. IR text)
            self.set(o, a)
        if read is not None:
            facts = record(node, read, args, declared, [self.state[o] for o in node.outputs])
            if facts is not None:
                self._keep(node, facts)

    def _reusable(self, node: Node, args: list[A]) -> NodeFacts | None:
        for f in self.previous.get(node, ()):
            if f.fits(node, args):
                return f
        return None

    def _keep(self, node: Node, facts: NodeFacts) -> None:
        # one entry per distinct evaluation: a loop body's nodes see other facts on each trip
        kept = self.facts.setdefault(node, [])
        if facts not in kept:
            kept.append(facts)

    def _try_block(self, block: Block, inputs: list[A], lenient: bool):
        """Run a block; None if it diverges (always raises), or on a shape error when ``lenient``."""
        try:
            return self.run_block(block, inputs)
        except _Diverged:
            return None
        except ShapeError:
            if lenient:
                return None
            raise

    def run_if(self, node: Node) -> None:
        cond = self.get(node.inputs[0]).known
        then_b, else_b = node.blocks
        if isinstance(cond, bool):
            taken, dead = (then_b, else_b) if cond else (else_b, then_b)
            self._try_block(dead, [], lenient=True)  # type the dead branch, ignore its errors
            outs = self.run_block(taken, [])
        else:
            r1 = self._try_block(then_b, [], lenient=True)
            r2 = self._try_block(else_b, [], lenient=True)
            if r1 is None and r2 is None:
                try:  # both fail: re-run strictly to report the real error, if it is a shape error
                    self.run_block(then_b, [])
                    self.run_block(else_b, [])
                except _Diverged:
                    pass
                raise _Diverged()
            outs = [join(a, b, o.type) for a, b, o in
                    zip(r1 or [None] * len(node.outputs), r2 or [None] * len(node.outputs), node.outputs)]
        for o, a in zip(node.outputs, outs):
            self.set(o, A(a.type, a.known, a.elems))

    def run_loop(self, node: Node) -> None:
        body = node.blocks[0]
        carried = [self.get(v) for v in node.inputs[2:]]
        trip, cond = self.get(node.inputs[0]).known, self.get(node.inputs[1]).known
        if trip == 0 or cond is False:
            self._try_block(body, [A(INT)] + carried, lenient=True)
            state = carried
        else:
            state = None
            if isinstance(trip, int) and not isinstance(trip, bool) and trip <= MAX_UNROLL and cond is True:
                state = self._unrolled(node, body, trip, carried)
            if state is None:
                state = self._fixpoint(node, body, carried)
        for o, a in zip(node.outputs, state):
            self.set(o, A(a.type, a.known, a.elems))

    def _unrolled(self, node: Node, body: Block, trip: int, carried: list[A]) -> list[A] | None:
        """A loop of known (small) trip count runs exactly: the carried values come out precise; the
        body's own values get the join over the iterations. None when it cannot (a data-dependent
        exit, a raise): the caller falls back to the fixpoint."""
        body_values = list(body.inputs) + [o for n in _walk(body) for o in n.outputs]
        seen: dict[Value, A] = {}
        state = carried
        for i in range(trip):
            try:
                outs = self.run_block(body, [A(INT, i)] + state)
            except _Diverged:
                return None
            for v in body_values:
                seen[v] = join(seen.get(v), self.state.get(v), v.type)
            state = outs[1:]
            c = outs[0].known
            if c is False:
                break
            if c is not True:
                return None
        for v, a in seen.items():
            if a is not None:
                self.set(v, A(a.type, a.known, a.elems))
        return state

    def _fixpoint(self, node: Node, body: Block, carried: list[A]) -> list[A]:
        state = carried
        for _ in range(MAX_LOOP_ITERATIONS):
            try:
                outs = self.run_block(body, [A(INT)] + state)
            except _Diverged:
                return state
            new = [join(s, n, o.type) for s, n, o in zip(state, outs[1:], node.outputs)]
            if all(map(_same_a, new, state)):
                return state
            state = new
        # no fixpoint within the bound: widen to the declared types
        state = [A(o.type) for o in node.outputs]
        self.run_block(body, [A(INT)] + state)
        return state


def _walk(block: Block):
    for n in block.nodes:
        yield n
        for b in n.blocks:
            yield from _walk(b)


def _rule_of(entry) -> str:
    """How an error names a rule: the core's, or a plugin's with its distribution and version."""
    if entry.is_core:
        return f"the shape rule for {entry.op!r}"
    return f"the shape rule for {entry.op!r} of {entry.who}"


def propagate(graph: Graph, input_types: list | None = None, *, strict: bool = False, rules=None,
              schemas=None, previous: PropagationResult | None = None) -> PropagationResult:
    """Set the type of every value in ``graph`` from its input types; return types, known values and
    the nodes without a rule. Raises ``srcore.ShapeError`` on a shape contradiction (naming the node
    and its source) and, when ``strict``, on an op without a rule.

    ``rules`` (a :class:`~srcore.ops.shapes.table.ShapeRuleTable`) and ``schemas`` (the
    ``SchemaRegistry`` that resolves nodes without a schema) default to the process-wide
    plugin registry's: the core's rules and every installed plugin's.

    ``previous``: an earlier propagation of this graph (before passes edited it), with the same
    rules, schemas and ``strict``: the rules run again only for nodes that changed or whose inputs'
    facts did (``srcore.ops.shapes.reuse``); ``evaluated`` and ``reused`` of the result count both."""
    if rules is None or schemas is None:
        default_rules, default_schemas = _default_tables()
        rules = default_rules if rules is None else rules
        schemas = default_schemas if schemas is None else schemas
    tables = (rules, schemas, strict)
    same_tables = previous is not None and len(previous.tables) == 3 and all(
        a is b for a, b in zip(previous.tables, tables))
    it = Interpreter(strict, rules, schemas, previous.facts if same_tables else None)
    if input_types is None:
        input_types = [v.type for v in graph.inputs]
    n_missing = len(graph.inputs) - len(input_types)
    if n_missing > 0 and all(type(v.type).__name__ == "ClassType" for v in graph.inputs[:n_missing]):
        # a TorchScript module's ``self`` input: types may be given for the real inputs only
        input_types = [v.type for v in graph.inputs[:n_missing]] + list(input_types)
    if len(input_types) != len(graph.inputs):
        raise ShapeError(f"propagate: {len(input_types)} input types for a graph with "
                         f"{len(graph.inputs)} inputs")
    inputs = [t if isinstance(t, A) else A(t) for t in input_types]
    try:
        it.run_block(graph.block, inputs)
    except _Diverged:
        pass  # the graph always raises; the values computed so far keep their types
    res = PropagationResult(missing_rules=list(it.missing.values()), facts=it.facts, evaluated=it.evaluated,
                            reused=it.reused, tables=tables)
    for v, a in it.state.items():
        res.types[v] = a.type
        k = _public_known(a)
        if k is not UNKNOWN:
            res.known[v] = k
    return res


def _public_known(a: A) -> Any:
    if a.known is BOTTOM:
        return UNKNOWN
    if a.known is not UNKNOWN:
        return a.known
    if a.elems is not None and isinstance(a.type, (ListType, TupleType)) and not any(
            isinstance(e.type, TensorType) for e in a.elems):
        ks = [_public_known(e) for e in a.elems]
        if all(k is not UNKNOWN for k in ks):
            return tuple(ks) if isinstance(a.type, TupleType) else ks
    return UNKNOWN
