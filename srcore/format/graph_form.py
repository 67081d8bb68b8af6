"""The prepared cache's second form of a graph: JSON that builds the :class:`Graph` without the IR parser.

A prepared-cache entry (``srcore.runtime.prepared_cache``) carries its graph as IR text like every ``.srm``
file, and also, under ``graph_form``, this form of the graph the text parses to: value names and types,
node kinds, inputs, attributes, sources and blocks, in program order. A hit builds the graph from it with
``Graph``'s own methods: no lexer, no parser and none of their imports (~17 M instructions of digits' hit).

:func:`encode` writes the form only for a graph it carries exactly (plain JSON attribute values: no tuples,
no arrays but the file's parameters, no subgraphs; the common types) and only if :func:`decode` of it gives
the same graph as the parse (:func:`same_graph`: kinds, names, types, attributes with their Python types,
sources, metadata, blocks, the name table). Anything else is None: the entry keeps the text alone, which is
always what a load falls back to.
"""
from __future__ import annotations

from typing import Any, Mapping

from .._fastjson import loads
from ..ir.graph import Block, Graph, SourceLocation
from ..ir.types import SIMPLE_TYPES, ListType, TensorType, _SimpleType, lazy_type

__all__ = ["encode", "decode", "same_graph", "VERSION"]

VERSION = 1
_PLAIN = (str, int, float, bool, type(None))


class _Unsupported(Exception):
    pass


def encode(graph: Graph, params: Mapping[str, Any] | None) -> str | None:
    """``graph`` (as parsed from a file's text with ``params``) in this form, or None if the form cannot carry it
    exactly."""
    try:
        import json

        form = _Encoder(params).graph(graph)
        text = json.dumps(form, separators=(",", ":"))
    except (_Unsupported, TypeError, ValueError):
        return None
    try:
        back = decode(text, params)
    except (ValueError, TypeError, KeyError, IndexError):
        return None
    return text if same_graph(graph, back) else None


class _Encoder:
    def __init__(self, params: Mapping[str, Any] | None):
        self.params = params
        self.types: list = []
        self.type_ids: dict = {}
        self.value_ids: dict[int, int] = {}

    def graph(self, g: Graph) -> dict:
        block = self.block(g.block)
        return {"version": VERSION, "types": self.types, "names": sorted(g._names), "counter": g._counter,
                "block": block}

    def define(self, values) -> list:
        out = []
        for v in values:
            if not isinstance(v.name, str):
                raise _Unsupported("a value without a name")
            self.value_ids[id(v)] = len(self.value_ids)
            out.append([v.name, self.type_id(v.type)])
        return out

    def refs(self, values) -> list[int]:
        return [self.value_ids[id(v)] for v in values]

    def block(self, b: Block) -> list:
        inputs = self.define(b.inputs)
        nodes = [self.node(n) for n in b.nodes]
        return [inputs, nodes, self.refs(b.outputs)]

    def node(self, n) -> list:
        if n.schema is not None:
            raise _Unsupported("a resolved schema")
        attrs = dict(n.attrs)
        if n.kind == "prim::Constant" and "param" in attrs and "value" in attrs:
            name = attrs["param"]
            if self.params is None or not isinstance(name, str) or self.params.get(name) is not attrs["value"]:
                raise _Unsupported("a parameter that is not the file's array")
            del attrs["value"]   # decode puts the file's array back
        _check_plain(attrs)
        _check_plain(n.meta)
        src = n.source
        if src is not None:
            if src.in_text or type(src.line) not in (int, type(None)) or type(src.col) not in (int, type(None)):
                raise _Unsupported("a source in the text")
            src = [src.file, src.line, src.col]
        inputs = self.refs(n.inputs)
        blocks = [self.block(b) for b in n.blocks]
        return [n.kind, inputs, attrs, src, n.meta or None, blocks, self.define(n.outputs)]

    def type_id(self, t) -> int:
        key = (type(t), t)
        i = self.type_ids.get(key)
        if i is None:
            enc = self.type(t)
            i = self.type_ids[key] = len(self.types)
            self.types.append(enc)
        return i

    def type(self, t) -> list:
        if isinstance(t, _SimpleType):
            if SIMPLE_TYPES.get(t._name) != t:
                raise _Unsupported(f"type {t!r}")
            return ["s", t._name]
        if type(t) is TensorType:
            if t.qparams is not None or (t.shape is not None and any(type(d) not in (int, str, type(None))
                                                                     for d in t.shape)):
                raise _Unsupported(f"type {t}")
            return ["t", t.dtype, None if t.shape is None else list(t.shape)]
        if type(t) is ListType:
            return ["l", self.type_id(t.elem)]
        if type(t) is lazy_type("OptionalType"):
            return ["o", self.type_id(t.elem)]
        if type(t) is lazy_type("TupleType"):
            return ["u", [self.type_id(e) for e in t.elems]]
        raise _Unsupported(f"type {t}")


def _check_plain(x: Any) -> None:
    """``x`` comes back from JSON as it is: str keys, lists, ``str``/``int``/``float``/``bool``/None (Python's JSON
    writes and reads ``Infinity`` and ``NaN``)."""
    t = type(x)
    if t is list:
        for e in x:
            _check_plain(e)
    elif t is dict:
        for k, e in x.items():
            if type(k) is not str:
                raise _Unsupported("a non-str key")
            _check_plain(e)
    elif t not in _PLAIN:
        raise _Unsupported(f"a {t.__name__} value")


