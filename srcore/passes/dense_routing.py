"""``dense_routing``: a mixture-of-experts dispatch whose row count depends on the data, computed on
every row under its mask instead.

An expert of a routed layer sees only the tokens routed to it::

    tok, slot = torch.where(idx == e)                # or nonzero(as_tuple=True)
    y = expert(tokens[tok]) * w[tok, slot, None]     # rows picked by the data
    out = out.index_add(0, tok, y)                   # and summed back

Every value between the ``where`` and the ``index_add`` has a length known only at run time, so no
engine can plan it and each of its nodes is a call of its own (ten per expert). Every op between is
row-wise, so the same result is ``out + sum_slots(where(mask, expert(tokens) * w, 0))`` on the whole,
statically shaped, tensors: a row the mask leaves out is computed and then dropped (the ``where``,
not a multiply by 0, so an inf or NaN it makes is dropped too), and a row picked twice (a token
routed to one expert from two slots) is summed twice, as ``index_add`` does.

The rewrite is exact but does the expert's work for every token (``n_experts / k`` times the routed
work), which only pays while the calls it removes cost more. The choice is on a layer's experts
together (the masks read off one routing tensor), by the multiply-adds ``macs`` of their ``linear`` /
``matmul`` nodes on the dense rows: the two forms broke even near :data:`BREAK_EVEN_MACS` (2**21) on
trt_like at 1 thread (``python -m benchmarks.dense_routing_ab``, Intel SPR, CPU time, 2026-11-29:
dense ÷ routed 0.71x at 2**20 MACs, 0.72x at 2**21, 1.17x at 2**22, 1.24x at 2**23), but that is one
machine's. So only far from it, :data:`MARGIN` times either side, does the count decide alone (dense
below, routed above); between, the load times both forms of the layer on the running machine
(:class:`RoutingLayer`, :mod:`.routing_timer`, ``srcore.runtime.routing_choice``: cut out of the graph,
loaded on the load's backends, called alternately) and keeps the faster, the choice cached per machine.
Run outside a load (no timer), the pass keeps the bound ``macs <= BREAK_EVEN_MACS`` there; an explicit
``max_macs`` is a fixed bound (tests, the benchmark's two forms).

Recognised, for a statically shaped ``mask`` and its index tensors ``c_0 .. c_{r-1}``: ``where(mask)``
/ ``nonzero_numpy(mask)`` unpacked or indexed, ``nonzero(mask)[:, a]`` (squeezed or flattened for a 1-D
mask), or the bool mask itself as the only index (``x[mask]``, ``out[mask] = y``):

- sources: ``X[c_a, c_b, ...]`` (``aten::index``, the indices a rising subset of the ``c``s,
  each matching the length of the mask dim) and ``index_select(X, 0, c_a)``;
- row-wise ops on their results: ``linear``, ``matmul`` by a 2-D non-routed tensor, pointwise
  unary ops and binary ops (the other operand a scalar, a routed value of the same rank or a tensor
  broadcast only along the row's own dims), ``unsqueeze`` / ``softmax`` / ``log_softmax`` off the row
  dim, ``layer_norm``;
- sinks: ``index_add(out, 0, c_a, y)`` and ``index_put(out, [c_0, ..., c_{r-1}], y, accumulate)``
  (every mask dim: each row written once), or ``index_put(out, [c_a], y, True)``.

Anything else using a routed value (returned, reshaped, reduced over rows, ...) leaves the layer as
it is.
"""
from __future__ import annotations

import hashlib
import json
import math

import attrs

from ..ir.graph import Graph, Node, Value
from ..ir.types import TensorType
from ..ir.alias import alias_class, alias_sources, mutated_inputs
from ..ops.shapes.elementwise import broadcast_shapes
from ._util import base_kind, const_or, has_side_effects, is_const
from .triggers import ROUTING_SOURCES

#: multiply-adds of a layer's experts on their dense rows where the two forms broke even on the machine the
#: project measured (see the docstring): the bound when no load times the layer
BREAK_EVEN_MACS = 1 << 21
#: how far from the break-even the count decides without timing (dense at <= 1/MARGIN of it, routed above
#: MARGIN times it): the measured ratios moved ~1.7x over 4x of MACs, so 16x either side is far from any
#: machine's crossing
MARGIN = 16

