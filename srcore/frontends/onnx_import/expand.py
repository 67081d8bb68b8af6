"""Ops srcore has no converter for that ONNX defines by a function: replaced by that function's body.

Some ONNX ops are specified as a composition of others (a *function*, possibly *context dependent*:
built for the node's attributes and input types), e.g. SequenceMap (a Loop of SequenceAt, the body,
SequenceInsert). A default-domain node whose op (or op version) the converter table lacks and whose
schema has such a body at the model's opset is made a call of a model-local function holding the
body, which the loader then inlines as it inlines the model's own functions. Nodes the table converts
are left alone; a body that itself needs an unconverted op is expanded again (a few rounds).
"""
from __future__ import annotations

import functools

from ...errors import ConversionError

#: the domain of the local functions made here (inlined before conversion: never seen in a graph)
DOMAIN = "srcore.expanded"
_ROUNDS = 4


def expand_function_ops(onnx, proto, opset: int, where: str):
    """``proto`` with every node :func:`_schema_to_expand` picks replaced by a call of a model-local
    function holding its ONNX function body (``proto`` itself when there is none)."""
    for _ in range(_ROUNDS):
        if not any(_schema_to_expand(onnx, n, opset) for g in _graphs(proto.graph) for n in g.node):
            return proto
        types = _value_types(onnx, proto)
        made = []
        for g in _graphs(proto.graph):
            for i, n in enumerate(g.node):
                schema = _schema_to_expand(onnx, n, opset)
                if schema is not None:
                    f = _body(onnx, n, schema, opset, types, where)
                    if f is not None and _convertible(onnx, f, opset):
                        made.append(_to_call(onnx, n, f, len(made), i, schema, opset))
        if not made:
            return proto
        proto.functions.extend(made)
        if not any(o.domain == DOMAIN for o in proto.opset_import):
            proto.opset_import.append(onnx.helper.make_opsetid(DOMAIN, 1))
        try:
            import onnx.inliner   # a submodule `import onnx` does not load

            proto = onnx.inliner.inline_local_functions(proto)
        except Exception as exc:  # noqa: BLE001 - any onnx failure is the model's
            raise ConversionError(f"{where}: cannot expand {', '.join(sorted({f.name for f in made}))} into "
                                  f"their ONNX function bodies: {exc}") from None
        left = [n for g in _graphs(proto.graph) for n in g.node if n.domain == DOMAIN]
        if left:   # the inliner leaves a call it cannot inline: never passed on as an unknown domain
            raise ConversionError(f"{where}: {left[0].op_type.rsplit('_', 1)[0]} node {left[0].name or '(unnamed)'!r}: "
                                  f"onnx's inliner did not expand its ONNX function body")
        for i in reversed(range(len(proto.opset_import))):
            if proto.opset_import[i].domain == DOMAIN:
                del proto.opset_import[i]
    return proto


def _schema_to_expand(onnx, node, opset: int):
    """The schema of ``node`` if it is a default-domain op the converter table lacks at this version and
    ONNX defines it by a function at ``opset``; else None."""
    if node.domain not in ("", "ai.onnx") or not _expandable(node.op_type, opset):
        return None
    return onnx.defs.get_schema(node.op_type, opset, "")


@functools.lru_cache(maxsize=None)
def _expandable(op_type: str, opset: int) -> bool:
    """(Cached: every node of every model loaded is asked.)"""
    import onnx

    from .ops import TABLE

    try:
        schema = onnx.defs.get_schema(op_type, opset, "")
    except Exception:  # noqa: BLE001 - SchemaError: an unknown op, reported by the converter
        return False
    entry = TABLE.get(op_type)
    if entry is not None and schema.since_version in entry.versions:
        return False
    return _body_version(schema, opset) is not None


def _body_version(schema, opset: int):
    """The newest opset <= ``opset`` at which ``schema`` has a (context-dependent) function body."""
    versions = [v for v in (*schema.function_opset_versions, *schema.context_dependent_function_opset_versions)
                if v <= opset]
    return max(versions) if versions else None


def _body(onnx, node, schema, opset: int, types: dict, where: str):
    """``node``'s ONNX function body (a FunctionProto) at the model's opset, or None (see :func:`_at_opset`)."""
    version = _body_version(schema, opset)
    f = onnx.FunctionProto()
    try:
        if version in schema.context_dependent_function_opset_versions:
            missing = [i for i in node.input if i and i not in types]
            if missing:
                raise ValueError(f"the types of inputs {missing} are unknown")
            tys = [(types[i] if i else onnx.TypeProto()).SerializeToString() for i in node.input]
            f.ParseFromString(schema.get_context_dependent_function_with_opset_version(version, node.SerializeToString(),
                                                                                      tys))
        else:
            f.ParseFromString(schema.get_function_with_opset_version(version))
    except Exception as exc:  # noqa: BLE001 - onnx's builders raise ValueError / RuntimeError
        label = node.name or "(unnamed)"
        raise ConversionError(f"{where}: {node.op_type} node {label!r}: srcore has no converter for it and its "
                              f"ONNX function body cannot be built: {exc}") from None
    if not any(o.domain in ("", "ai.onnx") for o in f.opset_import):
        f.opset_import.append(onnx.helper.make_opsetid("", version))
    return _at_opset(onnx, f, node, opset)