def decode(text: str, params: Mapping[str, Any] | None) -> Graph:
    """The graph of :func:`encode`'s ``text``, its parameter constants given ``params``' arrays. A form this code
    does not read raises ``ValueError`` (or ``TypeError``/``KeyError``/``IndexError`` for a damaged one)."""
    form = loads(text)
    if type(form) is not dict or form.get("version") != VERSION:
        raise ValueError("not a graph form of this srcore")
    types: list = []
    for enc in form["types"]:   # an entry refers only to entries before it
        tag = enc[0]
        if tag == "s":
            t = SIMPLE_TYPES[enc[1]]
        elif tag == "t":
            t = TensorType(enc[1], enc[2])
        elif tag == "l":
            t = ListType(types[enc[1]])
        elif tag == "o":
            from ..ir.compound_types import OptionalType

            t = OptionalType(types[enc[1]])
        elif tag == "u":
            from ..ir.compound_types import TupleType

            t = TupleType(tuple(types[i] for i in enc[1]))
        else:
            raise ValueError(f"unknown type tag {tag!r}")
        types.append(t)
    g = Graph()
    values: list = []
    _decode_block(form["block"], g.block, types, values, params)
    g._names = set(form["names"])
    g._counter = form["counter"]
    return g


def _decode_block(enc: list, block: Block, types: list, values: list, params: Mapping[str, Any]) -> None:
    inputs, nodes, outputs = enc
    for name, ti in inputs:
        v = block.add_input(types[ti])
        v.name = name
        values.append(v)
    g = block.graph
    for kind, ins, attrs, src, meta, blocks, outs in nodes:
        n = g.create(kind)
        for i in ins:
            n.add_input(values[i])
        if attrs:
            if params is not None and "param" in attrs and kind == "prim::Constant":
                attrs["value"] = params[attrs["param"]]
            n.attrs = attrs
        if src is not None:
            n.source = SourceLocation(*src)
        if meta:
            n.meta = meta
        block.append(n)
        for b in blocks:
            _decode_block(b, n.add_block(), types, values, params)
        for name, ti in outs:
            v = n.add_output(types[ti])
            v.name = name
            values.append(v)
    for i in outputs:
        block.register_output(values[i])


def same_graph(a: Graph, b: Graph) -> bool:
    """True if ``a`` and ``b`` are the same graph to every reader: kinds, value names and types (equal, of one
    class), attributes and metadata (equal, of the same Python types throughout; arrays the same objects),
    sources, blocks, uses, the name table."""
    if a._names != b._names or a._counter != b._counter:
        return False
    env: dict[int, Any] = {}
    if not _same_block(a.block, b.block, env):
        return False
    # every value used by the same nodes at the same offsets, in the same order
    nodes = {id(x): y for x, y in zip(_all_nodes(a.block), _all_nodes(b.block))}
    return all([(nodes.get(id(u.user)), u.offset) for u in x.uses] == [(u.user, u.offset) for u in env[id(x)].uses]
               for x in _all_values(a.block))


def _all_nodes(block: Block):
    yield block.param_node
    for n in block.nodes:
        yield n
        for b in n.blocks:
            yield from _all_nodes(b)
    yield block.return_node


def _all_values(block: Block):
    for n in _all_nodes(block):
        yield from n.outputs


def _same_values(xs, ys, env) -> bool:
    if len(xs) != len(ys):
        return False
    for x, y in zip(xs, ys):
        if x.name != y.name or type(x.type) is not type(y.type) or x.type != y.type or x.offset != y.offset:
            return False
        env[id(x)] = y
    return True


def _same_block(a: Block, b: Block, env) -> bool:
    if not _same_values(a.inputs, b.inputs, env):
        return False
    na, nb = list(a.nodes), list(b.nodes)
    if len(na) != len(nb):
        return False
    for x, y in zip(na, nb):
        if (x.kind != y.kind or len(x.inputs) != len(y.inputs) or any(env.get(id(v)) is not w
                                                                       for v, w in zip(x.inputs, y.inputs))):
            return False
        if not (_same_data(x.attrs, y.attrs) and _same_data(x.meta, y.meta)):
            return False
        if x.source != y.source or (x.source is not None and x.source.in_text != y.source.in_text):
            return False
        if x.schema is not None or y.schema is not None or len(x.blocks) != len(y.blocks):
            return False
        if not all(_same_block(p, q, env) for p, q in zip(x.blocks, y.blocks)):
            return False
        if not _same_values(x.outputs, y.outputs, env):
            return False
    return len(a.outputs) == len(b.outputs) and all(env.get(id(v)) is w for v, w in zip(a.outputs, b.outputs))


def _same_data(x: Any, y: Any) -> bool:
    if type(x) is not type(y):
        return False
    if type(x) is list:
        return len(x) == len(y) and all(_same_data(p, q) for p, q in zip(x, y))
    if type(x) is dict:
        return list(x) == list(y) and all(_same_data(x[k], y[k]) for k in x)
    if type(x) is float:
        return x == y or (x != x and y != y)   # NaN: the text and JSON carry no payload either
    if type(x) in _PLAIN:
        return x == y
    return x is y   # arrays: the file's own