_UNARY = frozenset({
    "aten::relu", "aten::gelu", "aten::silu", "aten::sigmoid", "aten::tanh", "aten::exp", "aten::neg",
    "aten::abs", "aten::sqrt", "aten::rsqrt", "aten::log", "aten::erf", "aten::elu", "aten::leaky_relu",
    "aten::hardtanh", "aten::hardswish", "aten::hardsigmoid", "aten::softplus", "aten::mish", "aten::relu6",
    "aten::square", "aten::reciprocal", "aten::clone", "aten::contiguous", "aten::dropout", "aten::clamp",
    "aten::to",
})
_BINARY = frozenset({"aten::add", "aten::sub", "aten::mul", "aten::div", "aten::maximum", "aten::minimum",
                     "aten::pow", "aten::rsub"})
_SOURCES = ROUTING_SOURCES


class _Bail(Exception):
    """The region is not one this pass rewrites."""


def dense_routing(graph: Graph, *, rules=None, schemas=None, max_macs: int | None = None) -> bool:
    roots = [(n.inputs[0], n) for n in graph.nodes if base_kind(n) in _SOURCES and len(n.inputs) == 1
             and len(n.outputs) == 1]
    seen = set()
    for n in graph.nodes:   # x[mask] / out[mask] = y: a mask as the only index
        if n.kind == "prim::ListConstruct" and len(n.inputs) == 1 and id(n.inputs[0]) not in seen and any(
                base_kind(u.user) in ("aten::index", "aten::index_put", "aten::index_put_") for u in n.output.uses):
            seen.add(id(n.inputs[0]))
            roots.append((n.inputs[0], None))
    if not roots:
        return False
    from ..ops.shapes import propagate
    from .routing_timer import KEEP_ROUTED, TIMER

    timer = TIMER.get() if max_macs is None else None
    if timer is KEEP_ROUTED:
        return False
    types = propagate(graph, rules=rules, schemas=schemas).types
    # the choice is on a layer's experts together: the masks read off one routing tensor
    # (``idx == e`` for every e) share it, whatever the data gives each expert
    layers: dict[int, list] = {}
    for mask, src in roots:
        try:
            region = _Region(graph, mask, src, types).analyse()
        except _Bail:
            continue
        layers.setdefault(_routing_key(mask), []).append(region)
    dense = {key for key, regions in layers.items()
             if _dense_pays(graph, regions, types, max_macs, timer, rules, schemas)}
    changed = False
    for mask, src in roots:
        if _routing_key(mask) not in dense:
            continue
        try:   # again: an earlier rewrite replaced the value this one's sink updates
            plan = _Region(graph, mask, src, types).analyse()
        except _Bail:
            continue
        plan.rewrite()
        changed = True
    if changed:   # every expert's dense input is the same reshape of the tokens (and of the gates)
        from .cse import eliminate_common_subexpressions

        eliminate_common_subexpressions(graph)
    return changed


def _dense_pays(graph: Graph, regions: list, types, max_macs, timer, rules, schemas) -> bool:
    """Whether a layer (its experts' ``regions``) is made dense: by ``max_macs`` if given, by the
    count far from the break-even, else by ``timer`` on its two forms (the bound without one)."""
    macs = sum(r.macs for r in regions)
    if max_macs is not None:
        return macs <= max_macs
    if macs * MARGIN <= BREAK_EVEN_MACS or macs > BREAK_EVEN_MACS * MARGIN or timer is None:
        return macs <= BREAK_EVEN_MACS
    layer = RoutingLayer.cut(graph, regions, types, macs, rules, schemas)
    if layer is None:   # not a standalone trial (a nested block, an integer input): the bound
        return macs <= BREAK_EVEN_MACS
    return bool(timer(layer))


