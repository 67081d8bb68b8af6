"""``fold_identity_tests``: ``a is b`` / ``a is not b`` on tensors decided from where they come from.

Scripted ``nn.MultiheadAttention`` picks its in-projection by object identity (``query is key``,
``key is value``): left as ``prim::If``s, they cut the model around control flow and leave the
engines lists and unknown sizes. Torch's ops give a new tensor object except the few that may
return their input itself (``contiguous``, ``to``, eval ``dropout``, in-place ops...), so:

- the same SSA value is the same object: ``True``;
- two values traced back through those identity-keeping ops to distinct roots, each a graph input
  or the output of an op that always makes a new object, and not both graph inputs (the caller may
  pass one tensor twice): ``False``;
- two roots that are constants of different shapes, dtypes or bytes (folded values: a DETR's learned
  queries with no input behind them) cannot be one object: ``False``.

A list's elements are its objects: ``prim::ListUnpack`` of a list built by ``prim::ListConstruct``
and ``aten::append``s in one block gives back the appended values. ``True`` needs SSA identity to
be torch's: before any rewrite that may merge values (peephole's ``x + 0 -> x``, CSE). After them
(``same_ssa=False``, in the simplify fixpoint, once the outer ``if``s are gone) only ``False`` is
decided: merging never makes two distinct values out of one object.
"""
from __future__ import annotations

from ..ir.graph import Graph, Node, Value
from ..ir.types import NoneType, OptionalType, TensorType
from ._util import base_kind

__all__ = ["fold_identity_tests"]

#: ops that may return their (first) input object itself (checked against torch: ``flatten`` with
#: start == end, ``to``/``float()``/``cpu()`` of what it is already, ``contiguous`` of a contiguous
#: tensor, ``sum_to_size`` of its own size, dropout in eval or with p=0...)
_MAY_RETURN_INPUT = frozenset({
    "aten::contiguous", "aten::to", "aten::type_as", "aten::flatten", "aten::dropout", "aten::feature_dropout",
    "aten::alpha_dropout", "aten::feature_alpha_dropout", "aten::positive", "aten::conj", "aten::resolve_conj",
    "aten::resolve_neg", "aten::real", "aten::atleast_1d", "aten::atleast_2d", "aten::atleast_3d",
    "aten::_unwrap_optional", "aten::to_dense", "aten::requires_grad_", "aten::align_as", "aten::refine_names",
    "aten::rename", "aten::sum_to_size", "aten::cpu", "aten::cuda", "aten::float", "aten::double", "aten::half",
    "aten::bfloat16", "aten::long", "aten::int", "aten::short", "aten::char", "aten::byte", "aten::bool", "aten::type",
    "aten::data", "aten::lift", "aten::lift_fresh",
})


def _root(v: Value, graph: Graph) -> tuple[Value, bool]:
    """(the object ``v`` is, as far as known; True if that root makes a new object or is a graph input)."""
    seen = 0
    while seen < 64:
        seen += 1
        n = v.node
        kind = base_kind(n)
        if any(v is i for i in graph.inputs):
            return v, True
        if kind in _MAY_RETURN_INPUT or (kind.startswith("aten::") and kind.endswith("_") and not kind.endswith("__")):
            if not n.inputs:
                return v, False
            v = n.inputs[0]
            continue
        if kind == "prim::ListUnpack":
            elem = _list_element(n, v.offset)
            if elem is None:
                return v, False
            v = elem
            continue
        fresh = kind.startswith("aten::") and len(n.outputs) >= 1 and not n.blocks and \
            not kind.startswith("aten::__") and kind not in ("aten::append", "aten::list", "aten::copy")
        return v, fresh
    return v, False


def _list_element(unpack: Node, j: int) -> Value | None:
    """The ``j``-th element of the list ``unpack`` unpacks, when ``remove_list_mutation`` can tell it
    (a ``ListConstruct`` and straight-line writes in its block built it)."""
    from .list_mutation import list_elements

    elems = list_elements(unpack.inputs[0], unpack)
    return elems[j] if elems is not None and len(elems) == len(unpack.outputs) else None


def _decide(n: Node, graph: Graph, same_ssa: bool) -> bool | None:
    a, b = n.inputs
    if not all(isinstance(v.type, TensorType) for v in (a, b)):
        return None
    (ra, fa), (rb, fb) = _root(a, graph), _root(b, graph)
    if ra is rb:
        return True if same_ssa else None
    graph_inputs = [r for r in (ra, rb) if any(r is i for i in graph.inputs)]
    if fa and fb and len(graph_inputs) < 2:
        return False
    if _different_constants(ra, rb):
        return False
    return None


def _different_constants(a: Value, b: Value) -> bool:
    """True if ``a`` and ``b`` are constant tensors that differ (shape, dtype or a byte): one object
    would have one value. Equal ones may be one object (tied weights, a folded ``contiguous``)."""
    if a.node.kind != "prim::Constant" or b.node.kind != "prim::Constant":
        return False
    import numpy as np

    va, vb = a.node.attrs.get("value"), b.node.attrs.get("value")
    if not isinstance(va, np.ndarray) or not isinstance(vb, np.ndarray):
        return False
    return va.shape != vb.shape or va.dtype != vb.dtype or va.tobytes() != vb.tobytes()


def fold_identity_tests(graph: Graph, same_ssa: bool = True) -> bool:
    """Replace each decidable tensor ``aten::__is__`` / ``aten::__isnot__`` by a constant; True if any.
    ``same_ssa``: one SSA value is one object (False once passes may have merged values)."""
    changed = False
    for n in list(graph.all_nodes()):
        if n.kind not in ("aten::__is__", "aten::__isnot__") or len(n.inputs) != 2:
            continue
        if any(isinstance(v.type, (NoneType, OptionalType)) for v in n.inputs):
            continue
        same = _decide(n, graph, same_ssa)
        if same is None:
            continue
        c = graph.insert_constant(same if n.kind == "aten::__is__" else not same, before=n)
        n.output.replace_all_uses_with(c)
        n.destroy()
        changed = True
    return changed
