"""Half precision at float32 speed: float16/bfloat16 nodes compute in float32 (torch's "opmath").

torch's CPU kernels compute float16 and bfloat16 in float32 and round each result
once. At load, after shape propagation, :func:`widen_half` gives every node with a
half tensor that no listed backend has an out or native kernel for (only the
generic torch fallback would take it), but one has for float32, exactly that: its
half inputs become float32 (``aten::to``; a constant such as a weight is converted
here, once), it computes in float32, and each half output is rounded back by an
``aten::to`` after it: one rounding per op, as torch.

With an engine backend listed (``whole``), every half node a backend runs in
float32 is widened, half kernel or not, and a rounding followed by a widening,
both inserted here, is dropped: runs of nodes compute in float32 end to end, in
one engine, with casts only at their boundary (what ONNX Runtime's inserted
casts do), within a few half ulps of torch; a model's own casts are kept.
Dispatch still never picks a kernel for a dtype it does not list: the widened node's
dtypes are float32.

Skipped: ops given a ``ScalarType`` argument (the dtype is the op's subject),
ops whose schema writes or aliases (in-place ops; views, but with ``whole`` in a
graph without in-place writes, where a view of a float32 copy reads the same values), half tensors in lists,
nodes mixing a half dtype with another floating one.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..ir.types import TensorType

HALF = ("float16", "bfloat16")
_CODES = {"float16": 5, "bfloat16": 15, "float32": 6}   # torch ScalarType codes
_STRUCTURAL = ("prim::Constant", "prim::If", "prim::Loop", "prim::Param", "prim::Return")


def _has_kernel(op: str, dtypes: Sequence[str], table, backends: Sequence[str]) -> bool:
    from ..dispatch.resolve import accepts_dtypes

    return any(accepts_dtypes(k, dtypes) for b in backends for kind in ("out", "native")
               for k in table.lookup(op, b, kind))


def _aliases(schema):
    return [a.type.alias for a in (*schema.arguments, *getattr(schema, "returns", ()))
            if getattr(a.type, "alias", None) is not None]


def _widenable(node, schema, views: bool) -> bool:
    """No write or alias in the schema (``views``: no write), no dtype argument given (``mean(x,
    dtype=None)`` is widened)."""
    if any(a.is_write or not views for a in _aliases(schema)):
        return False
    return not any("ScalarType" in str(a.type) and i < len(node.inputs) and not _is_none(node.inputs[i])
                   for i, a in enumerate(schema.arguments))


def _is_none(v) -> bool:
    return v.node.kind == "prim::Constant" and "value" not in v.node.attrs


def _half(t) -> bool:
    return isinstance(t, TensorType) and t.dtype in HALF


def widen_half(graph, registry, backends: Sequence[str], *, whole: bool = False) -> list[str]:
    """Widen the half nodes no backend runs (``whole``: all those a backend runs in float32) in place;
    returns their ops, one per widened node."""
    from ..dispatch.resolve import dispatch_dtypes, node_op

    table = registry.kernel_table
    widened: list[str] = []
    converted: dict[int, object] = {}   # one float32 copy per half constant, shared by its users
    inserted: dict[int, object] = {}    # the casts this pass inserted, by id
    # a widened view reads a float32 copy: right while nothing writes in place (a functional graph)
    views = whole and not any(a.is_write for n in graph.all_nodes() if n.schema is not None for a in _aliases(n.schema))
    for node in list(graph.all_nodes()):
        schema = node.schema
        if node.owning_block is None or schema is None or node.kind in _STRUCTURAL or node.blocks:
            continue
        dts = dispatch_dtypes(node)
        floats = {d for d in dts if d in HALF or d.startswith(("float", "complex"))}
        if len(floats) != 1 or floats.pop() not in HALF or not _widenable(node, schema, views):
            continue   # one half dtype only: a mix (heaviside(half, float)) is torch's to accept or reject
        if any(not isinstance(v.type, TensorType) and "float16" in str(v.type) for v in (*node.inputs, *node.outputs)):
            continue   # a list or tuple of half tensors
        op = node_op(node, schema)
        wide = tuple(sorted({"float32" if d in HALF else d for d in dts}))
        if not whole and _has_kernel(op, dts, table, backends) or not _has_kernel(op, wide, table, backends):
            continue
        _widen(node, converted, inserted)
        widened.append(op)
    if whole:
        _drop_round_trips(inserted)
    return widened


def _drop_round_trips(inserted: dict) -> None:
    """Each inserted widening of an inserted rounding of a float32 value reads that value instead;
    a rounding left unread goes."""
    for n in list(inserted.values()):
        src = n.inputs[0].node
        if n.output.type.dtype != "float32" or id(src) not in inserted or src.inputs[0].type.dtype != "float32":
            continue
        n.output.replace_all_uses_with(src.inputs[0])
        n.destroy()
        del inserted[id(n)]
        if not src.output.uses:
            src.destroy()
            del inserted[id(src)]


def _to(g, value, dtype: str, at):
    """``aten::to(value, dtype)`` inserted before ``at``."""
    with g.inserting_before(at):
        code = g.insert_constant(_CODES[dtype])
        false = g.insert_constant(False)
        none = g.insert_constant(None)
        n = g.insert("aten::to", (value, code, false, false, none), (value.type.with_dtype(dtype),))
    return n


def _widen(node, converted: dict, inserted: dict) -> None:
    g = node.graph
    for i, v in enumerate(node.inputs):
        if not _half(v.type):
            continue
        if v.node.kind == "prim::Constant" and isinstance(v.node.attrs.get("value"), np.ndarray):
            wide = converted.get(id(v))
            if wide is None:   # a weight: converted once, here
                from ..ir.constants import unique_param_name

                value = np.asarray(v.node.attrs["value"]).astype(np.float32)
                wide = g.insert_constant(value, v.type.with_dtype("float32"), before=node)
                name = v.node.attrs.get("param")
                if name:
                    wide.node.attrs["param"] = unique_param_name(g, f"{name}.float32")
                converted[id(v)] = wide
            old = v.node
            node.replace_input(i, wide)
            if not old.outputs[0].uses:
                old.destroy()
        else:
            cast = _to(g, v, "float32", node)
            inserted[id(cast)] = cast
            node.replace_input(i, cast.output)
    after = node.next
    for out in node.outputs:
        if not _half(out.type):
            continue
        half = out.type.dtype
        out.type = out.type.with_dtype("float32")
        users = list(out.uses)
        cast = _to(g, out, half, after)
        inserted[id(cast)] = cast
        rounded = cast.output
        rounded.type = out.type.with_dtype(half)
        for use in users:   # the graph's outputs too (uses by its return node)
            use.user._set_input(use.offset, rounded)