@attrs.frozen
class RoutingLayer:
    """A routed layer cut out of its graph in both forms, for a timer: ``routed`` computes the
    layer's results from its inputs (the masks among them, at ``masks``; every other one a float
    tensor of static shape) as the model does, ``dense`` the same after this pass. ``key`` identifies
    the problem (ops and shapes, not weights) for a cache; ``macs`` is the dense form's count."""

    routed: Graph
    dense: Graph
    masks: tuple[int, ...]
    key: str
    macs: int

    @classmethod
    def cut(cls, graph: Graph, regions: list, types, macs: int, rules=None, schemas=None) -> "RoutingLayer | None":
        members: set[int] = set()
        for r in regions:
            if r.block is not graph.block:
                return None
            members.update(id(n) for n in r.nodes)
        nodes = [n for n in graph.block.nodes if id(n) in members]
        made = {id(o) for n in nodes for o in n.outputs}
        inputs, outputs = [], []
        for n in nodes:
            for v in n.inputs:
                if id(v) not in made and v.node.kind != "prim::Constant" and v not in inputs:
                    inputs.append(v)
            for o in n.outputs:
                if any(id(u.user) not in members for u in o.uses) and o not in outputs:
                    outputs.append(o)
        mask_ids = {id(r.mask) for r in regions}
        shapes = {r.mshape for r in regions}
        if not outputs or len(shapes) != 1:
            return None
        for v in inputs:
            t = types.get(v, v.type)
            if _static(t) is None or (id(v) not in mask_ids and t.dtype not in ("float32", "float64")):
                return None
        from ..partition.extract import segment_graph

        g = segment_graph(nodes, inputs, outputs, types)
        dense = g.copy()
        from .dce import eliminate_dead_code

        if not dense_routing(dense, rules=rules, schemas=schemas, max_macs=1 << 62):
            return None
        eliminate_dead_code(dense)   # the routed nodes the rewrite left unread
        if any(base_kind(n) in _LEFT for n in dense.all_nodes()):
            return None   # (cut out, a region read something it could not see: the count decides)
        sig = [[str(types.get(v, v.type)) for v in inputs]]
        sig += [[n.kind, [str(types.get(o, o.type)) for o in n.outputs],
                 [repr(const_or(v)) if is_const(v) and not hasattr(const_or(v), "shape") else "" for v in n.inputs]]
                for n in nodes]
        key = hashlib.sha256(json.dumps(sig).encode()).hexdigest()[:24]
        return cls(g, dense, tuple(i for i, v in enumerate(inputs) if id(v) in mask_ids), key, macs)


#: ops of a routed form no dense form keeps
_LEFT = frozenset({"aten::nonzero", "aten::nonzero_numpy", "aten::index_add", "aten::index_add_",
                   "aten::index_put", "aten::index_put_", "aten::index", "aten::index_select"})


#: ops a mask is read off its routing tensor through (``idx == e``, ``one_hot(...)[e]``, ``& keep``)
_MASK_OPS = frozenset({"aten::eq", "aten::ne", "aten::gt", "aten::ge", "aten::lt", "aten::le", "aten::select",
                       "aten::bitwise_and", "aten::logical_and", "aten::__and__", "aten::unsqueeze",
                       "aten::squeeze", "aten::permute", "aten::t", "aten::transpose", "aten::reshape",
                       "aten::view", "aten::slice", "aten::to", "aten::one_hot"})


def _routing_key(mask: Value) -> int:
    """The tensor ``mask`` is read off (its first operand, through compares, selects and views)."""
    v = mask
    while v.node.kind != "prim::Param" and base_kind(v.node) in _MASK_OPS and v.node.inputs:
        v = v.node.inputs[0]
    return id(v)


def _static(t) -> tuple | None:
    if isinstance(t, TensorType) and t.shape is not None and all(type(d) is int for d in t.shape):
        return tuple(t.shape)
    return None


def _private(out: Value, sink: Node) -> bool:
    """True if the in-place ``sink`` may become a new value: ``out`` is a fresh tensor of the sink's
    block (no input, constant or view) and nothing shares its memory but what the in-place ops on it
    return, and views taken after every write to it that nothing writes through (HF Mixtral's
    ``final.reshape(b, s, d)``: a read of the result, which the rewrite gives them), so no other value
    sees the write."""
    src = out.node
    if src.owning_block is not sink.owning_block or src.kind in ("prim::Param", "prim::Constant") \
            or src.blocks or alias_sources(src) or has_side_effects(src):
        return False
    aliases = alias_class(out)
    writes = [v.node for v in aliases if v.node.inputs and v.node.inputs[0] is out and 0 in mutated_inputs(v.node)]
    return all(v is out or v.node in writes or (
        v.node.owning_block is sink.owning_block and all(v.node.is_after(w) for w in writes)
        and not any(u.offset in mutated_inputs(u.user) for u in v.uses)) for v in aliases)