def _at_opset(onnx, f, node, opset: int):
    """``f`` with its default-domain opset made the model's (onnx's inliner inlines only functions of
    the model's opsets), when each op ONNX's body uses means the same at both (the same schema version;
    the node's own subgraphs, written at the model's opset, aside); else None (not expanded)."""
    own = {o for a in node.attribute for g in ([a.g] if a.HasField("g") else []) + list(a.graphs)
           for sg in _graphs(g) for n in sg.node for o in n.output}
    for o in f.opset_import:
        if o.domain not in ("", "ai.onnx") or o.version == opset:
            continue
        for g in (f, *_graphs_of(f)):
            for n in g.node:
                if n.domain not in ("", "ai.onnx") or (n.output and set(n.output) <= own):
                    continue
                try:
                    same = (onnx.defs.get_schema(n.op_type, o.version, "").since_version
                            == onnx.defs.get_schema(n.op_type, opset, "").since_version)
                except Exception:  # noqa: BLE001 - SchemaError
                    same = False
                if not same:
                    return _converted(onnx, f, opset)
        o.version = opset
    return f


def _converted(onnx, f, opset: int):
    """Body ``f`` brought to ``opset`` by onnx's version converter (its adapters: what a version bump
    changed), or None when it cannot."""
    helper = onnx.helper
    g = helper.make_graph(list(f.node), f.name or "body", [helper.make_value_info(i, onnx.TypeProto()) for i in f.input],
                          [helper.make_value_info(o, onnx.TypeProto()) for o in f.output])
    try:
        up = onnx.version_converter.convert_version(helper.make_model(g, opset_imports=list(f.opset_import)), opset)
    except Exception:  # noqa: BLE001 - the converter raises RuntimeError / ConvertError
        return None
    del f.node[:]
    f.node.extend(up.graph.node)
    del f.opset_import[:]
    f.opset_import.extend(up.opset_import)
    return f


def _convertible(onnx, f, opset: int) -> bool:
    """Every node of body ``f`` (subgraphs included) is a default-domain op the table converts at the
    body's opset, or one ONNX defines by a function in turn (else the node is left for the converter
    to refuse by its own name)."""
    from .ops import TABLE

    fopset = next((o.version for o in f.opset_import if o.domain in ("", "ai.onnx")), opset)
    for g in (f, *_graphs_of(f)):
        for n in g.node:
            if n.domain not in ("", "ai.onnx"):
                return False
            try:
                schema = onnx.defs.get_schema(n.op_type, fopset, "")
            except Exception:  # noqa: BLE001 - SchemaError
                return False
            entry = TABLE.get(n.op_type)
            if entry is not None and schema.since_version in entry.versions:
                continue
            if _body_version(schema, fopset) is None:
                return False
    return True


def _to_call(onnx, node, f, k: int, index: int, schema, opset: int):
    """Make ``node`` a call of ``f`` (named and put in :data:`DOMAIN`); ``f``. The body's nodes are named
    after ``node``, so that an error in one of them names the node it came from."""
    label = node.name or f"#{index}"
    for g in (f, *_graphs_of(f)):
        for inner in g.node:
            inner.name = f"{label}/{node.op_type}:{inner.name or inner.op_type}"
    f.name, f.domain = f"{node.op_type}_{k}", DOMAIN
    if _body_version(schema, opset) in schema.context_dependent_function_opset_versions:
        del node.attribute[:]   # built into the body
    node.op_type, node.domain = f.name, DOMAIN
    return f


def _graphs_of(f):
    """The subgraphs of function ``f``'s nodes, nested ones included."""
    for n in f.node:
        for a in n.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from _graphs(g)


def _graphs(graph):
    """``graph`` and every subgraph in it, outermost first."""
    yield graph
    for n in graph.node:
        for a in n.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from _graphs(g)


def _value_types(onnx, proto) -> dict:
    """Value name -> TypeProto, from ONNX shape inference of ``proto`` (subgraphs included)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
    except Exception:  # noqa: BLE001 - the types then come from the declared ones only
        inferred = proto
    out = {}
    for g in _graphs(inferred.graph):
        for t in g.initializer:
            out[t.name] = onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims))
        for vi in (*g.input, *g.value_info, *g.output):
            if vi.type.WhichOneof("value") is not None:
                out[vi.name] = vi.type
    return out