#: the end of a full slice (``x[:, 0]``): TorchScript's ``None``, or INT64_MAX
_MAX = 9223372036854775807


def _fail():
    raise _Bail


def _int(v: Value) -> int:
    if not is_const(v):
        raise _Bail
    x = const_or(v)
    if type(x) is not int:
        raise _Bail
    return x


class _Region:
    def __init__(self, graph: Graph, mask: Value, src: Node | None, types):
        self.g, self.mask, self.src, self.types = graph, mask, src, types
        self.macs = 0
        self.steps: list = []      # (node, kind of step, data) in graph order

    def _type(self, v: Value):
        return self.types.get(v, v.type)

    def analyse(self) -> "_Region":
        self.mshape = _static(self._type(self.mask))
        dtype = self._type(self.mask).dtype
        if not self.mshape or dtype is None or (dtype != "bool" and self.src is None):
            raise _Bail   # (where(x) of a number tensor: its nonzero elements; x[m] needs a bool m)
        r = len(self.mshape)
        self.dense: dict[int, tuple] = {}   # routed value -> its dense shape
        self.rest: dict[int, int] = {}      # routed value -> rank of a row (sparse rank - 1)
        self.comp_nodes: list[Node] = []
        if self.src is not None:   # where(mask) / nonzero(mask): its index tensors
            comps = self._components(self.src.output, r)
            self.comp = {id(c): a for c, a in comps}
            block = self.src.owning_block
            todo = {id(u.user) for c, _ in comps for u in c.uses}
        else:                      # the mask itself, the only index of x[mask]
            self.comp = {}
            block = self.g.block
            todo = {id(u.user) for u in self.mask.uses
                    if u.user.kind == "prim::ListConstruct" and len(u.user.inputs) == 1}
        self.block = block
        node = block.nodes.first
        while todo and node is not None and node is not block.return_node:
            if id(node) in todo:
                todo.discard(id(node))
                self._step(node)
                for o in node.outputs:
                    if id(o) in self.dense or self.steps[-1][1] == "list":
                        todo.update(id(u.user) for u in o.uses)
            node = node.next
        if todo or not any(kind == "sink" for _, kind, _ in self.steps):
            raise _Bail
        return self

    @property
    def nodes(self) -> list:
        """The region's nodes (a :class:`RoutingLayer` cuts them out): the root, its index tensors'
        reads, every step, and the fresh tensor an in-place sink writes."""
        out = [self.src] if self.src is not None else []
        out += self.comp_nodes + [n for n, _, _ in self.steps]
        out += [d[1].node for n, kind, d in self.steps if kind == "sink" and n.kind.endswith("_")]
        return out

    def _components(self, v: Value, r: int) -> list:
        """``(value, mask dim)`` of each index tensor read off ``where(mask)`` (unpacked, or its
        ``[a]``) or ``nonzero(mask)`` (``[:, a]``, or squeezed / flattened for a 1-D mask)."""
        out = []
        for u in v.uses:
            n, k = u.user, base_kind(u.user)
            if u.offset != 0 or n.owning_block is not self.src.owning_block:
                raise _Bail
            self.comp_nodes.append(n)
            if k == "prim::ListUnpack" and len(n.outputs) == r:
                out += [(c, a) for a, c in enumerate(n.outputs)]
            elif k == "aten::__getitem__" and base_kind(self.src) != "aten::nonzero":
                a = _int(n.inputs[1])
                out.append((n.output, a % r if -r <= a < r else _fail()))
            elif base_kind(self.src) != "aten::nonzero":
                raise _Bail
            elif k == "aten::slice" and _int(n.inputs[1]) == 0 and all(
                    const_or(x, 0) in (None, 0) for x in n.inputs[2:3]) and const_or(n.inputs[3], 1) in (
                    None, _MAX) and const_or(n.inputs[4], 0) == 1:
                out += self._components(n.output, r)   # nz[:, a]: the full slice first
            elif k == "aten::select" and _int(n.inputs[1]) in (1, -1):
                a = _int(n.inputs[2])
                out.append((n.output, a % r if -r <= a < r else _fail()))
            elif r == 1 and (k == "aten::squeeze" and (len(n.inputs) == 1 or _int(n.inputs[1]) in (1, -1))
                             or k in ("aten::reshape", "aten::view") and const_or(n.inputs[1], None) == [-1]
                             or k == "aten::flatten" and len(n.inputs) == 1):
                out.append((n.output, 0))
            else:
                raise _Bail
        return out

    # -- classification -------------------------------------------------------------------------

    def _routed(self, v: Value) -> bool:
        return id(v) in self.dense

    def _step(self, n: Node) -> None:
        k = base_kind(n)
        if any(id(v) in self.leads for v in n.inputs):
            x = n.inputs[0]
            row = list(self.dense.get(id(x), ())[len(self.mshape):])
            if k not in ("aten::reshape", "aten::view") or id(x) not in self.leads or len(n.inputs) != 2 \
                    or const_or(n.inputs[1], None) != [-1] + row:
                raise _Bail   # (1, rows, ...) read any other way
            self._set(n.output, self.dense[id(x)], self.rest[id(x)])
            self.steps.append((n, "alias", None))
        elif k == "prim::ListConstruct":
            self._index_list(n)
            self.steps.append((n, "list", None))
        elif k == "aten::index" and n.inputs[1].node.kind == "prim::ListConstruct" and \
                id(n.inputs[1].node) in self.lists and not self._routed(n.inputs[0]):
            self._source(n, n.inputs[0], self.lists[id(n.inputs[1].node)],
                         getattr(self, "_leads", {}).get(id(n.inputs[1].node), 0))
        elif k == "aten::index_select" and id(n.inputs[2]) in self.comp and not self._routed(n.inputs[0]):
            if _int(n.inputs[1]) != 0:
                raise _Bail
            self._source(n, n.inputs[0], [self.comp[id(n.inputs[2])]])
        elif k in ("aten::index_add", "aten::index_add_"):
            self._index_add(n)
        elif k in ("aten::index_put", "aten::index_put_") and id(n.inputs[1].node) in self.lists:
            self._index_put(n)
        elif any(id(v) in self.comp for v in n.inputs):
            raise _Bail   # an index tensor used some other way (returned, counted, ...)
        else:
            self._rowwise(n, k)

    @property
    def lists(self) -> dict:
        return getattr(self, "_lists", {})

    def _index_list(self, n: Node) -> None:
        if not self.comp:   # [mask]: every mask dim
            axes = list(range(len(self.mshape)))
        else:
            lead = 0   # x[None, tok]: new leading dims before the index (HF Mixtral's hidden[None, top_x])
            while lead < len(n.inputs) and is_const(n.inputs[lead]) and const_or(n.inputs[lead], 0) is None:
                lead += 1
            axes = [self.comp.get(id(v)) for v in n.inputs[lead:]]
            if None in axes or len(set(axes)) != len(axes):
                raise _Bail   # a None (":") entry after an index, a routed value or an index twice
            if lead:
                self._leads = {**getattr(self, "_leads", {}), id(n): lead}
        self._lists = {**self.lists, id(n): axes}

    def _source(self, n: Node, x: Value, axes: list, lead: int = 0) -> None:
        xs = _static(self._type(x))
        if xs is None or lead and xs[:lead] != (1,) * lead:
            raise _Bail
        xs = xs[lead:]   # x[None, tok] of an x with leading 1s (unsqueeze(0)): a (1, rows, ...) result
        if len(axes) > len(xs) or any(xs[j] != self.mshape[a] for j, a in enumerate(axes)):
            raise _Bail
        order = sorted(range(len(axes)), key=axes.__getitem__)   # x's indexed dims in mask order
        perm = order + list(range(len(axes), len(xs))) if order != sorted(order) else None
        if lead and perm is not None:
            raise _Bail
        if lead:   # read only through a reshape to (-1, row dims) (_step): the routed rows again
            self.leads[id(n.output)] = lead
        shape = tuple(xs[axes.index(m)] if m in axes else 1 for m in range(len(self.mshape))) + xs[len(axes):]
        self._set(n.output, shape, len(xs) - len(axes))
        self.steps.append((n, "source", (x, shape, perm)))

    @property
    def leads(self) -> dict:
        """routed value -> the size-1 dims before its row dim (``x[None, tok]``)"""
        if not hasattr(self, "_lead_of"):
            self._lead_of = {}
        return self._lead_of

    def _set(self, v: Value, shape: tuple, rest: int) -> None:
        self.dense[id(v)] = shape
        self.rest[id(v)] = rest

    def _rowwise(self, n: Node, k: str) -> None:
        if len(n.outputs) != 1 or n.blocks:
            raise _Bail
        x = n.inputs[0]
        if not self._routed(x):
            if k in _BINARY and len(n.inputs) > 1 and self._routed(n.inputs[1]):
                x = n.inputs[1]
            else:
                raise _Bail
        shape, rest = self.dense[id(x)], self.rest[id(x)]
        if any(self._routed(v) for v in n.inputs[1:]) and k not in _BINARY:
            raise _Bail
        out_t = self._type(n.output)
        if not isinstance(out_t, TensorType):
            raise _Bail
        data = None
        if k in _UNARY:
            if any(isinstance(self._type(v), TensorType) for v in n.inputs[1:]):
                raise _Bail   # a tensor bound (clamp): it may broadcast against the row dim
        elif k == "aten::layer_norm":
            pass
        elif k in ("aten::linear", "aten::matmul"):
            w = _static(self._type(n.inputs[1]))
            if rest < 1 or w is None or len(w) != 2:
                raise _Bail
            k_in, n_out = (w[1], w[0]) if k == "aten::linear" else w
            if shape[-1] != k_in:
                raise _Bail
            self.macs += math.prod(shape[:-1]) * k_in * n_out
            shape = shape[:-1] + (n_out,)
        elif k in _BINARY:
            shapes = [shape]
            for v in n.inputs[:2]:
                if self._routed(v):
                    if self.rest[id(v)] != rest:
                        raise _Bail   # rows of two ranks: torch lines them up by the trailing dims
                    shapes.append(self.dense[id(v)])
                elif isinstance(self._type(v), TensorType):
                    s = _static(self._type(v))
                    if s is None or len(s) > rest:
                        raise _Bail   # would broadcast against the row dim itself
                    shapes.append(s)
            if any(self._routed(v) for v in n.inputs[2:]):
                raise _Bail
            shape = broadcast_shapes(shapes, _Bail)
        elif k == "aten::unsqueeze":
            d = _int(n.inputs[1])
            d = d if d >= 0 else d + rest + 2
            if not 1 <= d <= rest + 1:
                raise _Bail
            data = d + len(self.mshape) - 1
            shape = shape[:data] + (1,) + shape[data:]
            rest += 1
        elif k in ("aten::softmax", "aten::log_softmax"):
            d = _int(n.inputs[1])
            d = d if d >= 0 else d + rest + 1
            if not 1 <= d <= rest:
                raise _Bail
            data = d + len(self.mshape) - 1
        else:
            raise _Bail
        self._set(n.output, shape, rest)
        self.steps.append((n, k, data))

    def _sink_y(self, n: Node, y: Value, out: Value) -> tuple:
        os_ = _static(self._type(out))
        if not self._routed(y) or os_ is None or self._routed(out) or id(out) in self.comp:
            raise _Bail
        if n.kind.endswith("_") and not _private(out, n):
            raise _Bail
        return os_

    def _index_add(self, n: Node) -> None:
        out, dim, index, y = n.inputs[:4]
        os_ = self._sink_y(n, y, out)
        a = self.comp.get(id(index))
        if a is None or _int(dim) not in (0, -len(os_)) or os_[0] != self.mshape[a] \
                or self.rest[id(y)] != len(os_) - 1:
            raise _Bail
        alpha = 1
        if len(n.inputs) > 4:
            if not is_const(n.inputs[4]) or type(const_or(n.inputs[4])) not in (int, float):
                raise _Bail
            alpha = const_or(n.inputs[4])
        self.steps.append((n, "sink", ("add", out, y, [a], alpha)))

    def _index_put(self, n: Node) -> None:
        out, lst, y = n.inputs[:3]
        axes = self.lists[id(lst.node)]
        if id(lst.node) in getattr(self, "_leads", {}):
            raise _Bail
        os_ = self._sink_y(n, y, out)
        acc = const_or(n.inputs[3]) if len(n.inputs) > 3 and is_const(n.inputs[3]) else None
        if type(acc) is not bool or self.rest[id(y)] != len(os_) - len(axes):
            raise _Bail   # (a narrower row would broadcast along out's dims: not seen in routers)
        whole = axes == list(range(len(self.mshape)))
        if not (whole or (acc and len(axes) == 1)) or any(os_[j] != self.mshape[a] for j, a in enumerate(axes)):
            raise _Bail   # a partial index without accumulate: a row written twice keeps either value
        self.steps.append((n, "sink", ("add" if acc else "put", out, y, axes, 1)))

    # -- rewrite --------------------------------------------------------------------------------

    def _const(self, value, before: Node) -> Value:
        return self.g.insert_constant(value, before=before)

    def _new(self, kind: str, inputs, dtype, shape, before: Node) -> Value:
        n = self.g.create(kind, inputs, [TensorType(dtype, tuple(shape))], source=before.source)
        n.insert_before(before)
        return n.output

    def rewrite(self) -> None:
        env: dict[int, Value] = {}
        for n, kind, data in self.steps:
            if kind == "list":
                continue
            if kind == "alias":
                env[id(n.output)] = env[id(n.inputs[0])]
                continue
            dtype = self._type(n.output).dtype if isinstance(self._type(n.output), TensorType) else None
            if kind == "source":
                x, shape, perm = data
                if perm is not None:   # w[slot, tok] of a (tok, slot) mask
                    xs = _static(self._type(x))
                    x = self._new("aten::permute", [x, self._const(perm, n)], dtype, [xs[p] for p in perm], n)
                if tuple(shape) == tuple(_static(self._type(x)) if perm is None else [xs[p] for p in perm]):
                    env[id(n.output)] = x   # w[tok, slot] of a (tok, slot) mask: w itself
                else:
                    env[id(n.output)] = self._new("aten::reshape", [x, self._const(list(shape), n)], dtype, shape, n)
            elif kind == "sink":
                self._sink(n, data, env)
            else:
                ins = [env.get(id(v), v) for v in n.inputs]
                if data is not None:   # a dim moved past the mask's dims
                    ins[1] = self._const(data, n)
                env[id(n.output)] = self._new(n.kind, ins, dtype, self.dense[id(n.output)], n)

    def _sink(self, n: Node, data, env) -> None:
        how, out, y, axes, alpha = data
        os_ = _static(self._type(out))
        dtype, ydtype = self._type(out).dtype, self._type(y).dtype
        yd, ys = env[id(y)], self.dense[id(y)]
        r = len(self.mshape)
        mshape = self.mshape + (1,) * (len(ys) - r)   # the mask over a row's own dims too
        mask = self.mask
        if self._type(mask).dtype != "bool":
            mask = self._new("aten::ne", [mask, self._const(0, n)], "bool", self.mshape, n)
        mask = self._new("aten::reshape", [mask, self._const(list(mshape), n)], "bool", mshape, n)
        if how == "put":   # out[c_0, ..., c_{r-1}] = y: out's leading dims are the mask's
            res = self._new("aten::where", [mask, yd, out], dtype, os_, n)
        else:
            zero = 0.0 if ydtype is None or "float" in ydtype else 0
            full = broadcast_shapes((mshape, ys), _Bail)
            z = self._new("aten::where", [mask, yd, self._const(zero, n)], ydtype, full, n)
            others = [m for m in range(r) if m not in axes]
            zs = full
            if others:   # rows picked from several slots summed, as index_add accumulates repeats
                zs = tuple(d for m, d in enumerate(full) if m not in others)
                z = self._new("aten::sum", [z, self._const(others, n), self._const(False, n), self._const(None, n)],
                              ydtype, zs, n)
            if alpha != 1:
                z = self._new("aten::mul", [z, self._const(alpha, n)], ydtype, zs, n)
            res = self._new("aten::add", [out, z, self._const(1, n)], dtype, os_, n)
        n.output.replace_all_uses_with(res)
        if n.kind.endswith("_"):   # out.index_add_(...): what reads out after the write reads res
            out.replace_uses_after(res, n)
            n.destroy()
